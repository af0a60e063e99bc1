#!/usr/bin/env python
"""Runs `transformer_tf.cli.main_job` (also installed as the command transformer-tf-main); see --help."""
import sys

from transformer_tf.cli.main_job import main

if __name__ == "__main__":
    sys.exit(main())
