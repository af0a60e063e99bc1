#!/usr/bin/env python
"""Runs `transformer_tf.cli.train` (also installed as the command transformer-tf-train); see --help."""
import sys

from transformer_tf.cli.train import main

if __name__ == "__main__":
    sys.exit(main())
