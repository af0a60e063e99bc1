#!/usr/bin/env python
"""Runs `transformer_tf.cli.parse` (also installed as the command transformer-tf-parse); see --help."""
import sys

from transformer_tf.cli.parse import main

if __name__ == "__main__":
    sys.exit(main())
