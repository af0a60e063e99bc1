"""The paper's learning-rate schedule: values by hand, step offset, serialisation."""
import math

import keras
import numpy as np
import pytest

from transformer_tf.training.schedule import TransformerSchedule, transformer_learning_rate


def paper_rate(step, d_model, warmup, scale=1.0):
    # lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), worked out by hand.
    return scale * (1.0 / math.sqrt(d_model)) * min(1.0 / math.sqrt(step), step / warmup ** 1.5)


@pytest.mark.parametrize("d_model,warmup,scale", [(512, 4000, 1.0), (256, 2000, 2.0)])
def test_values_at_paper_steps(d_model, warmup, scale):
    schedule = TransformerSchedule(d_model, warmup, scale)
    # Keras passes iterations counted from 0: iteration i is the paper's step i + 1.
    for step in (1, warmup, 100_000):
        got = float(schedule(step - 1))
        assert got == pytest.approx(paper_rate(step, d_model, warmup, scale), rel=1e-6)
        assert transformer_learning_rate(step, d_model, warmup, scale) == pytest.approx(
            paper_rate(step, d_model, warmup, scale), rel=1e-12)


def test_hand_numbers_base_model():
    schedule = TransformerSchedule(512, 4000)
    # step 1: 512^-0.5 * 1 * 4000^-1.5 = 0.0441942 * 3.95285e-6 = 1.74693e-7
    assert float(schedule(0)) == pytest.approx(1.7469281e-07, rel=1e-5)
    # step 4000 (peak): 512^-0.5 * 4000^-0.5 = 6.98771e-4
    assert float(schedule(3999)) == pytest.approx(6.9877124e-04, rel=1e-5)
    assert schedule.peak_learning_rate == pytest.approx(6.9877124e-04, rel=1e-6)
    # step 100000: 512^-0.5 * 100000^-0.5 = 1.39754e-4
    assert float(schedule(99_999)) == pytest.approx(1.3975425e-04, rel=1e-5)


def test_first_step_is_not_zero_and_peak_at_warmup():
    schedule = TransformerSchedule(64, warmup_steps=10)
    rates = np.array([float(schedule(i)) for i in range(30)])
    assert rates[0] > 0
    assert int(np.argmax(rates)) == 9  # iteration 9 == paper step 10 == warmup
    assert np.all(np.diff(rates[:10]) > 0) and np.all(np.diff(rates[10:]) < 0)


