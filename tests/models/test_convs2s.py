"""ConvS2S (models/convs2s.py and its layers) against the equations of Gehring et al. 2017
worked independently: by hand, in NumPy, and by comparing two paths of the model."""
from __future__ import annotations

import math
import tempfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import ConfigError, ConvS2SConfig, DecodingConfig
from transformer_tf.presets import get_preset
from transformer_tf.decoding.model_driver import search_model
from transformer_tf.layers.glu_block import ConvGLUBlock, gated_linear_unit, scaled_residual
from transformer_tf.layers.gradient_scale import scale_gradient
from transformer_tf.layers.weight_norm import WeightNormConv1D
from transformer_tf.models.convs2s import ConvS2S

# Different widths between blocks (residual projections), k = 3 and k = 1, one decoder
# block without attention.
CONFIG = ConvS2SConfig(vocab_size=40, embedding_dim=8, encoder_layers=((12, 3), (12, 3), (16, 1)),
                       decoder_layers=((12, 3), (16, 3), (16, 1)),
                       decoder_attention=(True, False, True), decoder_output_dim=10,
                       dropout=0.1, max_position=32)


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(3)
    m = ConvS2S(CONFIG)
    m.build()
    return m


def _ids(rng, lengths, vocab=40, eos=3):
    """PAD-padded rows of random tokens (ids >= 4) ending in `eos`."""
    width = max(lengths)
    rows = np.zeros((len(lengths), width), np.int32)
    for i, n in enumerate(lengths):
        rows[i, :n - 1] = rng.integers(4, vocab, n - 1)
        rows[i, n - 1] = eos
    return tf.constant(rows)


def test_glu_and_scaled_residual_by_hand():
    x = tf.constant([[1.0, -2.0, 0.0, math.log(3.0)]])  # A = [1, -2], B = [0, ln 3]
    np.testing.assert_allclose(gated_linear_unit(x).numpy(), [[0.5, -2.0 * 0.75]], rtol=1e-6)
    out = scaled_residual(tf.constant([3.0]), tf.constant([1.0]))
    np.testing.assert_allclose(out.numpy(), [4.0 * math.sqrt(0.5)], rtol=1e-6)


def test_weight_norm_kernel_and_its_initialisation():
    layer = WeightNormConv1D(5, 3, stddev=0.2)
    layer.build((None, None, 4))
    v = layer.direction.numpy()
    np.testing.assert_allclose(layer.kernel().numpy(), v, rtol=1e-5)  # g = ||v|| at start
    layer.magnitude.assign(np.arange(1.0, 6.0))
    norms = np.sqrt((v ** 2).sum(axis=(0, 1)))
    np.testing.assert_allclose(layer.kernel().numpy(), v / norms * np.arange(1.0, 6.0), rtol=1e-5)
    # A convolution done by hand: centred padding, k = 3.
    x = np.random.default_rng(0).normal(size=(2, 6, 4)).astype(np.float32)
    kernel = layer.kernel().numpy()
    padded = np.pad(x, [(0, 0), (1, 1), (0, 0)])
    expected = np.stack([np.einsum("bkc,kcf->bf", padded[:, i:i + 3], kernel) for i in range(6)], 1)
    np.testing.assert_allclose(layer(x).numpy(), expected, atol=1e-5)


@pytest.mark.parametrize("feeds_glu,kernel,fan_in", [(True, 3, 512), (False, 1, 1024)])
def test_initialisation_statistics(feeds_glu, kernel, fan_in):
    # ConvS2S: std sqrt(4p / n_in) for a layer feeding a GLU, sqrt(p / n_in) otherwise.
    dropout = 0.2
    if feeds_glu:
        block = ConvGLUBlock(512, kernel, dropout=dropout)
        block.build((None, None, fan_in))
        weights = block.convolution.kernel().numpy()
        expected = math.sqrt(4 * (1 - dropout) / (kernel * fan_in))
    else:
        block = ConvGLUBlock(768, kernel, dropout=dropout)  # width change: a projection
        block.build((None, None, fan_in))
        weights = block.projection.kernel().numpy()
        expected = math.sqrt(1.0 / fan_in)
    assert abs(weights.std() / expected - 1) < 0.03
    model = ConvS2S(CONFIG)
    model.build()
    table = model.source_embedding.embeddings.numpy()
    assert abs(table.std() / 0.1 - 1) < 0.1


def test_causal_decoder_never_sees_later_tokens(model):
    rng = np.random.default_rng(1)
    source = _ids(rng, [7, 5])
    target = _ids(rng, [9, 9], eos=2).numpy()
    base = model((source, tf.constant(target))).numpy()
    for t in (0, 4, 8):
        changed = target.copy()
        changed[:, t] = (changed[:, t] + 7) % 36 + 4
        logits = model((source, tf.constant(changed))).numpy()
        np.testing.assert_allclose(logits[:, :t], base[:, :t], atol=1e-6)
        assert np.abs(logits[:, t:] - base[:, t:]).max() > 1e-4  # and it does see them after


