"""A short timed probe of training speed, for a run planned by time (training/recipe_plan.py).

The probe trains a throw-away copy of the run's model on the run's own data pipeline for
up to `max_seconds` (or `max_steps`) and times every step. Steps during which the training
function was traced (Python ran `train_step`: the first step, and any retrace) are left
out, and so is the first step in any case: what remains is the speed of the compiled step
with its input pipeline, the speed the run will train at.

    steps/second = timed steps / their summed wall time
"""
from __future__ import annotations

import dataclasses
import time

import keras


@dataclasses.dataclass(frozen=True)
class SpeedProbe:
    """What a probe measured.

    Attributes:
      steps_per_second: timed steps / their wall time (steps/s).
      timed_steps: the steps timed (tracing steps excluded).
      tracing_steps: steps left out because the training function traced during them.
      seconds: the probe's training wall time, tracing included (s).
    """

    steps_per_second: float
    timed_steps: int
    tracing_steps: int
    seconds: float


class StepTimer(keras.callbacks.Callback):
    """Times each training step; stops training after `max_steps` steps or `max_seconds`
    of probing, once at least `min_timed_steps` steps were timed.

    `traces` must be incremented by whoever runs `train_step`'s Python code (it runs only
    while TensorFlow traces the step; `probe_speed` wraps it)."""

    def __init__(self, max_steps: int, max_seconds: float, min_timed_steps: int = 3):
        super().__init__()
        self.max_steps = max_steps
        self.max_seconds = max_seconds
        self.min_timed_steps = min_timed_steps
        self.traces = 0
        self.durations: list[float] = []  # seconds of each step that did not trace
        self.tracing_steps = 0
        self._started = time.perf_counter()
        self._step_began = 0.0
        self._traces_before = 0

    def on_train_begin(self, logs=None):
        self._started = time.perf_counter()

    def on_train_batch_begin(self, batch, logs=None):
        self._traces_before = self.traces
        self._step_began = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        first = self.tracing_steps + len(self.durations) == 0
        if first or self.traces != self._traces_before:
            self.tracing_steps += 1
        else:
            self.durations.append(now - self._step_began)
        steps = self.tracing_steps + len(self.durations)
        enough = steps >= self.max_steps or now - self._started >= self.max_seconds
        if enough and len(self.durations) >= self.min_timed_steps:
            self.model.stop_training = True


def probe_speed(model, dataset, max_steps: int = 60, max_seconds: float = 45.0,
                min_timed_steps: int = 3) -> SpeedProbe:
    """Train `model` (a compiled Seq2SeqTrainer, thrown away afterwards) on `dataset` (an
    endless training dataset) for `max_steps` steps or `max_seconds` of probing, whichever
    comes first, but until at least `min_timed_steps` steps were timed; returns the
    measured speed."""
    started = time.perf_counter()
    timer = StepTimer(max_steps, max_seconds, min_timed_steps)
    train_step = model.train_step

    def counted_train_step(data):  # Python runs this only while tracing
        timer.traces += 1
        return train_step(data)

    model.train_step = counted_train_step  # before fit makes its training function
    model.fit(dataset, epochs=1, steps_per_epoch=10**9, callbacks=[timer], verbose=0)
    return SpeedProbe(steps_per_second=len(timer.durations) / sum(timer.durations),
                      timed_steps=len(timer.durations), tracing_steps=timer.tracing_steps,
                      seconds=time.perf_counter() - started)
