"""A resumed run keeps the output grammar its run directory recorded (training.fit): a run
trained as `parsing` when that preset decoded with the tree grammar parses as it did after
`parsing` became the paper's parser, which has none; a grammar the user gives still wins.
(The batch, the other setting kept on resume: tests/training/test_batch_by_precision.py.)"""
import json

from transformer_tf.presets import get_preset
from transformer_tf.rundir import model_dir as model_dir_lib
from transformer_tf.training.fit import TrainOptions, _keep_recorded_settings


def _run(grammar: str) -> model_dir_lib.RunConfig:
    preset = get_preset("parsing")
    return model_dir_lib.RunConfig(model=preset.model, training=preset.training,
                                   decoding=preset.decoding.replace(grammar=grammar),
                                   data_dir="data", preset="parsing")


def _keep(requested, model_dir, **decoding_overrides):
    options = TrainOptions(data_dir="data", model_dir=str(model_dir), preset="parsing",
                           decoding_overrides=decoding_overrides)
    return _keep_recorded_settings(requested, options, model_dir)


def test_an_old_parsing_run_keeps_its_tree_grammar(tmp_path):
    model_dir_lib.write_run_config(tmp_path, _run("tree"))  # as trained before
    recorded = json.loads((tmp_path / model_dir_lib.RUN_CONFIG).read_text())
    assert recorded["preset"] == "parsing" and recorded["decoding"]["grammar"] == "tree"
    # Loading reads the recorded decoding: it decodes as it did.
    assert model_dir_lib.read_run_config(tmp_path).decoding.grammar == "tree"
    # Resuming with today's `parsing` (no grammar) keeps the recorded one.
    resumed = _keep(_run("none"), tmp_path)
    assert resumed.decoding == _run("tree").decoding
    # A grammar given on resuming wins.
    assert _keep(_run("none"), tmp_path, grammar="none").decoding == _run("none").decoding


def test_the_same_grammar_changes_nothing(tmp_path):
    model_dir_lib.write_run_config(tmp_path, _run("none"))
    requested = _run("none")
    assert _keep(requested, tmp_path) is requested
