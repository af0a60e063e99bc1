#!/usr/bin/env python
"""Runs `transformer_tf.cli.pronoun_heads` (a study, not an installed command); see --help."""
from transformer_tf.cli.launch import end_process
from transformer_tf.cli.pronoun_heads import main

if __name__ == "__main__":
    end_process(main())
