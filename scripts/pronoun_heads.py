#!/usr/bin/env python
"""Runs `transformer_tf.cli.pronoun_heads` (a study, not an installed command); see --help."""
import sys

from transformer_tf.cli.pronoun_heads import main

if __name__ == "__main__":
    sys.exit(main())
