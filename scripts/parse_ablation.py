#!/usr/bin/env python
"""Runs `transformer_tf.cli.parse_ablation` (a study, not an installed command); see --help."""
import sys

from transformer_tf.cli.parse_ablation import main

if __name__ == "__main__":
    sys.exit(main())
