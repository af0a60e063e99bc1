#!/usr/bin/env python
"""Runs `transformer_tf.cli.evaluate` (also installed as the command transformer-tf-evaluate); see --help."""
import sys

from transformer_tf.cli.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
