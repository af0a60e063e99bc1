"""Which checkpoints averaging may use, and how often a time-budgeted run saves."""
from __future__ import annotations

import pytest

from transformer_tf.config import TrainingConfig
from transformer_tf.rundir import checkpoints
from transformer_tf.training import averaging
from transformer_tf.training.fit import TrainOptions, checkpoint_period


def paths(*steps):
    return [f"/run/checkpoints/ckpt-{s}" for s in steps]


def test_only_the_final_fifth_of_training_is_averaged():
    # The 20-minute run: averaging ckpt-216 in cost 10 BLEU.
    assert averaging.tail_checkpoints(paths(216, 444, 665, 892), 5) == paths(892)
    assert averaging.tail_checkpoints(paths(100, 720, 760, 800, 850, 900), 5) == \
        paths(720, 760, 800, 850, 900)
    assert averaging.tail_checkpoints(paths(720, 760, 800, 850, 900), 3) == paths(800, 850, 900)
    assert averaging.tail_checkpoints([], 5) == []


def test_saves_a_step_apart_count_once():
    # A periodic save at 3392 and the end-of-training save at 3393 are one point (and
    # 2713 < 0.8 x 3393 is too early).
    got = averaging.tail_checkpoints(paths(2713, 2883, 3052, 3222, 3392, 3393), 5)
    assert got == paths(2883, 3052, 3222, 3393)


def test_brute_force_rule_on_small_runs():
    import itertools
    for steps in itertools.chain(itertools.combinations(range(1, 31), 4),
                                 itertools.combinations(range(190, 215), 4)):
        final = steps[-1]
        got = [checkpoints.checkpoint_step(p) for p in averaging.tail_checkpoints(paths(*steps), 3)]
        expected = [s for i, s in enumerate(steps) if s >= 0.8 * final
                    and (i == len(steps) - 1 or steps[i + 1] - s >= 0.01 * final)][-3:]
        assert got == expected, steps


def test_time_budgeted_runs_save_often_enough_for_the_tail():
    training = TrainingConfig(checkpoint_every_minutes=5.0, average_last=5)
    budget = TrainOptions(data_dir="d", model_dir="m", max_minutes=60)
    assert checkpoint_period(training, budget) == pytest.approx(60 * 0.2 / 5)
    steps = TrainOptions(data_dir="d", model_dir="m", max_steps=1000, max_minutes=60)
    assert checkpoint_period(training, steps) == 5.0
    long_budget = TrainOptions(data_dir="d", model_dir="m", max_minutes=1000)
    assert checkpoint_period(training, long_budget) == 5.0
