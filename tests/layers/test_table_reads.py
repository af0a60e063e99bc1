"""Embedding tables under mixed precision: a lookup converts the rows it takes, never the
whole table (which a decoding step would otherwise pay for at every step), and gives the
values and gradients of the plain cast-then-look-up computation."""
import numpy as np
import tensorflow as tf

from transformer_tf.layers.position_encoding import LearnedPositionEmbedding
from transformer_tf.layers.shared_embedding import SharedEmbedding

VOCAB, D_MODEL = 50, 8


def _cast_input_shapes(function, *args):
    """The static shapes of every tensor the traced `function(*args)` casts."""
    graph = tf.function(function).get_concrete_function(*args).graph
    return [tuple(op.inputs[0].shape) for op in graph.get_operations() if op.type == "Cast"]


def test_a_lookup_casts_only_the_rows_it_takes():
    layer = SharedEmbedding(VOCAB, D_MODEL, dtype="mixed_bfloat16")
    layer.build()
    ids = tf.constant([[3, 7, 7], [0, 49, 1]])
    assert (VOCAB, D_MODEL) not in _cast_input_shapes(layer, ids)
    assert (2, 3, D_MODEL) in _cast_input_shapes(layer, ids)

    table = layer.embeddings.numpy()
    out = layer(ids)
    assert out.dtype == tf.bfloat16
    expected = tf.cast(tf.cast(table[ids.numpy()], tf.bfloat16), tf.float32) * np.sqrt(D_MODEL)
    np.testing.assert_allclose(tf.cast(out, tf.float32).numpy(), expected.numpy(), rtol=1e-2)


def test_the_lookup_gradient_is_the_cast_table_gradient():
    layer = SharedEmbedding(VOCAB, D_MODEL, scale=False, dtype="mixed_bfloat16")
    layer.build()
    ids = tf.constant([[3, 7, 7, 2]])
    weights = tf.random.stateless_normal([1, 4, D_MODEL], seed=[1, 2])

    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.cast(layer(ids), tf.float32) * weights)
    ours = tf.convert_to_tensor(tape.gradient(loss, layer.embeddings.value))

    table = tf.Variable(layer.embeddings.numpy())
    with tf.GradientTape() as tape:
        rows = tf.gather(tf.cast(table, tf.bfloat16), ids)
        loss = tf.reduce_sum(tf.cast(rows, tf.float32) * weights)
    reference = tf.convert_to_tensor(tape.gradient(loss, table))
    np.testing.assert_array_equal(ours.numpy(), reference.numpy())
    # Row 7, taken twice, gets the sum of both positions' (bfloat16-rounded) weights.
    twice = tf.cast(tf.cast(weights[0, 1], tf.bfloat16), tf.float32) + tf.cast(
        tf.cast(weights[0, 2], tf.bfloat16), tf.float32)
    np.testing.assert_allclose(ours.numpy()[7], twice.numpy(), rtol=1e-6)


def test_the_output_projection_still_runs_in_the_compute_dtype():
    layer = SharedEmbedding(VOCAB, D_MODEL, dtype="mixed_bfloat16")
    layer.build()
    assert layer.output_kernel().dtype == tf.bfloat16
    x = tf.random.stateless_normal([2, 3, D_MODEL], seed=[3, 4])
    logits = layer.logits(tf.cast(x, tf.bfloat16))
    assert logits.dtype == tf.float32 and logits.shape == (2, 3, VOCAB)
    exact = tf.einsum("bld,vd->blv", x, layer.embeddings.value)
    np.testing.assert_allclose(logits.numpy(), exact.numpy(), atol=0.05)


def test_learned_positions_cast_only_the_rows_they_take():
    layer = LearnedPositionEmbedding(max_position=40, d_model=D_MODEL, dtype="mixed_bfloat16")
    layer.build()
    x = tf.zeros([2, 1, D_MODEL], tf.bfloat16)
    shapes = _cast_input_shapes(lambda x: layer(x, offset=5), x)
    assert (40, D_MODEL) not in shapes
    out = layer(x, offset=5)
    assert out.dtype == tf.bfloat16
    np.testing.assert_array_equal(
        tf.cast(out, tf.float32).numpy()[0, 0],
        tf.cast(tf.cast(layer.table.numpy()[5], tf.bfloat16), tf.float32).numpy())
