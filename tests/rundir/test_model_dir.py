"""The run directory's configuration: what blocks a resume and what does not, and old
run_config.json files keeping their meaning."""
from __future__ import annotations

import json

import pytest

from transformer_tf.presets import get_preset
from transformer_tf.rundir import model_dir as model_dir_lib


def run_config(**training_changes):
    preset = get_preset("tiny")
    return model_dir_lib.RunConfig(model=preset.model.resolved(),
                                   training=preset.training.replace(**training_changes),
                                   decoding=preset.decoding, data_dir="data", preset="tiny")


@pytest.mark.parametrize("changes", [
    dict(label_smoothing=0.2), dict(learning_rate_scale=2.0), dict(warmup_steps=7),
    dict(tokens_per_batch=1024), dict(clip_norm=1.0),
])
def test_training_knobs_never_block_a_resume(changes, tmp_path):
    model_dir_lib.check_resumable(run_config(), run_config(**changes), tmp_path)


def test_architecture_changes_block_a_resume_naming_the_field(tmp_path):
    existing = run_config()
    changed = model_dir_lib.RunConfig(**{**existing.__dict__,
                                         "model": existing.model.replace(d_ff=64)})
    with pytest.raises(ValueError, match=r"d_ff: the run's 32, requested 64"):
        model_dir_lib.check_resumable(existing, changed, tmp_path)
    # A derived size spelled out equals the same size left to its default.
    implicit = model_dir_lib.RunConfig(**{**existing.__dict__, "model": get_preset("tiny").model})
    model_dir_lib.check_resumable(existing, implicit, tmp_path)


def test_format_1_run_config_loads_with_its_meaning(tmp_path):
    # Written before label smoothing moved to training and before value_dim stopped
    # following key_dim: key_dim 4 with value_dim null meant d_v = 4.
    model = {**get_preset("tiny").model.get_config(), "key_dim": 4, "value_dim": None,
             "label_smoothing": 0.2}
    training = {k: v for k, v in get_preset("tiny").training.get_config().items()
                if k != "label_smoothing"}
    (tmp_path / model_dir_lib.RUN_CONFIG).write_text(json.dumps({
        "preset": "tiny", "data_dir": "/gone", "model": model, "training": training,
        "decoding": get_preset("tiny").decoding.get_config()}))
    run = model_dir_lib.read_run_config(tmp_path)
    assert (run.family, run.model.key_dim, run.model.resolved_value_dim) == ("transformer", 4, 4)
    assert run.training.label_smoothing == 0.2
    # Written back, it is format 2 and reads the same.
    model_dir_lib.write_run_config(tmp_path, run)
    assert json.loads((tmp_path / model_dir_lib.RUN_CONFIG).read_text())["format"] == 2
    assert model_dir_lib.read_run_config(tmp_path) == run


def test_a_small_file_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    from transformer_tf.rundir import files

    target = tmp_path / "run" / "record.json"
    files.write_json_atomically(target, {"step": 1})
    assert json.loads(target.read_text()) == {"step": 1}

    def killed(*args, **kwargs):  # the process dies between writing and renaming
        raise KeyboardInterrupt

    monkeypatch.setattr(files.pathlib.Path, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        files.write_json_atomically(target, {"step": 2})
    assert json.loads(target.read_text()) == {"step": 1}  # the old file, whole


@pytest.mark.parametrize("preset,target_language,grammar,parses", [
    ("parsing_paper", "tree", "none", True),  # the paper's parser searches unconstrained
    ("parsing_cpu", "tree", "tree", True),
    ("base", "de", "none", False),
    ("parsing_cpu", "", "tree", True),  # a run directory that recorded no language pair
    ("base", "", "none", False),
])
def test_a_run_parses_when_it_was_trained_on_a_treebank(preset, target_language, grammar,
                                                        parses, tmp_path):
    """What `export` (told nothing) makes of a run: a parser for runs trained on a treebank
    (target language "tree"), whatever their search."""
    from transformer_tf.export.saved_model import _as_parser

    chosen = get_preset(preset)
    model_dir_lib.write_run_config(tmp_path, model_dir_lib.RunConfig(
        model=chosen.model, training=chosen.training,
        decoding=chosen.decoding.replace(grammar=grammar), data_dir="unused", preset=preset,
        source_language="en" if target_language else "", target_language=target_language))
    assert model_dir_lib.read_run_config(tmp_path).parses is parses
    assert _as_parser(None, tmp_path, ids_only=False) is parses
    assert _as_parser(None, tmp_path, ids_only=True) is False
