"""The commands: one module per command, each with `main(argv=None) -> exit status`.

setup.py installs them as console entry points (`transformer-tf-prepare` -> prepare_data,
`-train` -> train, `-average` -> average_checkpoints, `-export` -> export,
`-export-ctranslate2` -> export_ctranslate2, `-translate` ->
translate, `-score` -> score, `-evaluate` -> evaluate, `-main` -> main_job, `-variations` -> variations,
`-attention` -> attention, `-parse-job` -> parse_job, `-parse` -> parse, `-evalb` -> evalb);
scripts/<module>.py are thin wrappers over the same functions. Both end the process
through `launch.end_process` (at once, without Python's slow teardown). A command parses
its arguments before importing TensorFlow (so --help answers at once) and runs inside
`transformer_tf.runtime.console.session` (a quiet console unless --verbose).
"""
