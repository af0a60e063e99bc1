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


def test_a_second_fit_of_one_invocation_keeps_the_budget_clock(monkeypatch):
    # A resumed run trains to the next validation step in a fit of its own, then goes on
    # in another (fit.fit_on_the_validation_grid): both fits and the time between them
    # count against the budget.
    clock = [100.0]
    monkeypatch.setattr("transformer_tf.training.callbacks.time.monotonic", lambda: clock[0])
    budget = TimeBudget(max_minutes=10, seconds_before=420.0)
    assert budget.elapsed_seconds() == 420.0  # before training begins
    budget.on_train_begin()
    clock[0] += 100.0
    budget.on_train_begin()
    clock[0] += 79.0
    assert budget.elapsed_seconds() == 599.0 and not budget._out_of_time()
    clock[0] += 1.0
    assert budget._out_of_time()


def test_the_cooldown_factor_is_the_share_of_its_minutes_left(monkeypatch):
    from transformer_tf.training.callbacks import TimeCooldown

    clock = [0.0]
    monkeypatch.setattr("transformer_tf.training.callbacks.time.monotonic", lambda: clock[0])

    class Factor:
        value, writes = None, 0

        def assign(self, value):
            self.value, self.writes = value, self.writes + 1

    budget = TimeBudget(max_minutes=10, seconds_before=420.0)  # 180 s of 600 left
    factor = Factor()
    cooldown = TimeCooldown(budget, cooldown_minutes=2.0, factor=factor)  # the last 120 s
    budget.on_train_begin()
    cooldown.on_train_begin()
    assert factor.value == 1.0  # 180 s left: not cooling yet
    for advance, expected in [(60.0, 1.0), (30.0, 0.75), (60.0, 0.25), (30.0, 0.0),
                              (10.0, 0.0)]:
        clock[0] += advance
        cooldown.on_train_batch_begin(0)
        assert factor.value == pytest.approx(expected)
    # Written only when it changes: 1 at the start, then 0.75, 0.25 and 0.
    assert factor.writes == 4


def test_a_time_clocked_run_cools_its_rate_to_near_zero_by_its_budgets_end(tiny_multi30k,
                                                                            tmp_path):
    """The whole budget is the cool-down: every logged rate is below the last one, and the
    last step's is a small part of the peak (steps take well under a quarter of it; 30 s,
    so that the first step's tracing leaves room for more on a loaded machine)."""
    import tensorflow as tf
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from transformer_tf.presets import get_preset
    from transformer_tf.training.fit import TrainOptions, train
    from transformer_tf.training.schedule import peak_learning_rate

    result = train(TrainOptions(
        data_dir=str(tiny_multi30k.directory), model_dir=str(tmp_path), preset="tiny",
        model_overrides={"num_layers": 1}, eval_every=1000, validation_sentences=0,
        verbose=0, max_minutes=0.5, log_every=1,
        training_overrides={"lr_schedule": "warmup_hold_cooldown", "cooldown_minutes": 0.5,
                            "warmup_steps": 1}))
    assert result.stopped_by == "time"
    events = EventAccumulator(str(tmp_path / "logs" / "train"), size_guidance={"tensors": 0})
    events.Reload()
    rates = [float(tf.make_ndarray(e.tensor_proto)) for e in events.Tensors("learning_rate")]
    peak = peak_learning_rate(get_preset("tiny").model.d_model, 1)
    assert len(rates) >= 2
    assert all(b < a for a, b in zip(rates, rates[1:])) and rates[0] < peak
    assert 0.0 <= rates[-1] < 0.25 * peak


def test_a_time_clocked_cooldown_without_a_time_budget_is_refused(tiny_multi30k, tmp_path):
    with pytest.raises(ValueError, match="cooldown_minutes 0.5: a time-clocked cool-down needs "
                                         "a time budget"):
        _train(tiny_multi30k, tmp_path, max_steps=2, training_overrides={
            "lr_schedule": "warmup_hold_cooldown", "cooldown_minutes": 0.5})
    assert not list(tmp_path.glob("checkpoints/ckpt-*"))


def test_a_time_clocked_cooldown_across_workers_is_refused():
    from transformer_tf.config import TrainingConfig
    from transformer_tf.training.fit import check_cooldown_clock

    timed = TrainingConfig(lr_schedule="warmup_hold_cooldown", cooldown_minutes=2.0)
    check_cooldown_clock(timed, 10.0, multi_worker=False)  # one machine, one clock
    with pytest.raises(ValueError, match="across workers give a step clock"):
        check_cooldown_clock(timed, 10.0, multi_worker=True)
    stepped = TrainingConfig(lr_schedule="warmup_hold_cooldown", schedule_steps=50,
                             cooldown_steps=10)
    check_cooldown_clock(stepped, None, multi_worker=True)  # a step clock is the same anywhere
