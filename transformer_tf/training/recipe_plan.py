"""The budget-aware recipe: from a run's budget and its expected passes over the data to
its warm-up, learning-rate scale, dropouts, label smoothing and checkpoint cadence.

Pure functions: `plan_recipe` turns what is known before a run begins into
a `RecipePlan`, and `apply_plan` writes the plan into the run's configs.

    planned steps  S = the step budget                      (--max-steps; --epochs as steps)
                     = steps/second x training seconds left  (a time budget alone; the speed
                                                              measured by a probe, speed_probe.py)
    expected passes P = S / steps per pass over the training data

The rules (docs/training.md has the same table, with the literature behind it):

  warm-up   W = clamp(WARMUP_FRACTION * S, 2 / (1 - beta_2), the config's warm-up)
  LR scale  the config's scale * sqrt(W / the config's warm-up): the peak rate
            scale * (d_model * W)^-0.5 stays the config's, the warm-up is just shorter
  shape     "warmup_hold_cooldown": the peak is held after the warm-up, and the rate falls
            linearly to zero over the run's last TAIL_FRACTION, the part the averaged
            checkpoints come from: a step plan's last C = round(TAIL_FRACTION * S) steps
            (schedule_steps S, cooldown_steps C), a time budget's last TAIL_FRACTION of its
            minutes (cooldown_minutes), whatever its steps turn out to be
  dropouts  by P, from `REGULARISATION_TIERS` (residual, attention weights, ReLU; label
            smoothing)
  cadence   a step plan saves every floor(TAIL_FRACTION * S / average_last) steps, so the
            `average_last` checkpoints averaging takes fall in the run's final
            TAIL_FRACTION; a time plan keeps saving by the minute (`checkpoint_minutes`)

A field the user set (a flag, --model-option or --training-option) is never planned: the
user's value stands and the plan lists it under `kept`. A step plan involves no timing,
so the same step budget always gives the same plan.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from transformer_tf.training.averaging import TAIL_FRACTION
from transformer_tf.training.rate_formula import cooldown_steps_of

WARMUP_FRACTION = 0.1


@dataclasses.dataclass(frozen=True)
class RegularisationTier:
    """The regularisation of runs expected to see the data `min_passes` times or more."""

    min_passes: float
    name: str
    dropout: float
    attention_dropout: float
    ffn_dropout: float
    label_smoothing: float


# Ordered by min_passes; a run takes the last tier whose min_passes <= its passes.
REGULARISATION_TIERS = (
    RegularisationTier(0.0, "under 4 passes", 0.1, 0.0, 0.0, 0.1),
    RegularisationTier(4.0, "4 to 12 passes", 0.2, 0.0, 0.0, 0.1),
    RegularisationTier(12.0, "12 to 25 passes", 0.3, 0.1, 0.1, 0.1),
    RegularisationTier(25.0, "25 passes or more", 0.3, 0.2, 0.3, 0.2),
)

MODEL_FIELDS = ("dropout", "attention_dropout", "ffn_dropout")
TRAINING_FIELDS = ("warmup_steps", "learning_rate_scale", "lr_schedule", "schedule_steps",
                   "cooldown_steps", "cooldown_minutes", "label_smoothing",
                   "checkpoint_every_steps")
PLANNED_SCHEDULE = "warmup_hold_cooldown"
# A planned field is left alone when the user set it, or set another field that decides
# the same thing (a checkpoint period in minutes is a cadence too).
USER_FIELDS_THAT_DECIDE = {"checkpoint_every_steps": ("checkpoint_every_steps",
                                                      "checkpoint_every_minutes")}


def tier_for(passes: float) -> RegularisationTier:
    """The regularisation tier of a run expected to make `passes` passes over the data."""
    chosen = REGULARISATION_TIERS[0]
    for tier in REGULARISATION_TIERS:
        if passes >= tier.min_passes:
            chosen = tier
    return chosen


def minimum_warmup(adam_beta_2: float) -> int:
    """2 / (1 - beta_2) steps, the untuned warm-up of Ma & Yarats (2021): until Adam's
    second-moment average has seen about this many steps its adaptive rate is too noisy
    for full steps; 100 steps at the paper's beta_2 = 0.98."""
    return max(1, math.ceil(2.0 / (1.0 - adam_beta_2) - 1e-9))  # 1e-9: float rounding