def test_accumulation_counts_updates_not_micro_batches():
    plain = TransformerSchedule(64, warmup_steps=10)
    accumulated = TransformerSchedule(64, warmup_steps=10, accumulation_steps=4)
    for micro_batch in range(12):
        assert float(accumulated(micro_batch)) == pytest.approx(float(plain(micro_batch // 4)))


def test_get_config_round_trip():
    schedule = TransformerSchedule(256, 2000, scale=1.5, accumulation_steps=2, name="lr")
    config = schedule.get_config()
    assert config == {"d_model": 256, "warmup_steps": 2000, "scale": 1.5,
                      "accumulation_steps": 2, "name": "lr"}
    clone = TransformerSchedule.from_config(config)
    assert clone.get_config() == config
    for i in (0, 1999, 5000):
        assert float(clone(i)) == float(schedule(i))
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
    assert isinstance(restored, TransformerSchedule) and restored.get_config() == config


def test_adam_with_schedule_round_trips():
    schedule = TransformerSchedule(128, 400, scale=0.5)
    optimizer = keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(restored._learning_rate, TransformerSchedule)
    assert restored._learning_rate.get_config() == schedule.get_config()
    assert restored.get_config()["beta_2"] == 0.98


def test_model_with_scheduled_adam_saves_and_loads(tmp_path):
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    model.compile(optimizer=keras.optimizers.Adam(TransformerSchedule(16, 10)), loss="mse")
    x, y = np.ones((4, 3), "float32"), np.zeros((4, 2), "float32")
    model.fit(x, y, epochs=1, batch_size=2, verbose=0)  # two updates
    path = tmp_path / "m.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded.optimizer._learning_rate, TransformerSchedule)
    assert int(loaded.optimizer.iterations) == 2
    assert float(loaded.optimizer.learning_rate) == pytest.approx(paper_rate(3, 16, 10), rel=1e-6)


def test_rejects_bad_arguments():
    with pytest.raises(ValueError):
        TransformerSchedule(0)
    with pytest.raises(ValueError):
        TransformerSchedule(16, warmup_steps=0)
    with pytest.raises(ValueError):
        transformer_learning_rate(0, 16)


def test_with_keras_gradient_accumulation():
    # Keras passes its raw micro-batch counter to the schedule; accumulation_steps undoes it.
    var = keras.Variable(1.0)
    optimizer = keras.optimizers.Adam(TransformerSchedule(16, 10, accumulation_steps=2),
                                      gradient_accumulation_steps=2)
    for _ in range(4):  # 4 micro-batches == 2 updates
        optimizer.apply_gradients([(np.float32(0.1), var)])
    assert int(optimizer.iterations) == 2
    # the next update is paper step 3
    assert float(optimizer.learning_rate) == pytest.approx(paper_rate(3, 16, 10), rel=1e-6)


def test_warmup_hold_cooldown_by_hand():
    from transformer_tf.training.schedule import WarmupHoldCooldown

    # d_model 64, warm-up 10, scale 2: peak 2 * (64 * 10)^-0.5 = 0.0790569. A budget of
    # 50 updates cooling over the last 10 (paper steps 41-50).
    peak = 2.0 / math.sqrt(640.0)
    schedule = WarmupHoldCooldown(64, warmup_steps=10, scale=2.0, schedule_steps=50,
                                  cooldown_steps=10)
    expected = {1: peak / 10,         # warm-up, paper step 1 of 10
                5: peak / 2,
                10: peak,             # the peak, equation 3's (TransformerSchedule's)
                30: peak,             # held, where equation 3 decays to sqrt(10/30) of it
                40: peak,             # the last step before the cool-down
                41: peak,             # (50 + 1 - 41) / 10 = 1: the cool-down's first
                45: peak * 0.6,       # (51 - 45) / 10
                50: peak * 0.1,       # the budget's last update
                51: 0.0, 80: 0.0}     # past the budget
    for step, rate in expected.items():
        assert float(schedule(step - 1)) == pytest.approx(rate, rel=1e-6, abs=1e-12), step
    assert schedule.peak_learning_rate == pytest.approx(
        TransformerSchedule(64, 10, 2.0).peak_learning_rate)
    assert float(schedule(9)) == pytest.approx(float(TransformerSchedule(64, 10, 2.0)(9)))


def test_warmup_hold_cooldown_round_trips_and_refuses_bad_arguments():
    from transformer_tf.training.schedule import WarmupHoldCooldown

    schedule = WarmupHoldCooldown(32, 4, 0.5, schedule_steps=20, cooldown_steps=5, name="lr")
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
    assert isinstance(restored, WarmupHoldCooldown)
    assert restored.get_config() == schedule.get_config()
    assert [float(restored(i)) for i in range(22)] == [float(schedule(i)) for i in range(22)]
    with pytest.raises(ValueError, match="cooldown_steps \\(21\\) must not exceed"):
        WarmupHoldCooldown(32, 4, 0.5, schedule_steps=20, cooldown_steps=21)
    with pytest.raises(ValueError, match="schedule_steps must be positive"):
        WarmupHoldCooldown(32, 4, 0.5, schedule_steps=0, cooldown_steps=1)
    with pytest.raises(ValueError, match="together"):
        WarmupHoldCooldown(32, 4, 0.5, schedule_steps=20)


def test_a_time_clocked_cooldown_follows_its_factor():
    import tensorflow as tf
    from transformer_tf.training.schedule import WarmupHoldCooldown

    factor = tf.Variable(1.0)
    schedule = WarmupHoldCooldown(64, warmup_steps=10, scale=2.0, time_factor=factor)
    peak = 2.0 / math.sqrt(640.0)
    assert float(schedule(4)) == pytest.approx(peak / 2)  # the warm-up, as the step clock's
    assert float(schedule(999)) == pytest.approx(peak)  # held for any number of steps
    factor.assign(0.25)  # a quarter of the cool-down's time left
    assert float(schedule(999)) == pytest.approx(peak / 4)
    assert float(schedule(4)) == pytest.approx(peak / 8)
    traced = tf.function(lambda step: schedule(step))  # read live in a traced step, too
    factor.assign(0.0)
    assert float(traced(tf.constant(999))) == 0.0
    factor.assign(0.5)
    assert float(traced(tf.constant(999))) == pytest.approx(peak / 2)
    rebuilt = WarmupHoldCooldown.from_config(schedule.get_config())  # no trainer: never cools
    assert rebuilt.time_factor is not None and float(rebuilt(999)) == pytest.approx(peak)


def test_the_optimizer_takes_the_configs_shape():
    from transformer_tf.config import TrainingConfig
    from transformer_tf.training.fit import make_optimizer
    from transformer_tf.training.schedule import WarmupHoldCooldown

    paper = make_optimizer(TrainingConfig(warmup_steps=10), 64)._learning_rate
    held = make_optimizer(TrainingConfig(warmup_steps=10, lr_schedule="warmup_hold_cooldown",
                                         schedule_steps=50, cooldown_steps=10),
                          64)._learning_rate
    assert type(paper) is TransformerSchedule and type(held) is WarmupHoldCooldown
    assert (held.schedule_steps, held.cooldown_steps) == (50, 10)
    assert float(held(29)) == pytest.approx(paper.peak_learning_rate)  # held at step 30
    assert float(paper(29)) == pytest.approx(paper.peak_learning_rate * math.sqrt(10 / 30))
