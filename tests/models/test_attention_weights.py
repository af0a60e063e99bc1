"""`Transformer.attention_weights` (the contract's inspection method) against a plain NumPy
attention computed from each layer's own projection kernels.

The NumPy side builds its masks from the ids (PAD_ID keys hidden, later decoder positions
hidden), projects the inputs each attention sub-layer receives with that sub-layer's
query/key kernels and biases, and applies equation (1)'s softmax(Q K^T / sqrt(d_k)). The
sub-layer inputs come from running the model's own layers one at a time.
"""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID, ModelConfig
from transformer_tf.models.contract import ATTENTION_KINDS
from transformer_tf.models.transformer import Transformer

MODEL = ModelConfig(vocab_size=40, num_layers=2, num_decoder_layers=3, d_model=16, d_ff=32,
                    num_heads=2, max_position=32, dropout=0.3)
# Source rows: 6 real tokens; 3 real + PAD. Target rows: 3 real + PAD; 5 real.
SOURCE = np.array([[7, 8, 9, 10, 11, EOS_ID], [12, 13, EOS_ID, PAD_ID, PAD_ID, PAD_ID]])
TARGET = np.array([[BOS_ID, 14, 15, PAD_ID, PAD_ID], [BOS_ID, 16, 17, 18, 19]])


def build(**overrides) -> Transformer:
    model = Transformer(MODEL.replace(**overrides))
    model.build()
    # Non-zero biases, so that a wrong bias path shows.
    rng = np.random.default_rng(3)
    for weight in model.weights:
        if "bias" in weight.path:
            weight.assign(rng.normal(size=weight.shape).astype(np.float32) * 0.3)
    return model


@pytest.fixture(scope="module")
def model():
    return build()


@pytest.fixture(scope="module")
def weights(model):
    return {kind: [w.numpy() for w in layers] for kind, layers in
            model.attention_weights(tf.constant(SOURCE), tf.constant(TARGET)).items()}