def checkpoint_minutes(every_minutes: float, budget_minutes: float, average_last: int) -> float:
    """Minutes between checkpoints of a run planned by time alone: the config's period, or
    shorter, so that `average_last` checkpoints fall in the budget's final TAIL_FRACTION."""
    return min(every_minutes, budget_minutes * TAIL_FRACTION / average_last)


@dataclasses.dataclass(frozen=True)
class RecipePlan:
    """What a run was planned with, and why; recorded in MDIR/recipe_plan.json.

    Attributes:
      budget: "steps" (a step or epoch plan) or "minutes" (a time budget alone).
      budget_steps, budget_minutes: the budget (the other is None).
      steps_per_second: the probe's measured training speed (time budgets only).
      probe_seconds: wall time of the probe, counted in the time budget (time budgets only).
      planned_steps: S, the steps the run is expected to make.
      steps_per_pass: optimizer steps in one pass over the training data.
      passes: P = S / steps_per_pass.
      tier: the name of the regularisation tier of P.
      settings: the planned values, field -> value (ModelConfig / TrainingConfig fields).
      kept: fields the user set, with the user's value (not planned).
      checkpoint_every_minutes: a time budget's checkpoint period (None for step plans).
    """

    budget: str
    budget_steps: int | None
    budget_minutes: float | None
    steps_per_second: float | None
    probe_seconds: float | None
    planned_steps: int
    steps_per_pass: float
    passes: float
    tier: str
    settings: dict
    kept: dict
    checkpoint_every_minutes: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, record: dict[str, Any], source: str = "recipe plan") -> RecipePlan:
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(record) - known)
        missing = sorted(known - set(record) - {"checkpoint_every_minutes"})
        if unknown or missing:
            raise ValueError(f"{source}: not a recipe plan (unknown fields {unknown}, "
                             f"missing fields {missing})")
        return cls(**record)

    def describe(self) -> str:
        """The plan in one paragraph, for the log and the job's summary."""
        if self.budget == "minutes":
            basis = (f"{self.budget_minutes:g} min at {self.steps_per_second:.3f} steps/s "
                     f"(measured by a {self.probe_seconds:.0f} s probe, counted in the budget)")
        else:
            basis = f"a plan of {self.budget_steps} steps"
        values = ", ".join(f"{name} {_short(value)}" for name, value in self.settings.items())
        kept = ", ".join(f"{name} {_short(value)}" for name, value in self.kept.items())
        cadence = (f"; checkpoints every {self.checkpoint_every_minutes:.2f} min"
                   if self.checkpoint_every_minutes is not None else "")
        return (f"planned for ~{self.planned_steps} steps from {basis}: "
                f"{self.passes:.1f} passes over the data ({self.steps_per_pass:.1f} steps "
                f"a pass), tier '{self.tier}': {values}{cadence}"
                + (f"; yours kept: {kept}" if kept else ""))


