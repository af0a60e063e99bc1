#!/usr/bin/env python
"""Runs `transformer_tf.cli.recipe_study` (a study, not an installed command); see --help."""
from transformer_tf.cli.launch import end_process
from transformer_tf.cli.recipe_study import main

if __name__ == "__main__":
    end_process(main())
