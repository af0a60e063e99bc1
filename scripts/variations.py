#!/usr/bin/env python
"""Runs `transformer_tf.cli.variations` (also installed as the command transformer-tf-variations); see --help."""
from transformer_tf.cli.launch import end_process
from transformer_tf.cli.variations import main

if __name__ == "__main__":
    end_process(main())
