#!/usr/bin/env python
"""Runs `transformer_tf.cli.export_ctranslate2` (also installed as the command transformer-tf-export-ctranslate2); see --help."""
from transformer_tf.cli.launch import end_process
from transformer_tf.cli.export_ctranslate2 import main

if __name__ == "__main__":
    end_process(main())
