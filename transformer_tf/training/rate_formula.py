"""The paper's learning-rate formula (section 5.3, equation 3) as plain Python floats, with
no TensorFlow: the Keras schedule (training/schedule.py) evaluates it in the graph, and
studies that plan rates (jobs/variations.py, jobs/variation_rows.py) read it without
loading TensorFlow.

    lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)

Also the cool-down length of the budget-aware recipe's warm-up, hold and cool-down shape
(`cooldown_steps_of`; the shape itself is training/schedule.WarmupHoldCooldown).
"""
from __future__ import annotations

import math


def transformer_learning_rate(step: float, d_model: int, warmup_steps: int = 4000,
                              scale: float = 1.0) -> float:
    """The paper's learning rate at update `step` (1-based), as a Python float.

    lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)

    Args:
      step: the update number, counted from 1 as in the paper (must be > 0).
      d_model: the model width.
      warmup_steps: the number of linear warm-up steps.
      scale: a constant factor on the whole rate.

    Returns:
      The learning rate (unitless multiplier of the gradient step).
    """
    if step <= 0:
        raise ValueError(f"step is counted from 1, got {step}")
    return scale * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def peak_learning_rate(d_model: int, warmup_steps: int, scale: float = 1.0) -> float:
    """The schedule's largest rate, reached at step == warmup_steps:
    scale * (d_model * warmup_steps)^-0.5 (the paper's base model: 512, 4000 -> 6.99e-4)."""
    return scale * math.pow(d_model * warmup_steps, -0.5)


def scale_for_peak(d_model: int, warmup_steps: int, peak: float) -> float:
    """The `scale` that makes the schedule of (d_model, warmup_steps) peak at `peak`:
    peak * (d_model * warmup_steps)^0.5."""
    return peak * math.sqrt(d_model * warmup_steps)


def cooldown_steps_of(schedule_steps: int, fraction: float) -> int:
    """The cool-down length of a budget of `schedule_steps` updates: round(fraction * S),
    at least 1 and at most S."""
    return min(int(schedule_steps), max(1, round(fraction * schedule_steps)))
