#!/usr/bin/env python
"""Runs `transformer_tf.cli.main_job` (also installed as the command transformer-tf-main); see --help."""
from transformer_tf.cli.launch import end_process
from transformer_tf.cli.main_job import main

if __name__ == "__main__":
    end_process(main())