def test_padding_changes_nothing(model):
    rng = np.random.default_rng(2)
    source = _ids(rng, [4, 9]).numpy()
    target = _ids(rng, [6, 6]).numpy()
    base = model((tf.constant(source), tf.constant(target))).numpy()
    # Garbage instead of padding is not a test of masking (pads are id 0 by contract);
    # what must hold: the short sentence alone (no padding) gives the same logits.
    alone = model((tf.constant(source[:1, :4]), tf.constant(target[:1]))).numpy()
    np.testing.assert_allclose(alone, base[:1], atol=1e-5)
    # More padding on the right changes nothing either.
    wider = np.pad(source, [(0, 0), (0, 5)])
    np.testing.assert_allclose(model((tf.constant(wider), tf.constant(target))).numpy(), base,
                               atol=1e-5)


def test_attention_weights_match_numpy(model):
    rng = np.random.default_rng(4)
    source = _ids(rng, [6, 3])
    target = _ids(rng, [5, 5], eos=2)
    weights = model.attention_weights(source, target)["cross"]
    assert [w.shape for w in weights] == [(2, 1, 5, 6)] * 2  # blocks 0 and 2 attend

    # The equations, in NumPy, from the model's own sublayers.
    encoded = model.encode(source)
    keys, values = encoded["keys"].numpy(), encoded["values"].numpy()
    valid = source.numpy() != 0
    g = model._target_embedding(target).numpy()
    x = model.decoder_input(g).numpy()
    expected = []
    for block, attention in model.decoder_blocks:
        residual = np.asarray(block.residual(x))
        h = block.gated_conv(x).numpy()
        if attention is not None:
            d = attention.query_projection(h).numpy() + g
            scores = np.einsum("btf,bsf->bts", d, keys)
            scores = np.where(valid[:, None, :], scores, -np.inf)
            a = np.exp(scores - scores.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            expected.append(a)
            m = valid.sum(1)[:, None, None]
            c = np.einsum("bts,bsf->btf", a, values) * m * np.sqrt(1.0 / m)
            h = (h + attention.context_projection(c).numpy()) * math.sqrt(0.5)
        x = (h + residual) * math.sqrt(0.5)
    for got, want in zip(weights, expected):
        np.testing.assert_allclose(got.numpy()[:, 0], want, atol=1e-5)
        assert np.all(got.numpy()[1, 0, :, 3:] == 0)  # padded source positions: no weight
    logits = model._logits(x).numpy()
    np.testing.assert_allclose(model((source, target)).numpy(), logits, atol=1e-4)


def test_incremental_decoding_reproduces_the_full_pass(model):
    rng = np.random.default_rng(5)
    source = _ids(rng, [3, 8, 5])
    target = _ids(rng, [7, 7, 7], eos=2)
    full = model((source, target)).numpy()
    state = model.init_cache(model.encode(source), 7)
    for t in range(7):
        logits, state = model.decode_step(target[:, t], t, state)
        np.testing.assert_allclose(logits.numpy(), full[:, t], atol=1e-5)


def test_greedy_search_equals_brute_force_argmax(model):
    # Greedy through the search glue vs re-running the full model on the growing prefix.
    source = _ids(np.random.default_rng(6), [5, 7])
    result = search_model(model, source, DecodingConfig(beam_size=1, max_extra_length=3))
    for row in range(2):
        prefix = [2]
        for _ in range(int(result.lengths[row, 0])):
            logits = model((source[row:row + 1], tf.constant([prefix]))).numpy()[0, -1]
            logits[[0, 2]] = -np.inf  # PAD and BOS are never produced
            prefix.append(int(logits.argmax()))
        produced = result.ids.numpy()[row, 0, :result.lengths.numpy()[row, 0]]
        assert list(produced) == prefix[1:]


def test_beam_search_traced_with_static_shapes_equals_the_dynamic_one(model):
    # A fixed-size state (no growing cache, no compaction) keeps its static shapes through
    # the beams' reorder, which tf.while_loop checks when the batch's shape is known.
    decoding = DecodingConfig(beam_size=3, max_extra_length=3)
    for lengths in ([5], [5, 7]):  # one sentence failed before: the reorder lost its rows
        source = _ids(np.random.default_rng(10), lengths)
        static = tf.function(lambda s: search_model(model, s, decoding),
                             autograph=False)(source)
        dynamic = tf.function(lambda s: search_model(model, s, decoding), input_signature=[
            tf.TensorSpec([None, None], tf.int32)], autograph=False)(source)
        np.testing.assert_array_equal(static.ids.numpy(), dynamic.ids.numpy())
        np.testing.assert_allclose(static.scores.numpy(), dynamic.scores.numpy(), atol=1e-6)


def test_encoder_gradient_scaling():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(scale_gradient(x, 0.25) * 3.0)
    np.testing.assert_allclose(y.numpy(), 9.0)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), [0.75, 0.75])


