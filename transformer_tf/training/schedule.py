"""The learning-rate schedule of "Attention Is All You Need" (section 5.3, equation 3).

    lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)

The rate grows linearly for the first `warmup_steps` updates, peaks at step == warmup_steps
(where both terms of the min are equal, warmup_steps^-0.5), then decays with the inverse
square root of the step number.

Step numbering (the step-0 question). The paper counts update steps from 1; at step 0 the
formula gives min(inf, 0) = 0, i.e. a wasted first update. A Keras optimizer calls its
schedule with `optimizer.iterations` *before* incrementing it, so the first update sees 0.
This schedule therefore evaluates the formula at

    step = floor(iterations / accumulation_steps) + 1

so that the first update uses the paper's step 1, the 4000th update the paper's step 4000,
and so on: `schedule(i)` == `transformer_learning_rate(i + 1, ...)`.

`accumulation_steps` exists because with `gradient_accumulation_steps=k` a Keras 3 optimizer
passes its raw counter (one tick per *micro-batch*) to the schedule; dividing by k makes the
schedule count real parameter updates, as in the paper. Leave it at 1 otherwise.

`WarmupHoldCooldown` is the budget-aware recipe's shape (training/recipe_plan.py): the same
warm-up to the same peak, the peak held, and a linear cool-down to zero over the last part
of a known budget, counted in steps or in the time budget's minutes (its docstring has the
formula), with the same step numbering.
"""
from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops

from transformer_tf.training.rate_formula import (
    peak_learning_rate, scale_for_peak, transformer_learning_rate)

__all__ = ["TransformerSchedule", "WarmupHoldCooldown", "peak_learning_rate",
           "scale_for_peak", "transformer_learning_rate"]


def _paper_step(iterations, accumulation_steps: int):
    """The paper's 1-based update number of the optimizer's 0-based counter (module doc)."""
    step = ops.cast(iterations, "float32")
    if accumulation_steps > 1:
        step = ops.floor(step / float(accumulation_steps))
    return step + 1.0


def _check_positive(**values) -> None:
    for name, value in values.items():
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")


