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
