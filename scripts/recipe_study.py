#!/usr/bin/env python
"""Runs `transformer_tf.cli.recipe_study` (a study, not an installed command); see --help."""
import sys

from transformer_tf.cli.recipe_study import main

if __name__ == "__main__":
    sys.exit(main())
