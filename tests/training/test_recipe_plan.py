"""The budget-aware recipe's rules (training/recipe_plan.py), worked by hand: planned steps
and passes from the budget, the warm-up, the learning-rate scale that keeps the peak rate,
the regularisation tier of the passes, the checkpoint cadence; a user's settings win and a
step plan uses no timing."""
import math

import pytest

from transformer_tf.config import ModelConfig, TrainingConfig
from transformer_tf.presets import get_preset
from transformer_tf.training import recipe_plan as rp

MULTI30K = get_preset("multi30k")

# (budget, steps/pass, expected: planned steps, passes, tier's (dropout, attention, ReLU,
# label smoothing), warm-up, learning-rate scale, cadence). The multi30k preset: warm-up
# 1000, scale 1, beta_2 0.98 (minimum warm-up 2 / 0.02 = 100), average_last 5.
CASES = [
    # 1,000 steps, 111 steps a pass: 9.01 passes -> "4 to 12"; warm-up 10% = 100 (also
    # the minimum); scale sqrt(100/1000); a checkpoint every 0.2 * 1000 / 5 = 40 steps.
    ({"budget_steps": 1000}, 111.0,
     (1000, 1000 / 111, (0.2, 0.0, 0.0, 0.1), 100, math.sqrt(0.1), 40)),
    # 2,000 steps: 18.02 passes -> "12 to 25"; warm-up 200, scale sqrt(0.2); every 80.
    ({"budget_steps": 2000}, 111.0,
     (2000, 2000 / 111, (0.3, 0.1, 0.1, 0.1), 200, math.sqrt(0.2), 80)),
    # 300 steps at 100 a pass: 3 passes -> "under 4"; 10% = 30 < 100, the minimum holds.
    ({"budget_steps": 300}, 100.0,
     (300, 3.0, (0.1, 0.0, 0.0, 0.1), 100, math.sqrt(0.1), 12)),
    # Exactly 12 passes starts the third tier; warm-up 10% of 1200 = 120.
    ({"budget_steps": 1200}, 100.0,
     (1200, 12.0, (0.3, 0.1, 0.1, 0.1), 120, math.sqrt(0.12), 48)),
    # 60 minutes at 1.15 steps/s after a 45 s probe: (3600 - 45) * 1.15 = 4088.25 -> 4088
    # steps, 36.8 passes -> "25 or more"; warm-up 409; the minute cadence
    # min(5, 60 * 0.2 / 5) = 2.4 minutes.
    ({"budget_minutes": 60.0, "steps_per_second": 1.15, "probe_seconds": 45.0}, 111.0,
     (4088, 4088 / 111, (0.3, 0.2, 0.3, 0.2), 409, math.sqrt(0.409), None)),
    # 60 minutes at 0.25 steps/s: 3555 * 0.25 = 888.75 -> 888 steps, 8 passes.
    ({"budget_minutes": 60.0, "steps_per_second": 0.25, "probe_seconds": 45.0}, 111.0,
     (888, 8.0, (0.2, 0.0, 0.0, 0.1), 100, math.sqrt(0.1), None)),
    # Warm-up never exceeds the config's: 100,000 steps of the preset cap at 1000, scale 1.
    ({"budget_steps": 100_000}, 111.0,
     (100_000, 100_000 / 111, (0.3, 0.2, 0.3, 0.2), 1000, 1.0, 4000)),
]


