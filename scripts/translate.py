#!/usr/bin/env python
"""Runs `transformer_tf.cli.translate` (also installed as the command transformer-tf-translate); see --help."""
from transformer_tf.cli.launch import end_process
from transformer_tf.cli.translate import main

if __name__ == "__main__":
    end_process(main())
