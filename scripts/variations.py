#!/usr/bin/env python
"""Runs `transformer_tf.cli.variations` (also installed as the command transformer-tf-variations); see --help."""
import sys

from transformer_tf.cli.variations import main

if __name__ == "__main__":
    sys.exit(main())