def numpy_probabilities(attention, queries, keys, allowed):
    """softmax(Q K^T / sqrt(d_k)) per head with `allowed` [B, Tq, Tk]; -> [B, h, Tq, Tk]."""
    wq, bq = (w.numpy() for w in attention._query_dense.weights)  # (d, h, d_k), (h, d_k)
    wk, bk = (w.numpy() for w in attention._key_dense.weights)
    q = np.einsum("btd,dhk->bhtk", queries, wq) + bq[None, :, None, :]
    k = np.einsum("bsd,dhk->bhsk", keys, wk) + bk[None, :, None, :]
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(wq.shape[-1])
    scores = np.where(allowed[:, None], scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    return e / e.sum(axis=-1, keepdims=True)


def expected_weights(model):
    """Every layer's attention probabilities, layer inputs from the model's own layers."""
    source_real, target_real = SOURCE != PAD_ID, TARGET != PAD_ID
    t = TARGET.shape[1]
    encoder_allowed = np.broadcast_to(source_real[:, None, :], (2, SOURCE.shape[1], SOURCE.shape[1]))
    decoder_allowed = target_real[:, None, :] & np.tril(np.ones((t, t), bool))[None]
    cross_allowed = np.broadcast_to(source_real[:, None, :], (2, t, SOURCE.shape[1]))
    expected = {kind: [] for kind in ATTENTION_KINDS}

    x = model.source_embedding(SOURCE)
    x = x + model.source_positions(x)
    for layer in model.encoder_layers:
        h = layer.self_attention_residual.sublayer_input(x).numpy()
        expected["encoder"].append(numpy_probabilities(layer.self_attention, h, h, encoder_allowed))
        x = layer(x, attention_mask=tf.constant(encoder_allowed))
    encoder_output, _ = model.encode(tf.constant(SOURCE))

    x = model.target_embedding(TARGET)
    x = x + model.target_positions(x)
    for layer in model.decoder_layers:
        h = layer.self_attention_residual.sublayer_input(x)
        expected["decoder"].append(
            numpy_probabilities(layer.self_attention, h.numpy(), h.numpy(), decoder_allowed))
        y = layer.self_attention(h, h, attention_mask=tf.constant(decoder_allowed))
        h2 = layer.cross_attention_residual.sublayer_input(layer.self_attention_residual(x, y))
        expected["cross"].append(numpy_probabilities(
            layer.cross_attention, h2.numpy(), encoder_output.numpy(), cross_allowed))
        x = layer(x, encoder_output, tf.constant(decoder_allowed), tf.constant(cross_allowed))
    return expected


def test_shapes_per_kind_and_layer(weights):
    batch, heads, s, t = 2, MODEL.num_heads, SOURCE.shape[1], TARGET.shape[1]
    expected = {"encoder": (MODEL.num_layers, (batch, heads, s, s)),
                "decoder": (3, (batch, heads, t, t)), "cross": (3, (batch, heads, t, s))}
    assert set(weights) == set(ATTENTION_KINDS)
    for kind, (layers, shape) in expected.items():
        assert len(weights[kind]) == layers, kind
        assert all(w.shape == shape and w.dtype == np.float32 for w in weights[kind]), kind


def test_real_rows_sum_to_one_and_hidden_keys_get_zero(weights):
    source_real, target_real = SOURCE != PAD_ID, TARGET != PAD_ID
    t = TARGET.shape[1]
    queries = {"encoder": source_real, "decoder": target_real, "cross": target_real}
    keys = {"encoder": source_real, "decoder": target_real, "cross": source_real}
    for kind, layers in weights.items():
        for w in layers:
            allowed = np.broadcast_to(keys[kind][:, None, None, :], w.shape)
            if kind == "decoder":  # causal: position i sees keys 0..i only
                allowed = allowed & np.tril(np.ones((t, t), bool))
            assert (w[~allowed] == 0).all(), kind  # exactly zero, not just small
            rows = np.where(allowed, w, 0).sum(axis=-1)  # [B, h, Tq]
            real_rows = np.broadcast_to(queries[kind][:, None, :], rows.shape)
            np.testing.assert_allclose(rows[real_rows], 1.0, atol=1e-5, err_msg=kind)
    # The decoder's first position can only look at itself (BOS).
    for w in weights["decoder"]:
        np.testing.assert_allclose(w[:, :, 0, 0], 1.0, atol=1e-6)


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_equal_numpy_attention_from_the_layers_projections(norm_position, model):
    net = model if norm_position == "post" else build(norm_position="pre")
    got = net.attention_weights(SOURCE, TARGET)
    expected = expected_weights(net)
    for kind in ATTENTION_KINDS:
        for index, (g, e) in enumerate(zip(got[kind], expected[kind])):
            g = g.numpy()
            real = np.broadcast_to(((TARGET if kind != "encoder" else SOURCE) != PAD_ID)
                                   [:, None, :, None], g.shape)
            np.testing.assert_allclose(g[real], e[real], rtol=1e-4, atol=1e-6,
                                       err_msg=f"{kind} layer {index}")


def test_weights_do_not_depend_on_dropout_or_padding_of_other_rows(model):
    """Inspection runs without dropout (config dropout 0.3) and a row's weights are those
    of the sentence alone."""
    alone = model.attention_weights(SOURCE[1:, :3], TARGET[1:])
    batched = model.attention_weights(SOURCE, TARGET)
    np.testing.assert_allclose(alone["cross"][-1].numpy()[0],
                               batched["cross"][-1].numpy()[1][:, :, :3], atol=1e-6)
    again = model.attention_weights(SOURCE, TARGET)
    np.testing.assert_array_equal(again["encoder"][0].numpy(), batched["encoder"][0].numpy())


def test_bad_inputs_are_refused(model):
    with pytest.raises(ValueError, match="same batch size"):
        model.attention_weights(SOURCE, TARGET[:1])


def test_restricted_attention_gives_zero_outside_the_window():
    window = 1
    got = build(attention_window=window).attention_weights(SOURCE, TARGET)
    for kind in ("encoder", "decoder"):
        ids = SOURCE if kind == "encoder" else TARGET
        length = ids.shape[1]
        distance = np.abs(np.arange(length)[:, None] - np.arange(length)[None, :])
        for w in got[kind]:
            w = w.numpy()
            real = np.broadcast_to((ids != PAD_ID)[:, None, :], w.shape[:3])  # real queries
            outside = real[..., None] & (distance > window)
            assert (w[outside] == 0).all(), kind
            np.testing.assert_allclose(w.sum(-1)[real], 1.0, atol=1e-5)
