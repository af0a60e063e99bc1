"""A run planned by time alone shows steps and minutes left (callbacks.BudgetProgress), not
Keras' "Epoch 1/2000000001"."""
import types

import pytest

from transformer_tf.training.callbacks import BudgetProgress, TimeBudget


@pytest.mark.parametrize("elapsed, logs, expected", [
    (30.0, {"loss": 3.21}, "step 120 · loss 3.2100 · 1.5 min left of 2"),
    (150.0, {"loss": 2.5, "val_loss": 2.75}, "step 120 · loss 2.5000 · val_loss 2.7500 · "
                                              "0.0 min left of 2"),
])
def test_progress_line(elapsed, logs, expected):
    progress = BudgetProgress(TimeBudget(max_minutes=2))
    iterations = types.SimpleNamespace(numpy=lambda: 120)
    progress.set_model(types.SimpleNamespace(optimizer=types.SimpleNamespace(iterations=iterations)))
    assert progress.describe(logs, elapsed) == expected
