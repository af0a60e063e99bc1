#!/usr/bin/env python
"""Runs `transformer_tf.cli.attention` (also installed as the command transformer-tf-attention); see --help."""
import sys

from transformer_tf.cli.attention import main

if __name__ == "__main__":
    sys.exit(main())
