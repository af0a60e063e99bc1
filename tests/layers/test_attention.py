"""CachedMultiHeadAttention against a plain NumPy implementation of equation (1) and MultiHead."""
import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.layers.attention import CachedMultiHeadAttention
from transformer_tf.layers.masks import attention_mask, causal_mask


def softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def numpy_attention(q, k, v, mask):
    """Equation (1): softmax(Q K^T / sqrt(d_k)) V, masked positions get -inf. q: [T, d_k]."""
    scores = q @ k.T / np.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -np.inf)
    return softmax(scores) @ v


def numpy_multi_head(layer, query, value, mask):
    """MultiHead(Q,K,V) = Concat(head_1..head_h) W^O with head_i = Attention(QW_i^Q, KW_i^K, VW_i^V)."""
    wq, bq = [w.numpy() for w in layer._query_dense.weights]  # (d_model, h, d_k), (h, d_k)
    wk, bk = [w.numpy() for w in layer._key_dense.weights]
    wv, bv = [w.numpy() for w in layer._value_dense.weights]
    wo, bo = [w.numpy() for w in layer._output_dense.weights]  # (h, d_v, d_model), (d_model,)
    outputs = []
    for b in range(query.shape[0]):
        heads = []
        for i in range(wq.shape[1]):
            q = query[b] @ wq[:, i] + bq[i]
            k = value[b] @ wk[:, i] + bk[i]
            v = value[b] @ wv[:, i] + bv[i]
            heads.append(numpy_attention(q, k, v, mask[b]))
        concat = np.concatenate(heads, axis=-1)  # (T, h * d_v)
        outputs.append(concat @ wo.reshape(-1, wo.shape[-1]) + bo)
    return np.stack(outputs)


def make_layer(num_heads=3, key_dim=4, value_dim=5, d_model=6, key_length=7):
    layer = CachedMultiHeadAttention(num_heads=num_heads, key_dim=key_dim, value_dim=value_dim)
    layer.build((None, None, d_model), (None, None, d_model))
    # Non-zero biases so that a wrong bias path shows.
    for weight in layer.weights:
        weight.assign(np.random.default_rng(len(weight.path)).normal(size=weight.shape) * 0.5)
    return layer


def test_equation_one_on_a_hand_worked_case():
    # One query, two keys, d_k = 1: scores [2, 0] / 1 -> softmax [e^2, 1] / (e^2 + 1).
    q, k, v = np.array([[2.0]]), np.array([[1.0], [0.0]]), np.array([[10.0], [20.0]])
    w = np.exp(2.0) / (np.exp(2.0) + 1.0)
    expected = w * 10.0 + (1 - w) * 20.0
    np.testing.assert_allclose(numpy_attention(q, k, v, np.ones((1, 2), bool)), [[expected]])


@pytest.mark.parametrize("use_causal", [False, True])
def test_multi_head_matches_numpy_with_padding_and_causal_masks(use_causal):
    rng = np.random.default_rng(0)
    layer = make_layer()
    length = 5
    x = rng.normal(size=(2, length, 6)).astype(np.float32)
    key_valid = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)
    mask = attention_mask(tf.constant(key_valid), tf.constant(key_valid), causal=use_causal)
    mask = np.broadcast_to(mask.numpy(), (2, length, length))
    got = layer(x, x, attention_mask=mask).numpy()
    expected = numpy_multi_head(layer, x, x, mask)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    if use_causal:
        np.testing.assert_array_equal(mask[0], np.tril(np.ones((length, length), bool)))


def test_cross_attention_with_different_lengths_and_returned_scores():
    rng = np.random.default_rng(1)
    layer = make_layer()
    query = rng.normal(size=(2, 3, 6)).astype(np.float32)
    value = rng.normal(size=(2, 7, 6)).astype(np.float32)
    key_valid = np.arange(7)[None, :] < np.array([[7], [4]])
    mask = np.broadcast_to(key_valid[:, None, :], (2, 3, 7))
    out, scores = layer(query, value, attention_mask=mask, return_attention_scores=True)
    np.testing.assert_allclose(out.numpy(), numpy_multi_head(layer, query, value, mask),
                               rtol=1e-4, atol=1e-5)
    scores = scores.numpy()  # (batch, heads, query, key)
    np.testing.assert_allclose(scores.sum(-1), 1.0, rtol=1e-5)
    assert np.all(scores[1, :, :, 4:] == 0.0)


def test_self_attention_cache_reproduces_full_causal_pass():
    rng = np.random.default_rng(2)
    layer = make_layer()
    length, max_length = 4, 6
    x = rng.normal(size=(2, length, 6)).astype(np.float32)
    full = layer(x, x, attention_mask=causal_mask(length, length)[None]).numpy()
    cache = layer.empty_cache(2, max_length)
    for t in range(length):
        mask = (np.arange(max_length) <= t)[None, None, :]
        step_out, cache = layer(x[:, t:t + 1], x[:, t:t + 1], attention_mask=mask,
                                cache=cache, cache_update_index=t)
        np.testing.assert_allclose(step_out.numpy()[:, 0], full[:, t], rtol=1e-5, atol=1e-6)
    # The cache holds exactly the projected keys of the positions written so far.
    keys, _ = layer.project_key_value(x)
    # One row at a time vs all rows: other kernel shapes may round differently (seen: 1e-5
    # relative on an entry 1e-3 of the largest, AVX2 oneDNN); scale the tolerance with it.
    np.testing.assert_allclose(cache[0].numpy()[:, :, :length], keys.numpy(), rtol=1e-6,
                               atol=1e-6 * float(np.abs(keys.numpy()).max()))
    assert np.all(cache[0].numpy()[:, :, length:] == 0)


def test_static_cache_equals_recomputing_keys_and_values():
    rng = np.random.default_rng(3)
    layer = make_layer()
    query = rng.normal(size=(2, 1, 6)).astype(np.float32)
    memory = rng.normal(size=(2, 5, 6)).astype(np.float32)
    cache = layer.project_key_value(memory)
    with_cache, returned = layer(query, attention_mask=None, cache=cache)
    without = layer(query, memory)
    np.testing.assert_allclose(with_cache.numpy(), without.numpy(), rtol=1e-6)
    assert returned is cache or all(a is b for a, b in zip(returned, cache))


def test_get_config_round_trip():
    layer = CachedMultiHeadAttention(num_heads=2, key_dim=3, value_dim=4, dropout=0.2)
    again = CachedMultiHeadAttention.from_config(layer.get_config())
    assert again.get_config() == layer.get_config()
