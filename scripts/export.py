#!/usr/bin/env python
"""Runs `transformer_tf.cli.export` (also installed as the command transformer-tf-export); see --help."""
import sys

from transformer_tf.cli.export import main

if __name__ == "__main__":
    sys.exit(main())
