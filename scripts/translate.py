#!/usr/bin/env python
"""Runs `transformer_tf.cli.translate` (also installed as the command transformer-tf-translate); see --help."""
import sys

from transformer_tf.cli.translate import main

if __name__ == "__main__":
    sys.exit(main())