def test_weight_norm_variables_round_trip_through_a_checkpoint(model):
    source = _ids(np.random.default_rng(7), [5])
    target = _ids(np.random.default_rng(8), [4], eos=2)
    expected = model((source, target)).numpy()
    with tempfile.TemporaryDirectory() as directory:
        path = tf.train.Checkpoint(model=model).save(f"{directory}/ckpt")
        names = [name for name, _ in tf.train.list_variables(path)]
        assert any("magnitude" in n for n in names) and any("direction" in n for n in names)
        keras.utils.set_random_seed(11)
        other = ConvS2S(CONFIG)
        other.build()
        assert np.abs(other((source, target)).numpy() - expected).max() > 1e-3
        tf.train.Checkpoint(model=other).restore(path).assert_existing_objects_matched()
    np.testing.assert_allclose(other((source, target)).numpy(), expected, atol=1e-6)


def test_config_round_trip_and_errors():
    config = get_preset("convs2s_wmt_en_fr").model
    assert ConvS2SConfig.from_json(config.to_json()) == config
    assert [w for w, _ in config.encoder_layers] == [512] * 6 + [768] * 4 + [1024] * 3 + [2048, 4096]
    with pytest.raises(ConfigError, match="decoder_attention"):
        ConvS2SConfig(decoder_layers=((8, 3),) * 2, decoder_attention=(True,))
    with pytest.raises(ConfigError, match="encoder_layers"):
        ConvS2SConfig(encoder_layers=((8, 0),))


def test_kept_decoder_kernels_are_a_snapshot_that_loading_weights_refreshes(tmp_path):
    from transformer_tf.rundir.checkpoints import load_weights

    def fresh(seed):
        keras.utils.set_random_seed(seed)
        m = ConvS2S(CONFIG)
        m.build()
        return m

    def incremental(m, source, target):  # [batch, T, V] step by step through the state
        state = m.init_cache(m.encode(source), target.shape[1])
        steps = []
        for t in range(target.shape[1]):
            logits, state = m.decode_step(target[:, t], t, state)
            steps.append(logits)
        return tf.stack(steps, axis=1).numpy()

    rng = np.random.default_rng(9)
    source, target = _ids(rng, [4, 6]), _ids(rng, [5, 5], eos=2)
    kept_model, other = fresh(12), fresh(13)
    weights_before = len(kept_model.weights)
    kept = kept_model.keep_inference_weights()
    assert kept_model.keeps_inference_weights and len(kept_model.weights) == weights_before
    # One kernel (and no more) per weight-normalised decoder layer: input, output,
    # projection, and each block's and attention's own.
    assert len(kept) == len(tf.nest.flatten(kept_model.prepare_inference_weights("decoder")))
    before = kept_model((source, target)).numpy()
    np.testing.assert_allclose(incremental(kept_model, source, target), before, atol=1e-5)
    # A snapshot: the search reads the kept kernels, not the variables behind them.
    for weight in kept_model.output_projection.weights:
        weight.assign(weight * 1.5)
    np.testing.assert_allclose(incremental(kept_model, source, target), before, atol=1e-5)

    path = tf.train.Checkpoint(model=other).write(str(tmp_path / "ckpt"))
    load_weights(kept_model, path)
    np.testing.assert_allclose(incremental(kept_model, source, target),
                               other((source, target)).numpy(), atol=1e-5)


def test_mixed_bfloat16_computes_what_float32_does_and_trains():
    """Under mixed_bfloat16 (what --precision auto picks on a CPU with native bfloat16,
    e.g. the Table 2 study's) the same weights give float32's logits within bfloat16's
    rounding, the variables stay float32, and Adam steps on one batch drive its loss down."""
    config = CONFIG.replace(dropout=0.0)
    keras.utils.set_random_seed(5)
    exact = ConvS2S(config)
    exact.build()
    mixed = ConvS2S(config, dtype="mixed_bfloat16")
    mixed.build()
    mixed.set_weights(exact.get_weights())
    rng = np.random.default_rng(0)
    source, target = _ids(rng, [9, 6, 9, 4]), _ids(rng, [7, 7, 5, 3])
    want = exact((source, target), training=False).numpy()
    got = tf.cast(mixed((source, target), training=False), tf.float32).numpy()
    assert 0 < np.abs(got - want).max() <= 0.02 * np.abs(want).max()  # rounded, not off
    assert {v.dtype for v in mixed.trainable_variables} == {"float32"}

    optimizer = keras.optimizers.Adam(1e-2)
    losses = []
    for _ in range(30):
        with tf.GradientTape() as tape:
            logits = tf.cast(mixed((source, target), training=True), tf.float32)
            loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
                target, logits, from_logits=True))
        gradients = tape.gradient(loss, mixed.trainable_variables)
        optimizer.apply_gradients(zip(gradients, mixed.trainable_variables))
        losses.append(float(loss))
    assert np.isfinite(losses).all() and losses[-1] < 0.5 * losses[0]
