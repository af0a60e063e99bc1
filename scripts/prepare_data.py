#!/usr/bin/env python
"""Runs `transformer_tf.cli.prepare_data` (also installed as the command transformer-tf-prepare); see --help."""
from transformer_tf.cli.launch import end_process
from transformer_tf.cli.prepare_data import main

if __name__ == "__main__":
    end_process(main())
