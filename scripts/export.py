#!/usr/bin/env python
"""Runs `transformer_tf.cli.export` (also installed as the command transformer-tf-export); see --help."""
from transformer_tf.cli.launch import end_process
from transformer_tf.cli.export import main

if __name__ == "__main__":
    end_process(main())