def _short(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def plan_recipe(*, steps_per_pass: float, model_config, training_config,
                user_fields=frozenset(), budget_steps: int | None = None,
                budget_minutes: float | None = None, steps_per_second: float | None = None,
                probe_seconds: float = 0.0) -> RecipePlan:
    """The plan of a run (the rules of the module docstring).

    Args:
      steps_per_pass: optimizer steps in one pass over the training data (> 0).
      model_config: the run's model config before planning (preset plus the user's
        changes); only its MODEL_FIELDS that exist are planned.
      training_config: the run's TrainingConfig before planning.
      user_fields: names of the fields the user set; they keep their values.
      budget_steps: a step budget; then the plan uses no timing at all.
      budget_minutes: a time budget (used only without budget_steps), with
        `steps_per_second` measured over `probe_seconds`.

    Returns:
      The RecipePlan; `apply_plan` puts it into the configs.
    """
    if steps_per_pass <= 0:
        raise ValueError(f"steps_per_pass must be positive, got {steps_per_pass}")
    if budget_steps is not None:
        if budget_steps <= 0:
            raise ValueError(f"budget_steps must be positive, got {budget_steps}")
        budget, planned_steps, speed, probe = "steps", int(budget_steps), None, None
        budget_minutes = None
    elif budget_minutes is not None:
        if steps_per_second is None or steps_per_second <= 0:
            raise ValueError("a time budget needs the measured steps_per_second (> 0)")
        budget, speed, probe = "minutes", float(steps_per_second), float(probe_seconds)
        seconds_left = max(0.0, budget_minutes * 60.0 - probe)
        planned_steps = max(1, int(seconds_left * speed))
    else:
        raise ValueError("give budget_steps or budget_minutes")
    passes = planned_steps / steps_per_pass
    tier = tier_for(passes)

    config_warmup = training_config.warmup_steps
    warmup = min(config_warmup, max(minimum_warmup(training_config.adam_beta_2),
                                    round(WARMUP_FRACTION * planned_steps)))
    if "warmup_steps" in user_fields:
        warmup = config_warmup
    candidates = {
        "dropout": tier.dropout, "attention_dropout": tier.attention_dropout,
        "ffn_dropout": tier.ffn_dropout,
        "warmup_steps": warmup,
        "learning_rate_scale": round(training_config.learning_rate_scale
                                     * math.sqrt(warmup / config_warmup), 6),
        **_schedule_candidates(training_config, user_fields, planned_steps,
                               budget_minutes if budget == "minutes" else None),
        "label_smoothing": tier.label_smoothing,
        "checkpoint_every_steps": (max(1, math.floor(
            TAIL_FRACTION * planned_steps / training_config.average_last))
            if budget == "steps" else None),
    }
    model_fields = {field.name for field in dataclasses.fields(model_config)}
    settings, kept = {}, {}
    for name, value in candidates.items():
        config = model_config if name in MODEL_FIELDS else training_config
        if name in MODEL_FIELDS and name not in model_fields:
            continue
        deciding = [f for f in USER_FIELDS_THAT_DECIDE.get(name, (name,)) if f in user_fields]
        if deciding:
            kept.update({f: getattr(config, f) for f in deciding})
        elif value is not None:
            settings[name] = value
    minutes = None
    if budget == "minutes" and "checkpoint_every_minutes" not in user_fields:
        minutes = checkpoint_minutes(training_config.checkpoint_every_minutes, budget_minutes,
                                     training_config.average_last)
    return RecipePlan(budget=budget, budget_steps=budget_steps if budget == "steps" else None,
                      budget_minutes=budget_minutes, steps_per_second=speed,
                      probe_seconds=probe, planned_steps=planned_steps,
                      steps_per_pass=float(steps_per_pass), passes=passes, tier=tier.name,
                      settings=settings, kept=kept, checkpoint_every_minutes=minutes)


def _schedule_candidates(training_config, user_fields, planned_steps: int,
                         budget_minutes: float | None) -> dict:
    """The planned shape (module doc), unless the user chose the shape: then only the
    budget fields of a shape that has them (a user's own values stand, as any field's).
    A step plan's cool-down counts steps; a time budget's counts its minutes (the planned
    steps are the probe's estimate, and validation and checkpoints take time it did not
    see)."""
    shape = (training_config.lr_schedule if "lr_schedule" in user_fields
             else PLANNED_SCHEDULE)
    if shape != "warmup_hold_cooldown":
        return {"lr_schedule": shape}
    if budget_minutes is not None:
        return {"lr_schedule": shape,
                "cooldown_minutes": round(TAIL_FRACTION * budget_minutes, 6)}
    return {"lr_schedule": shape, "schedule_steps": planned_steps,
            "cooldown_steps": cooldown_steps_of(planned_steps, TAIL_FRACTION)}


def heaviest_dropouts(model_config, user_fields=frozenset()) -> dict:
    """The dropout rates of the most regularised tier, for the fields `model_config` has
    and the user did not set: a speed probe's model with them runs every dropout op a
    planned run may have (a rate of 0 skips the op), so it is never faster than the run."""
    top = REGULARISATION_TIERS[-1]
    names = {field.name for field in dataclasses.fields(model_config)}
    return {name: getattr(top, name) for name in MODEL_FIELDS
            if name in names and name not in user_fields}


def apply_plan(model_config, training_config, plan: RecipePlan):
    """(model_config, training_config) with the plan's settings written in."""
    model_changes = {k: v for k, v in plan.settings.items() if k in MODEL_FIELDS}
    training_changes = {k: v for k, v in plan.settings.items() if k in TRAINING_FIELDS}
    if plan.checkpoint_every_minutes is not None:
        training_changes["checkpoint_every_minutes"] = plan.checkpoint_every_minutes
    return model_config.replace(**model_changes), training_config.replace(**training_changes)
