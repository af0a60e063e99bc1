"""TrainingMonitor windows: TensorBoard gets the mean over the last `log_every` steps, and
the logs Keras reads at the end of an epoch (progress bar, History) are that window's,
not zeros from metrics reset right after the write."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from transformer_tf.training.callbacks import TrainingMonitor


def test_windows_and_epoch_logs(tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(16, 3)), rng.normal(size=(16, 1))
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(2).repeat()
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    step_logs = {}
    record = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: step_logs.update(
        {int(model.optimizer.iterations.numpy()): float(logs["loss"])}))
    history = model.fit(data, epochs=2, steps_per_epoch=4, verbose=0,
                        callbacks=[TrainingMonitor(tmp_path, log_every=2), record])

    events = EventAccumulator(str(tmp_path / "train"), size_guidance={"tensors": 0})
    events.Reload()
    written = {e.step: float(tf.make_ndarray(e.tensor_proto)) for e in events.Tensors("loss")}
    assert sorted(written) == [2, 4, 6, 8]
    for step in (2, 4, 6, 8):
        assert written[step] == pytest.approx(step_logs[step])
    # A window starts afresh: the log of its first step is that step's loss alone, which
    # differs from the running mean the previous window ended with.
    assert step_logs[3] != pytest.approx(step_logs[2])
    # Epoch ends (steps 4 and 8) coincide with writes: History keeps the window's mean.
    assert history.history["loss"] == pytest.approx([step_logs[4], step_logs[8]])
    assert min(history.history["loss"]) > 0
