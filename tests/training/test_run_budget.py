"""A time budget counts the whole run, across invocations: the training time is saved with
every checkpoint, and a run whose budget is spent trains no further (it is evaluated and
exported again as it is)."""
import pytest

from transformer_tf.rundir import checkpoints
from transformer_tf.training.callbacks import TimeBudget


def _train(tiny_multi30k, model_dir, **plan):
    from transformer_tf.training.fit import TrainOptions, train

    return train(TrainOptions(
        data_dir=str(tiny_multi30k.directory), model_dir=str(model_dir), preset="tiny",
        model_overrides={"num_layers": 1}, eval_every=2, validation_sentences=0,
        verbose=0, **plan))


def test_training_time_is_saved_and_counted_across_invocations(tiny_multi30k, tmp_path):
    first = _train(tiny_multi30k, tmp_path, max_steps=3)
    saved = checkpoints.trained_seconds(first.last_checkpoint)
    assert first.step == 3 and saved == pytest.approx(first.trained_seconds)
    assert 0 < saved <= first.seconds  # training only: not the set-up before it

    # The run has trained `saved` seconds: a budget below that trains nothing more.
    spent = _train(tiny_multi30k, tmp_path, max_minutes=saved / 60.0 / 2)
    assert (spent.step, spent.start_step, spent.stopped_by) == (3, 3, "time")
    assert spent.trained_seconds == pytest.approx(saved)
    # (That a resumed run carries the time on: tests/training/test_training_run.py.)


def test_budget_counts_the_time_before_this_invocation(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("transformer_tf.training.callbacks.time.monotonic", lambda: clock[0])
    budget = TimeBudget(max_minutes=10, seconds_before=420.0)
    budget.on_train_begin()
    clock[0] += 179.0
    assert budget.elapsed_seconds() == 599.0 and not budget._out_of_time()
    clock[0] += 1.0
    assert budget._out_of_time()
