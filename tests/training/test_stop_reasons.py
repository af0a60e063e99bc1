"""Where a run's plan ends and how it says why it stopped (`training.fit`), case by case.

The full runs behind each reason (time budget, early stopping, cool-down, planned step)
are tested in test_run_budget, test_keep_best and test_planned_runs; here the two rules
themselves, every branch and the precedence between them, without training.
"""
import pytest

from transformer_tf.presets import get_preset
from transformer_tf.training.fit import TrainOptions, planned_last_step, why_it_stopped

PASS = 37  # steps in one pass over the data, for the epoch plans


def _options(**plan):
    return TrainOptions(data_dir="unused", model_dir="unused", **plan)


def _never_counted():
    raise AssertionError("the pass was counted for a plan that is not in epochs")


ADAM = get_preset("multi30k").training
HOLD_COOLDOWN = ADAM.replace(lr_schedule="warmup_hold_cooldown", schedule_steps=500,
                             cooldown_steps=100)


@pytest.mark.parametrize("plan, training, expected", [
    ({"max_steps": 1000}, ADAM, (1000, False)),
    ({"epochs": 2.5}, ADAM, (93, False)),           # ceil(2.5 x 37 = 92.5)
    ({"max_minutes": 60.0}, ADAM, (10**12, False)),  # time alone: no step limit
    ({"max_steps": 1000}, HOLD_COOLDOWN, (500, True)),  # the rate is 0 after step 500
    ({"max_steps": 400}, HOLD_COOLDOWN, (400, False)),  # the plan ends first
    ({"max_steps": 500}, HOLD_COOLDOWN, (500, False)),  # the same step: the plan's
    ({"max_minutes": 60.0}, HOLD_COOLDOWN, (500, True)),
])
def test_the_planned_last_step(plan, training, expected):
    counted = (lambda: PASS) if "epochs" in plan else _never_counted
    assert planned_last_step(_options(**plan), training, counted) == expected


NOTHING = dict(out_of_time=False, early_stopping_reason=None, plateau_finished=False,
               ends_with_schedule=False, planned_steps=800, max_minutes=60.0,
               min_learning_rate=1e-5)


@pytest.mark.parametrize("given, expected", [
    ({}, ("steps", "reached the planned step 800")),
    ({"ends_with_schedule": True},
     ("steps", "reached step 800, where the learning rate's cool-down ends "
               "(lr_schedule warmup_hold_cooldown)")),
    ({"plateau_finished": True, "ends_with_schedule": True},
     ("plateau", "the learning rate fell below its minimum 1e-05 (dev NLL stopped "
                 "improving)")),
    ({"early_stopping_reason": "no better for 3", "plateau_finished": True},
     ("early_stopping", "no better for 3")),
    ({"out_of_time": True, "early_stopping_reason": "no better for 3"},
     ("time", "trained the run's budget of 60 minutes")),
    ({"out_of_time": True, "max_minutes": 7.5},
     ("time", "trained the run's budget of 7.5 minutes")),
])
def test_why_it_stopped_by_precedence(given, expected):
    assert why_it_stopped(**{**NOTHING, **given}) == expected
