"""A resumed run keeps the output grammar its run directory recorded (training.fit): a run
trained as `parsing` when that preset decoded with the tree grammar parses as it did after
`parsing` became the paper's parser, which has none."""
import json

from transformer_tf.presets import get_preset
from transformer_tf.rundir import model_dir as model_dir_lib
from transformer_tf.training.fit import _keep_recorded_grammar


def _run(grammar: str) -> model_dir_lib.RunConfig:
    preset = get_preset("parsing")
    return model_dir_lib.RunConfig(model=preset.model, training=preset.training,
                                   decoding=preset.decoding.replace(grammar=grammar),
                                   data_dir="data", preset="parsing")


def test_an_old_parsing_run_keeps_its_tree_grammar(tmp_path):
    model_dir_lib.write_run_config(tmp_path, _run("tree"))  # as trained before
    recorded = json.loads((tmp_path / model_dir_lib.RUN_CONFIG).read_text())
    assert recorded["preset"] == "parsing" and recorded["decoding"]["grammar"] == "tree"
    # Loading reads the recorded decoding: it decodes as it did.
    assert model_dir_lib.read_run_config(tmp_path).decoding.grammar == "tree"
    # Resuming with today's `parsing` (no grammar) keeps the recorded one.
    resumed = _keep_recorded_grammar(_run("none"), tmp_path)
    assert resumed.decoding == _run("tree").decoding


def test_the_same_grammar_changes_nothing(tmp_path):
    model_dir_lib.write_run_config(tmp_path, _run("none"))
    requested = _run("none")
    assert _keep_recorded_grammar(requested, tmp_path) is requested
