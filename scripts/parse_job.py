#!/usr/bin/env python
"""Runs `transformer_tf.cli.parse_job` (also installed as the command transformer-tf-parse-job); see --help."""
from transformer_tf.cli.launch import end_process
from transformer_tf.cli.parse_job import main

if __name__ == "__main__":
    end_process(main())