@keras.saving.register_keras_serializable(package="transformer_tf")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Warm-up then inverse-square-root decay (paper equation 3), Keras-serialisable.

    Args:
      d_model: model width (the d_model^-0.5 factor).
      warmup_steps: number of warm-up updates (paper: 4000).
      scale: constant factor on the rate (paper: 1.0).
      accumulation_steps: micro-batches per parameter update when the optimizer uses
        `gradient_accumulation_steps`; the schedule counts updates, not micro-batches.
      name: optional name.

    Call arguments:
      step: the optimizer's iteration counter (scalar int or float tensor), counted from
        0. The formula is evaluated at paper step floor(step / accumulation_steps) + 1.

    Returns:
      A float32 scalar tensor, the learning rate.

    Example:
    ```python
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    optimizer = keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    ```
    """

    def __init__(self, d_model: int, warmup_steps: int = 4000, scale: float = 1.0,
                 accumulation_steps: int = 1, name: str | None = None):
        super().__init__()
        _check_positive(d_model=int(d_model), warmup_steps=int(warmup_steps),
                        scale=float(scale), accumulation_steps=int(accumulation_steps))
        self.d_model = int(d_model)
        self.warmup_steps = int(warmup_steps)
        self.scale = float(scale)
        self.accumulation_steps = int(accumulation_steps)
        self.name = name

    def __call__(self, step):
        step = _paper_step(step, self.accumulation_steps)
        # lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
        factor = self.scale * self.d_model ** -0.5
        decay = ops.rsqrt(step)
        warmup = step * self.warmup_steps ** -1.5
        return factor * ops.minimum(decay, warmup)

    @property
    def peak_learning_rate(self) -> float:
        """The largest rate, reached at paper step == warmup_steps: scale*(d_model*warmup)^-0.5."""
        return peak_learning_rate(self.d_model, self.warmup_steps, self.scale)

    def get_config(self) -> dict:
        return {
            "d_model": self.d_model,
            "warmup_steps": self.warmup_steps,
            "scale": self.scale,
            "accumulation_steps": self.accumulation_steps,
            "name": self.name,
        }


@keras.saving.register_keras_serializable(package="transformer_tf")
class WarmupHoldCooldown(keras.optimizers.schedules.LearningRateSchedule):
    """Equation 3's warm-up to its peak, the peak held, then a linear cool-down to zero at
    the end of a known budget; Keras-serialisable. The budget's clock is steps or time.

    At paper step s (counted as `TransformerSchedule` counts it):

        lrate = scale * (d_model * warmup_steps)^-0.5 * min(1, s / warmup_steps) * cool

        step clock:  cool = clip((schedule_steps + 1 - s) / cooldown_steps, 0, 1)
        time clock:  cool = the value of `time_factor`, which the trainer sets before each
                     step to clip(seconds left / cool-down seconds, 0, 1)
                     (callbacks.TimeCooldown)

    Args:
      d_model, warmup_steps, scale, accumulation_steps: as `TransformerSchedule`; the
        warm-up and the peak are the same as its.
      schedule_steps, cooldown_steps: the step clock: the budget in updates (its last update
        takes peak / cooldown_steps, any later one 0) and the updates over which the rate
        falls (<= schedule_steps). Both None: the time clock.
      time_factor: the time clock's factor, a scalar float variable; None: one of its own,
        at 1 (a schedule rebuilt from its config, with no trainer to set it, never cools).
      name: optional name.

    Returns (called with the optimizer's 0-based counter): a float32 scalar, the rate.
    """

    def __init__(self, d_model: int, warmup_steps: int, scale: float,
                 schedule_steps: int | None = None, cooldown_steps: int | None = None,
                 time_factor=None, accumulation_steps: int = 1, name: str | None = None):
        super().__init__()
        _check_positive(d_model=int(d_model), warmup_steps=int(warmup_steps),
                        scale=float(scale), accumulation_steps=int(accumulation_steps))
        if (schedule_steps is None) != (cooldown_steps is None):
            raise ValueError("give schedule_steps and cooldown_steps together (a step clock), "
                             "or neither (a time clock)")
        if schedule_steps is not None:
            _check_positive(schedule_steps=int(schedule_steps),
                            cooldown_steps=int(cooldown_steps))
            if int(cooldown_steps) > int(schedule_steps):
                raise ValueError(f"cooldown_steps ({cooldown_steps}) must not exceed "
                                 f"schedule_steps ({schedule_steps})")
            schedule_steps, cooldown_steps = int(schedule_steps), int(cooldown_steps)
        elif time_factor is None:
            time_factor = tf.Variable(1.0, trainable=False, dtype=tf.float32,
                                      name="cooldown_time_factor")
        self.d_model = int(d_model)
        self.warmup_steps = int(warmup_steps)
        self.scale = float(scale)
        self.schedule_steps = schedule_steps
        self.cooldown_steps = cooldown_steps
        self.time_factor = time_factor if schedule_steps is None else None
        self.accumulation_steps = int(accumulation_steps)
        self.name = name

    def __call__(self, step):
        step = _paper_step(step, self.accumulation_steps)
        warm = ops.minimum(1.0, step / float(self.warmup_steps))
        if self.time_factor is not None:
            cool = ops.cast(self.time_factor, "float32")
        else:
            cool = ops.clip((self.schedule_steps + 1.0 - step) / float(self.cooldown_steps),
                            0.0, 1.0)
        return self.peak_learning_rate * warm * cool

    @property
    def peak_learning_rate(self) -> float:
        """The held rate: scale * (d_model * warmup_steps)^-0.5, equation 3's peak."""
        return peak_learning_rate(self.d_model, self.warmup_steps, self.scale)

    def get_config(self) -> dict:
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps,
                "scale": self.scale, "schedule_steps": self.schedule_steps,
                "cooldown_steps": self.cooldown_steps,
                "accumulation_steps": self.accumulation_steps, "name": self.name}
