"""A run whose loss becomes NaN stops, says at which step, and keeps the last good
checkpoint (none is written with NaN weights).

The NaN is injected: from optimizer step NAN_FROM on, the step's loss sum is NaN, so the
update of that step makes every weight NaN. scripts/train.py runs in this process (its
`main`), checkpointing after every step.
"""
from __future__ import annotations

import importlib.util
import pathlib
import signal

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.rundir import checkpoints
from transformer_tf.training.callbacks import StopOnNaN
from transformer_tf.training.trainer import Seq2SeqTrainer

REPO = pathlib.Path(__file__).resolve().parents[2]
NAN_FROM = 12  # iterations before the poisoned step: step 13 makes the loss NaN


@pytest.fixture
def poisoned_loss(monkeypatch):
    original = Seq2SeqTrainer._forward_and_sums

    def forward_and_sums(self, data, training):
        sums = original(self, data, training)
        if not training:
            return sums
        poison = tf.where(self.optimizer.iterations >= NAN_FROM, float("nan"), 0.0)
        return sums._replace(loss_sum=sums.loss_sum + poison)

    monkeypatch.setattr(Seq2SeqTrainer, "_forward_and_sums", forward_and_sums)


def train_script():
    spec = importlib.util.spec_from_file_location("train_script", REPO / "scripts" / "train.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def train_until_it_diverges(data_dir, model_dir, gc_frozen) -> int:
    with gc_frozen():
        return train_script().main([
            "--data", str(data_dir), "--preset", "tiny",
            "--model-dir", str(model_dir), "--max-steps", "30", "--eval-every", "30",
            "--log-every", "5", "--training-option", "checkpoint_every_minutes=0.0001",
            "--quiet", "--model-option", "num_layers=1", "--validation-sentences", "0"])


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tiny_multi30k, tmp_path, capsys,
                                                           poisoned_loss, gc_frozen):
    model_dir = tmp_path / "model"
    code = train_until_it_diverges(tiny_multi30k.directory, model_dir, gc_frozen)
    out, err = capsys.readouterr()
    bad_step = NAN_FROM + 1
    assert code == 2
    assert f"loss is nan at step {bad_step}; stopping training" in out
    assert f"the loss became NaN at step {bad_step}" in err
    assert f"last good checkpoint is {model_dir / 'checkpoints' / f'ckpt-{NAN_FROM}'}" in err

    kept = checkpoints.list_checkpoints(model_dir)
    assert kept and kept[-1].endswith(f"ckpt-{NAN_FROM}")  # saved every step until then
    assert not list((model_dir / "checkpoints").glob(f"ckpt-{bad_step}*"))
    reader = tf.train.load_checkpoint(kept[-1])
    values = [reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
              if key != "_CHECKPOINTABLE_OBJECT_GRAPH"]
    assert len(values) > 40
    assert all(np.isfinite(v).all() for v in values if np.issubdtype(v.dtype, np.floating))
    assert reader.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE") == NAN_FROM


def test_a_stop_at_the_step_that_diverged_reports_the_divergence(
        tiny_multi30k, tmp_path, capsys, poisoned_loss, gc_frozen, monkeypatch):
    """SIGTERM delivered as the NaN is found: the run must not say it saved that step."""
    seen_nan = StopOnNaN.on_train_batch_end

    def and_a_signal(self, batch, logs=None):
        seen_nan(self, batch, logs)
        if self.nan_step is not None:
            signal.raise_signal(signal.SIGTERM)

    monkeypatch.setattr(StopOnNaN, "on_train_batch_end", and_a_signal)
    model_dir = tmp_path / "model"
    code = train_until_it_diverges(tiny_multi30k.directory, model_dir, gc_frozen)
    _, err = capsys.readouterr()
    assert code == 2, err[-2000:]
    assert f"the loss became NaN at step {NAN_FROM + 1}" in err
    assert "stopped by SIGTERM" not in err
    assert checkpoints.list_checkpoints(model_dir)[-1].endswith(f"ckpt-{NAN_FROM}")