@pytest.mark.parametrize("budget, steps_per_pass, expected", CASES)
def test_the_rules_worked_by_hand(budget, steps_per_pass, expected):
    steps, passes, tier, warmup, scale, cadence = expected
    plan = rp.plan_recipe(steps_per_pass=steps_per_pass, model_config=MULTI30K.model,
                          training_config=MULTI30K.training, **budget)
    assert plan.planned_steps == steps and plan.passes == pytest.approx(passes)
    settings = plan.settings
    assert (settings["dropout"], settings["attention_dropout"], settings["ffn_dropout"],
            settings["label_smoothing"]) == tier
    assert settings["warmup_steps"] == warmup
    assert settings["learning_rate_scale"] == pytest.approx(scale, abs=1e-6)
    assert settings.get("checkpoint_every_steps") == cadence
    assert plan.kept == {}
    # The peak held, then a cool-down over the last 20% of the run: of a step plan's steps,
    # of a time budget's minutes.
    assert settings["lr_schedule"] == "warmup_hold_cooldown"
    if "budget_minutes" in budget:
        assert plan.checkpoint_every_minutes == pytest.approx(2.4)
        assert plan.budget == "minutes" and plan.budget_steps is None
        assert settings["cooldown_minutes"] == pytest.approx(12.0)  # 0.2 * 60
        assert "schedule_steps" not in settings and "cooldown_steps" not in settings
    else:
        assert plan.checkpoint_every_minutes is None and plan.steps_per_second is None
        assert (settings["schedule_steps"], settings["cooldown_steps"]) == (
            steps, round(0.2 * steps))
        assert "cooldown_minutes" not in settings
    _, planned = rp.apply_plan(MULTI30K.model, MULTI30K.training, plan)  # a valid config
    assert planned.lr_schedule == "warmup_hold_cooldown"


def test_the_peak_learning_rate_is_the_configs():
    from transformer_tf.training.schedule import TransformerSchedule

    plan = rp.plan_recipe(steps_per_pass=111.0, model_config=MULTI30K.model,
                          training_config=MULTI30K.training, budget_steps=1500)
    model, training = rp.apply_plan(MULTI30K.model, MULTI30K.training, plan)
    planned = TransformerSchedule(model.d_model, training.warmup_steps,
                                  training.learning_rate_scale)
    preset = TransformerSchedule(MULTI30K.model.d_model, MULTI30K.training.warmup_steps)
    assert training.warmup_steps == 150 < preset.warmup_steps
    assert planned.peak_learning_rate == pytest.approx(preset.peak_learning_rate, rel=1e-5)
    # ... reached at the planned warm-up's end (schedule(i) is paper step i + 1).
    assert float(planned(149)) == pytest.approx(preset.peak_learning_rate, rel=1e-5)


def test_the_tiers_cover_every_pass_count_in_order():
    bounds = [tier.min_passes for tier in rp.REGULARISATION_TIERS]
    assert bounds[0] == 0 and bounds == sorted(bounds)
    for low, high in zip(rp.REGULARISATION_TIERS, rp.REGULARISATION_TIERS[1:]):
        assert rp.tier_for(high.min_passes - 1e-6) is low and rp.tier_for(high.min_passes) is high
        # More passes never mean less regularisation.
        assert all(getattr(high, f) >= getattr(low, f)
                   for f in ("dropout", "attention_dropout", "ffn_dropout", "label_smoothing"))


def test_a_users_settings_win_and_are_listed_as_kept():
    model = MULTI30K.model.replace(dropout=0.25)
    training = MULTI30K.training.replace(warmup_steps=300, label_smoothing=0.0,
                                         checkpoint_every_minutes=1.0)
    plan = rp.plan_recipe(steps_per_pass=111.0, model_config=model, training_config=training,
                          budget_steps=2000,
                          user_fields={"dropout", "warmup_steps", "label_smoothing",
                                       "checkpoint_every_minutes"})
    assert plan.kept == {"dropout": 0.25, "warmup_steps": 300, "label_smoothing": 0.0,
                         "checkpoint_every_minutes": 1.0}
    # The user's warm-up is the reference of the scale: the peak stays the user's.
    assert plan.settings == {"attention_dropout": 0.1, "ffn_dropout": 0.1,
                             "learning_rate_scale": 1.0, "lr_schedule": "warmup_hold_cooldown",
                             "schedule_steps": 2000, "cooldown_steps": 400}
    planned_model, planned_training = rp.apply_plan(model, training, plan)
    assert (planned_model.dropout, planned_model.attention_dropout) == (0.25, 0.1)
    assert (planned_training.warmup_steps, planned_training.label_smoothing,
            planned_training.checkpoint_every_steps,
            planned_training.checkpoint_every_minutes) == (300, 0.0, None, 1.0)


