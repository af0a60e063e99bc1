"""The progress lines of a run whose console is not a terminal or whose plan is time alone
(callbacks.ProgressLines): step of plan, metrics and minutes left, worked by hand."""
import types

import pytest

from transformer_tf.training.callbacks import ProgressLines, TimeBudget


def _at_step(progress, step):
    iterations = types.SimpleNamespace(numpy=lambda: step)
    progress.set_model(types.SimpleNamespace(optimizer=types.SimpleNamespace(iterations=iterations)))
    return progress


class _Budget(TimeBudget):
    """A budget whose clock reads `elapsed` seconds."""

    def __init__(self, max_minutes, elapsed):
        super().__init__(max_minutes)
        self.elapsed = elapsed

    def elapsed_seconds(self):
        return self.elapsed


@pytest.mark.parametrize("elapsed, logs, expected", [
    (30.0, {"loss": 3.21}, "step 120 · loss 3.2100 · 1.5 min left of 2"),
    (150.0, {"loss": 2.5, "val_loss": 2.75, "val_bleu": 31.456},
     "step 120 · loss 2.5000 · val_loss 2.7500 · dev BLEU 31.46 · 0.0 min left of 2"),
])
def test_a_time_budget_alone_counts_steps_and_its_minutes(elapsed, logs, expected):
    progress = ProgressLines(None, _Budget(2, elapsed))
    assert progress.describe(logs, 120, progress.minutes_left(120)) == expected


def test_a_step_plan_shows_its_share_and_the_minutes_left_at_the_pace_so_far():
    progress = ProgressLines(last_step=1000)
    # The first step of the invocation (step 200, tracing) starts the clock at t = 10 s.
    progress._pace_start = (10.0, 200)
    assert progress.minutes_left(200, now=10.0) is None  # no pace yet
    # 100 steps in 60 s: 0.6 s a step, 700 steps left = 420 s = 7 minutes.
    assert progress.minutes_left(300, now=70.0) == pytest.approx(7.0)
    assert progress.describe({"loss": 4.0}, 300, 7.0) == (
        "step 300 of 1000 (30%) · loss 4.0000 · 7.0 min left")
    assert progress.minutes_left(1000, now=500.0) == 0.0


def test_a_step_plan_under_a_time_cap_shows_whichever_ends_first():
    progress = ProgressLines(last_step=1000, budget=_Budget(10, elapsed=540.0))
    progress._pace_start = (0.0, 0)
    # The plan's pace leaves 900 steps x 0.6 s = 9 minutes; the cap leaves 1 minute.
    assert progress.minutes_left(100, now=60.0) == pytest.approx(1.0)
    assert progress.describe(None, 100, 1.0) == "step 100 of 1000 (10%) · 1.0 min left"


def test_lines_come_every_period_after_the_first_step_and_at_each_validation(capsys):
    progress = _at_step(ProgressLines(last_step=10, every_seconds=0.0), 4)
    progress.on_train_batch_end(0, {"loss": 1.0})  # the first step: the clock starts
    assert capsys.readouterr().out == ""
    progress.on_train_batch_end(1, {"loss": 1.0})
    progress.on_epoch_end(0, {"loss": 1.0, "val_bleu": 12.0})
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("step 4 of 10 (40%) · loss 1.0000")
    assert "dev BLEU 12.00" in lines[1]
