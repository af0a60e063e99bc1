"""Keras callbacks for long training runs: TensorBoard scalars, checkpoints, budgets, NaN stop."""
from __future__ import annotations

import logging
import math
import pathlib
import time

import keras
import tensorflow as tf

logger = logging.getLogger(__name__)


def current_step(model) -> int:
    """The optimizer steps (updates) `model` has taken, read from its variable."""
    return int(model.optimizer.iterations.numpy())


class TrainingMonitor(keras.callbacks.Callback):
    """Writes training scalars to TensorBoard every `log_every` optimizer steps.

    Scalars (under `logdir/train`): loss (label-smoothed, per real target token), nll,
    perplexity, token_accuracy, learning_rate, target_tokens_per_second, steps_per_second.
    Values are averages over the last `log_every` steps: the model's metrics are reset when
    the step after a write begins (not right after the write, so that the logs Keras reads
    at the end of an epoch, for the progress bar and History, are not all zero), so the
    progress bar shows the same windowed averages.

    Validation metrics that `fit` reports at the end of an "epoch" (val_loss, ...) go to
    `logdir/validation` without the "val_" prefix, so TensorBoard overlays the two runs.

    Args:
      logdir: the TensorBoard log directory of the run.
      log_every: steps between writes.
      enabled: False on non-chief workers (nothing is written).
    """

    def __init__(self, logdir, log_every: int = 100, enabled: bool = True):
        super().__init__()
        self.logdir = pathlib.Path(logdir)
        self.log_every = log_every
        self.enabled = enabled
        self._train_writer = self._validation_writer = None
        self._window_start = None
        self._reset_pending = False

    def on_train_begin(self, logs=None):
        # One pair of event files for all the fits of a run (a resumed run may train in
        # two: fit.fit_on_the_validation_grid); `close` ends them.
        if self.enabled and self._train_writer is None:
            self._train_writer = tf.summary.create_file_writer(str(self.logdir / "train"))
            self._validation_writer = tf.summary.create_file_writer(
                str(self.logdir / "validation"))
        self._window_start = time.perf_counter()
        self._window_first_step = current_step(self.model)

    def on_epoch_begin(self, epoch, logs=None):
        # Keras resets the metrics when an "epoch" (eval_every steps) begins; the window
        # restarts with them, so a write never divides part of a window's tokens by the
        # whole window's time (after a resume, epochs need not end on a write step), and
        # validation time is not counted as training time.
        self._reset_pending = False
        self._window_start = time.perf_counter()
        self._window_first_step = current_step(self.model)

    def on_train_batch_begin(self, batch, logs=None):
        if self._reset_pending:  # a new window begins
            self.model.reset_metrics()
            self._reset_pending = False
            self._window_start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        step = current_step(self.model)
        # Never a write for a window without steps (loss scaling may skip an update).
        if step % self.log_every != 0 or step == self._window_first_step or not logs:
            return
        now = time.perf_counter()
        seconds = max(now - self._window_start, 1e-9)
        steps = step - self._window_first_step
        scalars = {k: float(v) for k, v in logs.items() if k != "target_tokens"}
        scalars["target_tokens_per_second"] = float(logs.get("target_tokens", 0.0)) / seconds
        scalars["steps_per_second"] = steps / seconds
        scalars["learning_rate"] = float(
            keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
        if self._train_writer is not None:
            with self._train_writer.as_default(step=step):
                for name, value in scalars.items():
                    tf.summary.scalar(name, value)
            self._train_writer.flush()
        self._reset_pending = True
        self._window_start, self._window_first_step = now, step

    def on_epoch_end(self, epoch, logs=None):
        validation = {k[4:]: float(v) for k, v in (logs or {}).items() if k.startswith("val_")}
        if validation and self._validation_writer is not None:
            with self._validation_writer.as_default(step=current_step(self.model)):
                for name, value in validation.items():
                    if name != "target_tokens":
                        tf.summary.scalar(name, value)
            self._validation_writer.flush()

    def write_validation(self, scalars: dict, texts: dict | None = None,
                         images: dict | None = None):
        """Extra validation results (BLEU, example translations; images: name -> uint8
        [count, height, width, channels]) at the current step."""
        if self._validation_writer is None:
            return
        with self._validation_writer.as_default(step=current_step(self.model)):
            for name, value in scalars.items():
                tf.summary.scalar(name, value)
            for name, value in (texts or {}).items():
                tf.summary.text(name, value)
            for name, value in (images or {}).items():
                tf.summary.image(name, value, max_outputs=len(value))
        self._validation_writer.flush()

    def on_train_end(self, logs=None):
        for writer in (self._train_writer, self._validation_writer):
            if writer is not None:
                writer.flush()

    def close(self):
        """Close the event files (after the run's last fit); a later fit opens new ones."""
        for writer in (self._train_writer, self._validation_writer):
            if writer is not None:
                writer.close()
        self._train_writer = self._validation_writer = None


class PeriodicCheckpoint(keras.callbacks.Callback):
    """Saves a checkpoint every `every_minutes` of training (or every `every_steps`
    steps) and when training ends.

    Args:
      manager: a tf.train.CheckpointManager over the model and optimizer.
      every_minutes: wall-clock period (paper: 10 minutes).
      every_steps: when set, save at every multiple of this step count instead of by
        the clock (the same checkpoints on any machine).
      enabled: False on workers that must not write.
      batches: an int64 variable saved with the checkpoints (see
        `checkpoints.make_manager`); incremented after every training step by the batches
        it consumed, so it holds the data position.
      batches_per_step: input batches per step (the micro-batches of gradient
        accumulation).
      trained_seconds: a float64 variable saved with the checkpoints, holding the run's
        training time (its value when training begins plus the wall time since); set
        before every save.
    """

    def __init__(self, manager, every_minutes: float, enabled: bool = True,
                 batches: tf.Variable | None = None, batches_per_step: int = 1,
                 trained_seconds: tf.Variable | None = None, every_steps: int | None = None):
        super().__init__()
        self.manager = manager
        self.every_steps = every_steps
        self.batches = batches
        self.batches_per_step = batches_per_step
        self.trained_seconds = trained_seconds
        self.every_seconds = every_minutes * 60.0
        self.enabled = enabled
        self.frozen = False
        self._last_save = time.monotonic()
        self._last_saved_step = None
        self._began, self._seconds_before = time.monotonic(), 0.0

    def on_train_begin(self, logs=None):
        self._began = self._last_save = time.monotonic()
        if self.trained_seconds is not None:
            self._seconds_before = float(self.trained_seconds.numpy())

    def run_seconds(self) -> float:
        """The run's training time so far (seconds): before this invocation and since."""
        return self._seconds_before + time.monotonic() - self._began

    def _save(self):
        if self.frozen:  # training diverged: keep the last good checkpoint
            return
        step = current_step(self.model)
        if self.trained_seconds is not None:
            self.trained_seconds.assign(self.run_seconds())
        if self.enabled and self.manager.latest_checkpoint != self._path_for(step):
            path = self.manager.save(checkpoint_number=step)
            logger.info("saved checkpoint %s", path)
        self._last_save = time.monotonic()
        self._last_saved_step = step

    def _path_for(self, step):
        return f"{self.manager.directory}/ckpt-{step}"

    def _due(self):
        if self.every_steps is not None:
            step = current_step(self.model)
            return step % self.every_steps == 0 and step != self._last_saved_step
        return time.monotonic() - self._last_save >= self.every_seconds

    def on_train_batch_end(self, batch, logs=None):
        if self.batches is not None:
            self.batches.assign_add(self.batches_per_step)
        if self._due():
            self._save()

    def on_epoch_end(self, epoch, logs=None):
        if self._due():
            self._save()

    def on_train_end(self, logs=None):
        self._save()


def any_worker(strategy, flag: bool) -> bool:
    """Whether `flag` is True on any worker of `strategy` (a cross-worker all-reduce:
    every worker must call this at the same point)."""
    flags = strategy.experimental_distribute_values_from_function(
        lambda context: tf.constant(float(flag)))
    return float(strategy.reduce(tf.distribute.ReduceOp.SUM, flags, axis=None)) > 0


class TimeBudget(keras.callbacks.Callback):
    """Stops training cleanly once the run has trained `max_minutes` of wall-clock time in
    all (checked every step).

    Args:
      max_minutes: the run's budget.
      strategy: a multi-worker strategy, or None. Workers' clocks differ: a worker that
        stopped alone would leave the others waiting for it forever, so with a strategy
        all workers stop as soon as one of them is out of time (one tiny all-reduce a step).
      seconds_before: training time the run had before this invocation (the resumed
        checkpoint's `trained_seconds`).
    """

    def __init__(self, max_minutes: float, strategy=None, seconds_before: float = 0.0):
        super().__init__()
        self.max_seconds = max_minutes * 60.0
        self.strategy = strategy
        self.seconds_before = seconds_before
        self.stopped_at_step = None
        self._start = None

    def on_train_begin(self, logs=None):
        # Once: a run may train in several fits (fit_on_the_validation_grid), and the
        # time between them is part of this invocation's training.
        if self._start is None:
            self._start = time.monotonic()

    def elapsed_seconds(self) -> float:
        """The run's training time so far, this invocation included."""
        if self._start is None:  # before training began
            return self.seconds_before
        return self.seconds_before + time.monotonic() - self._start

    def _out_of_time(self) -> bool:
        return self.elapsed_seconds() >= self.max_seconds

    def on_train_batch_end(self, batch, logs=None):
        out_of_time = self._out_of_time()
        if self.strategy is not None:
            out_of_time = any_worker(self.strategy, out_of_time)
        if out_of_time:
            self.stopped_at_step = current_step(self.model)
            self.model.stop_training = True


class TimeCooldown(keras.callbacks.Callback):
    """The time clock of a "warmup_hold_cooldown" rate (schedule.WarmupHoldCooldown): before
    each step, sets `factor` to clip(seconds left / cooldown seconds, 0, 1) of `budget`, so
    the rate holds until the last `cooldown_minutes` of the budget and falls linearly in
    time to zero as the budget runs out, however fast the steps go.

    Args:
      budget: the run's TimeBudget (put it before this callback).
      cooldown_minutes: the length of the fall, in minutes of the budget.
      factor: the schedule's `time_factor` variable.
    """

    def __init__(self, budget: TimeBudget, cooldown_minutes: float, factor):
        super().__init__()
        self.budget = budget
        self.cooldown_seconds = cooldown_minutes * 60.0
        self.factor = factor
        self._assigned = None  # the value last written to `factor` (None: none yet)

    def value(self) -> float:
        """The factor now: 1 before the cool-down, then the fraction of it left."""
        left = self.budget.max_seconds - self.budget.elapsed_seconds()
        return min(1.0, max(0.0, left / self.cooldown_seconds))

    def _set(self) -> None:
        # Until the cool-down the factor stays 1: no variable write on those steps.
        value = self.value()
        if value != self._assigned:
            self.factor.assign(value)
            self._assigned = value

    def on_train_begin(self, logs=None):
        self._assigned = None  # a new fit: the variable may have been restored
        self._set()

    def on_train_batch_begin(self, batch, logs=None):
        self._set()


class ProgressLines(keras.callbacks.Callback):
    """Training progress as plain lines on stdout, in place of Keras' bar where the bar
    does not serve: a run planned by time alone (its "epochs" would count up to a
    meaningless "Epoch 1/2000000001") and a console that is not a terminal (a log file, a
    pipe, CI), where Keras writes one line per "epoch" (`eval_every` steps, which can be an
    hour apart). Every `every_seconds` and after each validation, one line:

        step S of T (P%) · loss L [· val_loss V · dev BLEU B] · M min left

    "of T (P%)" for a plan of steps or epochs; the minutes left are the time budget's, or
    for a plan of steps the steps left at this invocation's pace so far (its first step,
    which traces the model, not counted), the smaller of the two where both apply.

    Args:
      last_step: the step the plan ends at, or None for a run planned by time alone.
      budget: the run's `TimeBudget`, or None.
      every_seconds: seconds between lines during training.
    """

    def __init__(self, last_step: int | None = None, budget: TimeBudget | None = None,
                 every_seconds: float = 30.0):
        super().__init__()
        self.last_step = last_step
        self.budget = budget
        self.every_seconds = every_seconds
        self._last = None
        self._pace_start = None  # (monotonic seconds, step) at this invocation's first step

    def minutes_left(self, step: int, now: float | None = None) -> float | None:
        """Minutes until the run ends by its budget or its plan at `step`; None when
        neither is known yet."""
        estimates = []
        if self.budget is not None:
            estimates.append(max(0.0, self.budget.max_seconds
                                 - self.budget.elapsed_seconds()) / 60.0)
        if self.last_step is not None and self._pace_start is not None:
            started, first_step = self._pace_start
            now = time.monotonic() if now is None else now
            if step > first_step:
                seconds_per_step = (now - started) / (step - first_step)
                estimates.append(max(0, self.last_step - step) * seconds_per_step / 60.0)
        return min(estimates) if estimates else None

    def describe(self, logs: dict | None, step: int, minutes_left: float | None) -> str:
        """The progress line at `step`, with `logs` (Keras' metrics) and the minutes left."""
        parts = [f"step {step}"]
        if self.last_step is not None:
            parts[0] += f" of {self.last_step} ({100.0 * step / max(self.last_step, 1):.0f}%)"
        for name, label, form in (("loss", "loss", ".4f"), ("val_loss", "val_loss", ".4f"),
                                  ("val_bleu", "dev BLEU", ".2f")):
            if logs and name in logs:
                parts.append(f"{label} {float(logs[name]):{form}}")
        if minutes_left is not None:
            left = f"{minutes_left:.1f} min left"
            if self.budget is not None and self.last_step is None:
                left += f" of {self.budget.max_seconds / 60.0:g}"
            parts.append(left)
        return " · ".join(parts)

    def _print(self, logs):
        step = current_step(self.model)
        print(self.describe(logs, step, self.minutes_left(step)), flush=True)
        self._last = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        if self._pace_start is None:
            self._pace_start = (time.monotonic(), current_step(self.model))
            self._last = time.monotonic()  # the first line comes every_seconds later
            return
        if time.monotonic() - self._last >= self.every_seconds:
            self._print(logs)

    def on_epoch_end(self, epoch, logs=None):
        self._print(logs)


class StopAtStep(keras.callbacks.Callback):
    """Stops when the optimizer has made `last_step` steps (a resumed run may start
    mid-epoch, so epochs alone would overshoot)."""

    def __init__(self, last_step: int):
        super().__init__()
        self.last_step = last_step

    def on_train_batch_end(self, batch, logs=None):
        if current_step(self.model) >= self.last_step:
            self.model.stop_training = True


class StopOnNaN(keras.callbacks.Callback):
    """Stops at the first non-finite loss, says at which step, and keeps the last good
    checkpoint (`checkpoint_callback` saves nothing more). Put it first in the callbacks."""

    def __init__(self, checkpoint_callback: PeriodicCheckpoint | None = None):
        super().__init__()
        self.checkpoint_callback = checkpoint_callback
        self.nan_step = None

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            self.nan_step = current_step(self.model)
            message = (f"loss is {float(loss)} at step {self.nan_step}; stopping training. "
                       "The last checkpoint saved before it is kept.")
            logger.error(message)
            print(f"\nerror: {message}", flush=True)
            if self.checkpoint_callback is not None:
                self.checkpoint_callback.frozen = True
            self.model.stop_training = True
