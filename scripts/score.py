#!/usr/bin/env python
"""Runs `transformer_tf.cli.score` (also installed as the command transformer-tf-score); see --help."""
import sys

from transformer_tf.cli.score import main

if __name__ == "__main__":
    sys.exit(main())
