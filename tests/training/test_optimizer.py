"""FusedAdam against Keras' Adam and against the update written out in NumPy.

(Under MirroredStrategy, 1 vs 2 replicas, it is checked in test_replicas.py.)"""
import keras
import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.training.optimizer import FusedAdam
from transformer_tf.training.schedule import TransformerSchedule

ARGS = dict(beta_1=0.9, beta_2=0.98, epsilon=1e-9)
STEPS = 4


def gradients(step):
    """A dense gradient for a (3, 4) matrix and a sparse one (rows 0 and 2) for a (5, 2)."""
    rng = np.random.default_rng(step)
    dense = tf.constant(rng.normal(size=(3, 4)), tf.float32)
    sparse = tf.IndexedSlices(tf.constant(rng.normal(size=(2, 2)), tf.float32),
                              tf.constant([0, 2]), tf.constant([5, 2]))
    return dense, sparse


def run(optimizer, jit_compile=False):
    variables = [keras.Variable(np.ones((3, 4), np.float32) * 0.5, name="matrix"),
                 keras.Variable(np.ones((5, 2), np.float32), name="table")]
    optimizer.build(variables)

    @tf.function(jit_compile=jit_compile)
    def apply(dense, values):
        sparse = tf.IndexedSlices(values, tf.constant([0, 2]), tf.constant([5, 2]))
        optimizer.apply_gradients([(dense, variables[0]), (sparse, variables[1])])

    for step in range(STEPS):
        dense, sparse = gradients(step)
        apply(dense, sparse.values)
    return [v.numpy() for v in variables]


def numpy_adam(lr, dense_gradients):
    """The update of the class docstring, step by step, in float64."""
    w = np.full((3, 4), 0.5)
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, g in enumerate(dense_gradients, start=1):
        m = ARGS["beta_1"] * m + (1 - ARGS["beta_1"]) * g
        v = ARGS["beta_2"] * v + (1 - ARGS["beta_2"]) * g * g
        lr_t = lr(t - 1) * np.sqrt(1 - ARGS["beta_2"] ** t) / (1 - ARGS["beta_1"] ** t)
        w = w - lr_t * m / (np.sqrt(v) + ARGS["epsilon"])
    return w


@pytest.mark.parametrize("jit_compile", [False, True])
def test_same_updates_as_keras_adam_and_numpy(jit_compile):
    schedule = TransformerSchedule(d_model=16, warmup_steps=3)
    fused = run(FusedAdam(schedule, **ARGS), jit_compile)
    reference = run(keras.optimizers.Adam(schedule, **ARGS), jit_compile)
    for got, expected in zip(fused, reference):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)  # rounding order
    by_hand = numpy_adam(lambda step: float(schedule(step)),
                         [gradients(step)[0].numpy() for step in range(STEPS)])
    np.testing.assert_allclose(fused[0], by_hand, rtol=1e-5)
    assert np.abs(fused[0] - 0.5).min() > 1e-4  # every entry moved
    np.testing.assert_array_equal(fused[1][[1, 3, 4]], 1.0)  # sparse: untouched rows


def test_config_round_trip_and_checkpoint_compatible_with_adam(tmp_path):
    optimizer = FusedAdam(TransformerSchedule(d_model=16, warmup_steps=3), **ARGS)
    again = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(again, FusedAdam)
    assert again.get_config() == optimizer.get_config()
    # Same variables as Keras' Adam: checkpoints written with one restore into the other.
    variable = keras.Variable(np.ones((3, 4), np.float32))
    keras_adam = keras.optimizers.Adam(1e-3, **ARGS)
    keras_adam.build([variable])
    keras_adam.apply_gradients([(tf.ones((3, 4)), variable)])
    path = tf.train.Checkpoint(optimizer=keras_adam).save(str(tmp_path / "ckpt"))
    fused = FusedAdam(1e-3, **ARGS)
    fused.build([variable])
    tf.train.Checkpoint(optimizer=fused).restore(path).assert_consumed()
    assert int(fused.iterations) == 1
    np.testing.assert_allclose(fused.variables[1].numpy(), keras_adam.variables[1].numpy())
