#!/usr/bin/env python
"""Runs `transformer_tf.cli.evalb` (also installed as the command transformer-tf-evalb); see --help."""
import sys

from transformer_tf.cli.evalb import main

if __name__ == "__main__":
    sys.exit(main())
