"""Damaged checkpoints: `error: <file>: <what>` and exit 2 from average_checkpoints.py and
export.py (their `main`, in this process), the newest readable checkpoint taken where the
code chooses, one line for a checkpoint of another configuration, and exports that never
lose the version they replace."""
from __future__ import annotations

import logging
import os
import pathlib
import shutil

import numpy as np
import pytest

from transformer_tf.cli import average_checkpoints as average_cli
from transformer_tf.cli import export as export_cli
from transformer_tf.config import ModelConfig
from transformer_tf.export import saved_model
from transformer_tf.inference.loading import pick_checkpoint
from transformer_tf.models.registry import build_model
from transformer_tf.rundir import checkpoints
from transformer_tf.training import averaging

MODEL = ModelConfig(vocab_size=40, num_layers=1, d_model=8, d_ff=16, num_heads=2,
                    max_position=16)
STEPS = (10, 20, 30)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, write_checkpointed_run):
    """A run directory with training checkpoints ckpt-10, ckpt-20, ckpt-30."""
    return write_checkpointed_run(tmp_path_factory.mktemp("pristine"), MODEL, STEPS,
                                  average_last=2)


@pytest.fixture
def run(pristine, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(pristine, copy)
    return copy


def prefix(run, step) -> pathlib.Path:
    return checkpoints.checkpoint_dir(run) / f"ckpt-{step}"


def truncate(run, step):
    data = pathlib.Path(f"{prefix(run, step)}.data-00000-of-00001")
    os.truncate(data, data.stat().st_size // 2)
    return data


def garble_index(run, step):
    index = pathlib.Path(f"{prefix(run, step)}.index")
    index.write_bytes(np.random.default_rng(1).bytes(300))
    return index


def delete_files(run, step):
    for path in checkpoints.checkpoint_dir(run).glob(f"ckpt-{step}.*"):
        path.unlink()
    return pathlib.Path(f"{prefix(run, step)}.index")


DAMAGE = {"truncated data": (truncate, "truncated"),
          "garbage index": (garble_index, "not a readable checkpoint index (not an sstable"),
          "files deleted": (delete_files, "not found (no checkpoint with this prefix)")}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_export_of_a_damaged_checkpoint_names_the_file(run, damage, capsys):
    spoil, problem = DAMAGE[damage]
    spoilt = spoil(run, 20)
    code = export_cli.main(["--model-dir", str(run), "--out", str(run.parent / "export" / "1"),
                            "--checkpoint", str(prefix(run, 20))])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: {spoilt}: {problem}"), err
    # ... and offers the newest readable one of the run.
    assert err.rstrip().endswith(f"the newest readable checkpoint of {run} is {prefix(run, 30)}")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (run.parent / "export" / "1").exists()


def test_export_of_a_nonexistent_prefix(run, capsys):
    code = export_cli.main(["--model-dir", str(run), "--out", str(run.parent / "export" / "1"),
                            "--checkpoint", str(run / "nothing" / "ckpt-5")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: {run / 'nothing' / 'ckpt-5.index'}: not found"), err


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_newest_damaged_the_newest_readable_is_taken(run, damage, caplog):
    DAMAGE[damage][0](run, 30)
    with caplog.at_level(logging.WARNING):
        assert pick_checkpoint(run) == str(prefix(run, 20))
    if damage == "files deleted":  # no longer a checkpoint: the state file's entry is stale
        assert "(ckpt-30 listed but absent); using the 2 checkpoint(s) present" in caplog.text
    else:
        assert f"skipping a damaged checkpoint: {prefix(run, 30)}" in caplog.text


def test_averaging_skips_a_damaged_checkpoint(run, capsys, caplog):
    truncate(run, 30)
    with caplog.at_level(logging.WARNING):
        code = average_cli.main(["--model-dir", str(run), "--last", "2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "averaged 2 checkpoint(s) (ckpt-10, ckpt-20)" in out
    assert f"skipping a damaged checkpoint: {prefix(run, 30)}.data-00000-of-00001: " \
           "truncated" in caplog.text


def test_averaging_names_a_damaged_source(run, capsys):
    # A damaged checkpoint given to the averaging function itself is an error.
    spoilt = garble_index(run, 20)
    model = build_model("transformer", MODEL)
    with pytest.raises(checkpoints.CheckpointError, match=f"^{spoilt}: not a readable"):
        averaging.average_checkpoints(model, [str(prefix(run, 10)), str(prefix(run, 20))],
                                        run / "averaged" / "ckpt")
    assert not (run / "averaged").exists()


def test_no_readable_checkpoint_at_all(run, capsys):
    for step in STEPS:
        truncate(run, step)
    code = average_cli.main(["--model-dir", str(run)])
    assert code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"error: {run} has no checkpoints to average"


def test_checkpoint_of_another_configuration_gives_one_line(run, capsys):
    wider = build_model("transformer", MODEL.replace(d_model=16))
    with pytest.raises(checkpoints.CheckpointError) as error:
        checkpoints.load_weights(wider, prefix(run, 30))
    assert str(error.value).startswith(f"{prefix(run, 30)}: does not fit the model")
    assert "(40, 8)" in str(error.value) and "(40, 16)" in str(error.value)
    out, err = capsys.readouterr()
    assert "Value in checkpoint could not be found" not in out + err
    assert "unrestored values" not in out + err


def test_export_with_another_configuration_is_one_error_line(run, capsys):
    from transformer_tf.rundir import model_dir as model_dir_lib

    config = model_dir_lib.read_run_config(run)
    model_dir_lib.write_run_config(run, config.__class__(**{
        **config.__dict__, "model": MODEL.replace(d_model=16)}))
    code = export_cli.main(["--model-dir", str(run), "--out", str(run.parent / "export" / "1")])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith(f"error: {prefix(run, 30)}: does not fit the model") and \
        err.count("\n") == 1, err


def test_export_onto_a_file_is_a_clear_error(run, capsys):
    target = run.parent / "model.pb"
    target.write_text("not a directory")
    code = export_cli.main(["--model-dir", str(run), "--out", str(target)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"error: {target}: is a file, not a directory")
    assert target.read_text() == "not a directory"


def test_overwrite_keeps_the_old_version_if_the_new_export_fails(tmp_path, monkeypatch):
    version = tmp_path / "saved_models" / "m" / "1"
    version.mkdir(parents=True)
    (version / "saved_model.pb").write_text("old")

    def failing_write(translator, tmp, *rest):  # the signature of saved_model._write
        tmp.mkdir()
        (tmp / "saved_model.pb").write_text("half")
        raise RuntimeError("disk full")

    monkeypatch.setattr(saved_model, "_write", failing_write)
    with pytest.raises(RuntimeError, match="disk full"):
        saved_model.export_saved_model(object(), version, overwrite=True)
    assert (version / "saved_model.pb").read_text() == "old"
    assert sorted(p.name for p in version.parent.iterdir()) == ["1"]  # nothing left aside

    def good_write(translator, tmp, *rest):
        tmp.mkdir()
        (tmp / "saved_model.pb").write_text("new")

    monkeypatch.setattr(saved_model, "_write", good_write)
    saved_model.export_saved_model(object(), version, overwrite=True)
    assert (version / "saved_model.pb").read_text() == "new"
    assert sorted(p.name for p in version.parent.iterdir()) == ["1"]