def test_a_step_plan_uses_no_timing_and_is_the_same_every_time():
    common = {"steps_per_pass": 111.0, "model_config": MULTI30K.model,
              "training_config": MULTI30K.training, "budget_steps": 2000}
    plan = rp.plan_recipe(**common)
    # A speed or a minute budget given along with a step budget changes nothing.
    timed = rp.plan_recipe(**common, budget_minutes=5.0, steps_per_second=9.0,
                           probe_seconds=30.0)
    assert timed == plan and plan.budget == "steps" and plan.probe_seconds is None
    assert rp.RecipePlan.from_dict(plan.to_dict()) == plan


def test_only_the_fields_a_model_has_are_planned():
    from transformer_tf.config import ConvS2SConfig

    plan = rp.plan_recipe(steps_per_pass=10.0, model_config=ConvS2SConfig(),
                          training_config=TrainingConfig(), budget_steps=50)
    assert "dropout" in plan.settings and "attention_dropout" not in plan.settings
    assert rp.heaviest_dropouts(ConvS2SConfig()) == {"dropout": 0.3}
    assert rp.heaviest_dropouts(ModelConfig(), {"ffn_dropout"}) == {
        "dropout": 0.3, "attention_dropout": 0.2}


def test_minimum_warmup_is_two_over_one_minus_beta_2():
    assert rp.minimum_warmup(0.98) == 100 and rp.minimum_warmup(0.999) == 2000
    assert rp.minimum_warmup(0.9) == 20


@pytest.mark.parametrize("arguments, message", [
    ({"budget_steps": 10, "steps_per_pass": 0.0}, "steps_per_pass"),
    ({"budget_steps": 0}, "budget_steps"),
    ({"budget_minutes": 5.0}, "steps_per_second"),
    ({}, "give budget_steps or budget_minutes"),
])
def test_bad_inputs_are_refused(arguments, message):
    arguments = {"steps_per_pass": 10.0, **arguments}
    with pytest.raises(ValueError, match=message):
        rp.plan_recipe(model_config=ModelConfig(), training_config=TrainingConfig(),
                       **arguments)


def test_a_record_that_is_not_a_plan_is_refused():
    plan = rp.plan_recipe(steps_per_pass=10.0, model_config=ModelConfig(),
                          training_config=TrainingConfig(), budget_steps=50).to_dict()
    with pytest.raises(ValueError, match=r"plan.json: not a recipe plan.*\['passes'\]"):
        rp.RecipePlan.from_dict({k: v for k, v in plan.items() if k != "passes"},
                                source="plan.json")


def test_a_users_schedule_shape_wins_and_plans_no_budget_fields():
    training = MULTI30K.training.replace(lr_schedule="inverse_sqrt")
    plan = rp.plan_recipe(steps_per_pass=111.0, model_config=MULTI30K.model,
                          training_config=training, budget_steps=1000,
                          user_fields={"lr_schedule"})
    assert plan.kept == {"lr_schedule": "inverse_sqrt"}
    assert not {"lr_schedule", "schedule_steps", "cooldown_steps"} & set(plan.settings)
    _, planned = rp.apply_plan(MULTI30K.model, training, plan)
    assert (planned.lr_schedule, planned.schedule_steps, planned.warmup_steps) == (
        "inverse_sqrt", None, 100)


def test_the_planned_shape_is_a_valid_config_for_any_budget():
    for steps in (1, 2, 3, 7, 1000):
        plan = rp.plan_recipe(steps_per_pass=111.0, model_config=MULTI30K.model,
                              training_config=MULTI30K.training, budget_steps=steps)
        _, planned = rp.apply_plan(MULTI30K.model, MULTI30K.training, plan)
        assert 1 <= planned.cooldown_steps <= planned.schedule_steps == steps
