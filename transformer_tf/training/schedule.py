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
"""
from __future__ import annotations

import keras
from keras import ops

from transformer_tf.training.rate_formula import (
    peak_learning_rate, scale_for_peak, transformer_learning_rate)

__all__ = ["TransformerSchedule", "peak_learning_rate", "scale_for_peak",
           "transformer_learning_rate"]


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
        if int(d_model) <= 0:
            raise ValueError(f"d_model must be positive, got {d_model}")
        if int(warmup_steps) <= 0:
            raise ValueError(f"warmup_steps must be positive, got {warmup_steps}")
        if float(scale) <= 0:
            raise ValueError(f"scale must be positive, got {scale}")
        if int(accumulation_steps) <= 0:
            raise ValueError(f"accumulation_steps must be positive, got {accumulation_steps}")
        self.d_model = int(d_model)
        self.warmup_steps = int(warmup_steps)
        self.scale = float(scale)
        self.accumulation_steps = int(accumulation_steps)
        self.name = name

    def __call__(self, step):
        # Optimizer iterations start at 0; the paper's steps start at 1 (see module doc).
        step = ops.cast(step, "float32")
        if self.accumulation_steps > 1:
            step = ops.floor(step / float(self.accumulation_steps))
        step = step + 1.0
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
