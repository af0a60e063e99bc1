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


def test_rates_cover_the_same_steps_as_the_metrics_when_an_epoch_splits_a_window(
        tmp_path, monkeypatch):
    # After a resume, an "epoch" (whose start resets the metrics) can begin inside a
    # log_every window. Driven by hand: 1 s and 100 target tokens per step; epochs of 3
    # steps, writes every 2. The write at step 4 sees only step 4's tokens (the metrics
    # were reset when the epoch began at step 3), so its rates must count 1 step and 1 s.
    import types

    import transformer_tf.training.callbacks as callbacks_lib

    clock = [0.0]
    monkeypatch.setattr(callbacks_lib.time, "perf_counter", lambda: clock[0])
    iterations = tf.Variable(0, dtype=tf.int64)
    tokens_since_reset = [0.0]
    model = types.SimpleNamespace(
        optimizer=types.SimpleNamespace(iterations=iterations, learning_rate=0.5),
        reset_metrics=lambda: tokens_since_reset.__setitem__(0, 0.0))
    monitor = TrainingMonitor(tmp_path, log_every=2)
    monitor.set_model(model)
    monitor.on_train_begin()
    written = {}
    for epoch in range(2):
        tokens_since_reset[0] = 0.0  # what Keras' epoch start does to the metrics
        monitor.on_epoch_begin(epoch)
        for batch in range(3):
            monitor.on_train_batch_begin(batch)
            clock[0] += 1.0
            iterations.assign_add(1)
            tokens_since_reset[0] += 100.0
            monitor.on_train_batch_end(batch, {"loss": 1.0,
                                               "target_tokens": tokens_since_reset[0]})
        monitor.on_epoch_end(epoch, {})
    monitor.on_train_end()
    events = EventAccumulator(str(tmp_path / "train"), size_guidance={"tensors": 0})
    events.Reload()
    for name in ("target_tokens_per_second", "steps_per_second"):
        written[name] = {e.step: float(tf.make_ndarray(e.tensor_proto))
                         for e in events.Tensors(name)}
    assert written["target_tokens_per_second"] == {2: 100.0, 4: 100.0, 6: 100.0}
    assert written["steps_per_second"] == {2: 1.0, 4: 1.0, 6: 1.0}
