#!/usr/bin/env python
"""Runs `transformer_tf.cli.prepare_data` (also installed as the command transformer-tf-prepare); see --help."""
import sys

from transformer_tf.cli.prepare_data import main

if __name__ == "__main__":
    sys.exit(main())
