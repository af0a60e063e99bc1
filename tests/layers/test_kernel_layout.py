"""Kernels laid out for inference (layers/kernel_layout.py): zero columns where a width is a
multiple of 512, and every inference path computes what the plain kernels compute.

The model tests lower the padded multiple to 8, so that a small model's every width
(d_model 24, d_ff 40, vocabulary 40, 4 heads of 6) gets padded; every test but the last
runs the layout as on an Eigen CPU, whatever this machine's matrix library."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import BOS_ID, ModelConfig
from transformer_tf.decoding.model_driver import search_with_lengths
from transformer_tf.layers import kernel_layout
from transformer_tf.layers.attention import CachedMultiHeadAttention
from transformer_tf.layers.feed_forward import PositionwiseFeedForward
from transformer_tf.models.transformer import Transformer

SMALL = ModelConfig(vocab_size=40, num_layers=2, d_model=24, d_ff=40, num_heads=4, key_dim=6,
                    value_dim=6, max_position=64, dropout=0.0)


@pytest.fixture(autouse=True)
def layout_as_on_an_eigen_cpu(monkeypatch):
    monkeypatch.setattr(kernel_layout, "layout_applies", lambda: True)


@pytest.fixture
def pad_multiples_of_8(monkeypatch):
    monkeypatch.setattr(kernel_layout, "SLOW_WIDTH_MULTIPLE", 8)


def test_only_widths_that_are_multiples_of_512_get_padded():
    widths = {256: 256, 384: 384, 512: 528, 768: 768, 1024: 1040, 1280: 1280, 1536: 1552,
              2048: 2064, 8000: 8000, 8192: 8208, 37000: 37000}
    assert {w: kernel_layout.laid_out_width(w) for w in widths} == widths


def test_padded_product_equals_the_plain_one_and_pads_with_zeros():
    rng = np.random.default_rng(0)
    x, w, b = rng.normal(size=(5, 16)), rng.normal(size=(16, 1024)), rng.normal(size=1024)
    kernel, bias = kernel_layout.pad_output_columns(tf.constant(w, tf.float32),
                                                    tf.constant(b, tf.float32))
    assert kernel.shape == (16, 1040) and bias.shape == (1040,)
    assert not np.any(kernel.numpy()[:, 1024:]) and not np.any(bias.numpy()[1024:])
    y = kernel_layout.dense(tf.constant(x, tf.float32), kernel, bias, 1024)
    np.testing.assert_allclose(y.numpy(), x @ w + b, rtol=1e-5, atol=1e-5)
    # A width that is not padded comes back as it was.
    same, no_bias = kernel_layout.pad_output_columns(tf.constant(w[:, :768], tf.float32))
    assert same.shape == (16, 768) and no_bias is None
    rows = kernel_layout.pad_input_rows(tf.constant(w[:, :8], tf.float32), 20)
    assert rows.shape == (20, 8) and not np.any(rows.numpy()[16:])


def test_feed_forward_with_laid_out_kernels_equals_its_dense_layers(pad_multiples_of_8):
    ffn = PositionwiseFeedForward(24, 40)
    ffn.build((None, None, 24))
    for weight in ffn.weights:  # non-zero biases, so that a lost bias shows
        weight.assign(np.random.default_rng(len(weight.path)).normal(size=weight.shape))
    kernels = ffn.inference_kernels()
    (inner, inner_bias), (outer, outer_bias) = kernels
    # 16 zero columns after the 40 of d_ff, 16 zero rows and columns for d_model 24.
    assert inner.shape == (24, 56) and inner_bias.shape == (56,)
    assert outer.shape == (56, 40) and outer_bias.shape == (40,)
    x = tf.random.normal([3, 5, 24], seed=1)
    np.testing.assert_allclose(ffn(x, kernels=kernels).numpy(), ffn(x).numpy(),
                               rtol=1e-5, atol=1e-5)


def test_attention_with_laid_out_kernels_equals_its_plain_projections(pad_multiples_of_8):
    layer = CachedMultiHeadAttention(num_heads=4, key_dim=6, value_dim=6)
    layer.build((None, None, 24), (None, None, 24))
    for weight in layer.weights:
        weight.assign(np.random.default_rng(len(weight.path)).normal(size=weight.shape) * 0.5)
    kernels = layer.inference_kernels()
    assert {name: k.shape for name, (k, _) in kernels.items()} == {
        "query": (24, 40), "key": (24, 40), "value": (24, 40), "output": (24, 40)}
    query, memory = tf.random.normal([2, 3, 24], seed=2), tf.random.normal([2, 7, 24], seed=3)
    np.testing.assert_allclose(layer(query, memory, kernels=kernels).numpy(),
                               layer(query, memory).numpy(), rtol=1e-5, atol=1e-5)
    for laid_out, plain in zip(layer.project_key_value(memory, kernels=kernels),
                               layer.project_key_value(memory)):
        np.testing.assert_allclose(laid_out.numpy(), plain.numpy(), rtol=1e-5, atol=1e-5)


def test_keras_quantized_weights_keep_their_own_path():
    ffn = PositionwiseFeedForward(24, 40)
    ffn.build((None, None, 24))
    x = tf.random.normal([2, 3, 24], seed=4)
    ffn.inner.quantize("int8")
    assert ffn.inference_kernels() is None
    assert ffn(x, kernels=ffn.inference_kernels()).shape == (2, 3, 24)


def model_and_batch():
    keras.utils.set_random_seed(5)
    model = Transformer(SMALL)
    rng = np.random.default_rng(6)
    source = rng.integers(3, SMALL.vocab_size, size=(3, 9))
    source[0, 6:] = 0  # padding
    target = np.concatenate([np.full((3, 1), BOS_ID), rng.integers(3, SMALL.vocab_size,
                                                                     size=(3, 7))], axis=1)
    return model, tf.constant(source, tf.int32), tf.constant(target, tf.int32)


def test_inference_logits_equal_the_training_path_with_every_width_padded(pad_multiples_of_8):
    model, source, target = model_and_batch()
    plain = model((source, target), training=True)  # dropout 0: the plain kernels only
    laid_out = model((source, target), training=False)
    np.testing.assert_allclose(laid_out.numpy(), plain.numpy(), rtol=1e-4, atol=1e-4)

    # Step by step with the caches, the kernels prepared once in the state's constants.
    state = model.init_cache(model.encode(source), None)
    constants = state.constants
    assert constants["output_kernel"].shape == (24, 56)
    assert constants["layers"][0]["feed_forward"][0][0].shape == (24, 56)
    steps = []
    for step in range(target.shape[1]):
        logits, state = model.decode_step(target[:, step], step, state)
        steps.append(logits)
    np.testing.assert_allclose(tf.stack(steps, axis=1).numpy(), plain.numpy(),
                               rtol=1e-4, atol=1e-4)


def test_xla_search_with_laid_out_kernels_finds_the_graph_search_output(pad_multiples_of_8):
    model, source, _ = model_and_batch()
    model((source, source), training=False)

    def search(source, cache_length):
        return search_with_lengths(model, source, beam_size=3, alpha=0.6, n_best=1,
                                   max_lengths=tf.fill([3], 12), cache_length=cache_length,
                                   max_decode_length=12)

    graph = tf.function(lambda s: search(s, None), autograph=False)(source)
    xla = tf.function(lambda s: search(s, 12), jit_compile=True, autograph=False)(source)
    np.testing.assert_array_equal(xla.ids.numpy(), graph.ids.numpy())
    np.testing.assert_allclose(xla.scores.numpy(), graph.scores.numpy(), rtol=1e-4, atol=1e-4)


def test_kept_inference_weights_are_a_snapshot_that_loading_weights_refreshes(
        tmp_path, pad_multiples_of_8):
    from transformer_tf.rundir.checkpoints import load_weights

    model, source, target = model_and_batch()
    model((source, target))
    weights_before = len(model.weights)
    kept = model.keep_inference_weights()
    assert model.keeps_inference_weights and len(kept) > 0
    assert len(model.weights) == weights_before  # not Keras weights, not checkpointed
    np.testing.assert_allclose(model((source, target), training=False).numpy(),
                               model((source, target), training=True).numpy(),
                               rtol=1e-4, atol=1e-4)

    # Other weights, written as a checkpoint and loaded: the kept copies follow them.
    other, _, _ = model_and_batch()
    other((source, target))
    for weight in other.weights:
        weight.assign(weight * 1.5 + 0.01)
    path = tf.train.Checkpoint(model=other).write(str(tmp_path / "ckpt"))
    load_weights(model, path)
    np.testing.assert_allclose(model((source, target), training=False).numpy(),
                               other((source, target), training=False).numpy(),
                               rtol=1e-4, atol=1e-4)
    state = model.init_cache(model.encode(source), None)
    logits, _ = model.decode_step(target[:, 0], 0, state)
    np.testing.assert_allclose(logits.numpy(), other((source, target[:, :1]))[:, 0].numpy(),
                               rtol=1e-4, atol=1e-4)


def test_projections_the_layout_leaves_alone_are_not_copied(monkeypatch):
    # Multiples of 20: d_ff 40 and the vocabulary of 40 get padded, d_model 24 (every
    # attention projection) does not, so attention reads its own kernels.
    monkeypatch.setattr(kernel_layout, "SLOW_WIDTH_MULTIPLE", 20)
    model, source, target = model_and_batch()
    model((source, target))
    assert all(k is None for k in model.decoder_layers[0].self_attention.inference_kernels()
               .values())
    kept = model.keep_inference_weights()
    d, ff, vocab, pad = SMALL.d_model, SMALL.d_ff, SMALL.vocab_size, kernel_layout.PADDING
    ffn_elements = d * (ff + pad) + (ff + pad) + (ff + pad) * d + d  # both kernels, biases
    layers = 2 * SMALL.num_layers
    assert sum(v.shape.num_elements() for v in kept) == layers * ffn_elements + d * (vocab + pad)
    np.testing.assert_allclose(model((source, target), training=False).numpy(),
                               model((source, target), training=True).numpy(),
                               rtol=1e-4, atol=1e-4)
    state = model.init_cache(model.encode(source), None)
    steps = []
    for step in range(target.shape[1]):
        logits, state = model.decode_step(target[:, step], step, state)
        steps.append(logits)
    np.testing.assert_allclose(tf.stack(steps, axis=1).numpy(),
                               model((source, target), training=True).numpy(),
                               rtol=1e-4, atol=1e-4)


AVX2_FLAGS = {"avx", "avx2", "fma"}
AVX512_FLAGS = AVX2_FLAGS | {"avx512f"}


@pytest.mark.parametrize("library, gpus, flags, variable, applies", [
    ("eigen", [], AVX2_FLAGS, None, True),
    ("onednn", [], AVX2_FLAGS, None, False),
    ("eigen", ["GPU:0"], AVX2_FLAGS, None, False),
    ("eigen", [], AVX512_FLAGS, None, False),  # not measured there: the plain kernels
    ("eigen", [], AVX512_FLAGS, "1", True),  # the benchmark's switch, both ways
    ("eigen", [], AVX2_FLAGS, "0", False),
])
def test_the_layout_applies_only_where_it_was_measured_to_pay(monkeypatch, library, gpus,
                                                               flags, variable, applies):
    monkeypatch.undo()  # the real decision, with its inputs faked
    monkeypatch.setattr(kernel_layout, "matmul_library", lambda: library)
    monkeypatch.setattr(kernel_layout, "read_cpu_flags", lambda: flags)
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: gpus)
    if variable is None:
        monkeypatch.delenv(kernel_layout.PADDING_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(kernel_layout.PADDING_VARIABLE, variable)
    kernel_layout.layout_applies.cache_clear()
    try:
        assert kernel_layout.layout_applies() is applies
        assert kernel_layout.laid_out_width(1024) == (1040 if applies else 1024)
        kernel = kernel_layout.pad_output_columns(tf.zeros([4, 512]))[0]
        assert kernel.shape == (4, 528 if applies else 512)
    finally:
        kernel_layout.layout_applies.cache_clear()
