#!/usr/bin/env python
"""Runs `transformer_tf.cli.average_checkpoints` (also installed as the command transformer-tf-average); see --help."""
from transformer_tf.cli.launch import end_process
from transformer_tf.cli.average_checkpoints import main

if __name__ == "__main__":
    end_process(main())
