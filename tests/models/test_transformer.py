"""The Transformer model: sizes, masks, incremental decoding, serialisation, bad input."""
import io
import contextlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import BOS_ID, PAD_ID, ModelConfig
from transformer_tf.presets import get_preset
from transformer_tf.layers.decoder_layer import DecoderLayer
from transformer_tf.layers.encoder_layer import EncoderLayer
from transformer_tf.layers.feed_forward import PositionwiseFeedForward
from transformer_tf.layers.residual import ResidualConnection
from transformer_tf.layers.shared_embedding import SharedEmbedding
from transformer_tf.models.transformer import Transformer, cursor_positions, tokens_in_source

SMALL = ModelConfig(vocab_size=40, num_layers=3, d_model=24, d_ff=40, num_heads=4, max_position=64)
VARIANTS = {
    "paper": {},
    "pre_norm_learned_unshared": dict(norm_position="pre", position_encoding="learned",
                                      embedding_sharing="none", target_vocab_size=33),
    "target_sharing_kv_dims": dict(embedding_sharing="target", target_vocab_size=35,
                                   key_dim=5, value_dim=7, num_decoder_layers=2),
    "source_cursor": dict(source_cursor=True),
}


def independent_parameter_count(V, N, d, d_ff, h, d_k, d_v):
    """Count from the paper's formulas: shared embedding, N encoder and N decoder layers."""
    projections = d * h * d_k * 2 + d * h * d_v  # W^Q, W^K, W^V of all heads
    projection_biases = h * d_k * 2 + h * d_v
    attention = projections + projection_biases + h * d_v * d + d  # + W^O and its bias
    ffn = d * d_ff + d_ff + d_ff * d + d  # W1, b1, W2, b2
    layer_norm = 2 * d  # gain and bias
    encoder = N * (attention + ffn + 2 * layer_norm)
    decoder = N * (2 * attention + ffn + 3 * layer_norm)
    return V * d + encoder + decoder  # one embedding matrix, shared three ways


@pytest.mark.parametrize("name, paper_millions", [("base", 65), ("big", 213)])
def test_parameter_counts_match_the_paper(name, paper_millions):
    config = get_preset(name).model.replace(vocab_size=37000)
    model = Transformer(config)
    model.build()
    expected = independent_parameter_count(37000, 6, config.d_model, config.d_ff,
                                           config.num_heads, 64, 64)
    assert model.count_params() == expected
    assert abs(expected / 1e6 - paper_millions) / paper_millions < 0.04
    summary = io.StringIO()
    with contextlib.redirect_stdout(summary):
        model.summary()
    assert f"Total params: {expected:,}" in summary.getvalue()


def random_batch(rng, config, source_lengths, target_lengths):
    batch = len(source_lengths)
    source = np.zeros((batch, max(source_lengths)), np.int32)
    target = np.zeros((batch, max(target_lengths)), np.int32)
    target_vocab = config.resolved_target_vocab_size
    for b, (s, t) in enumerate(zip(source_lengths, target_lengths)):
        source[b, :s] = rng.integers(4, config.vocab_size, s)
        target[b, :t] = rng.integers(4, target_vocab, t)
        target[b, 0] = BOS_ID
    return source, target


def test_extra_source_padding_changes_no_logit():
    """Padding is PAD_ID; more of it (a longer padded batch) must not move any real logit."""
    rng = np.random.default_rng(0)
    model = Transformer(SMALL)
    source, target = random_batch(rng, SMALL, [6, 3], [5, 4])
    logits = model((source, target)).numpy()
    padded_source = np.pad(source, [(0, 0), (0, 7)], constant_values=PAD_ID)
    padded_target = np.pad(target, [(0, 0), (0, 3)], constant_values=PAD_ID)
    padded_logits = model((padded_source, padded_target)).numpy()
    np.testing.assert_allclose(padded_logits[0, :5], logits[0, :5], atol=1e-5)
    np.testing.assert_allclose(padded_logits[1, :4], logits[1, :4], atol=1e-5)
    # The second sentence alone equals the second sentence batched with a longer one.
    alone = model((source[1:, :3], target[1:, :4])).numpy()
    np.testing.assert_allclose(alone[0], logits[1, :4], atol=1e-5)


def test_target_ids_at_padded_positions_change_no_real_logit():
    rng = np.random.default_rng(1)
    model = Transformer(SMALL)
    source, target = random_batch(rng, SMALL, [6, 3], [5, 3])
    logits = model((source, target)).numpy()
    changed = target.copy()
    changed[1, 3:] = [7, 9]  # positions after the second sentence's end
    np.testing.assert_allclose(model((source, changed)).numpy()[1, :3], logits[1, :3], atol=1e-5)


def test_decoder_is_causal():
    rng = np.random.default_rng(2)
    model = Transformer(SMALL)
    source, target = random_batch(rng, SMALL, [6, 6], [7, 7])
    logits = model((source, target)).numpy()
    for t in (1, 3, 6):
        changed = target.copy()
        changed[:, t] = (changed[:, t] + 5 - 4) % (SMALL.vocab_size - 4) + 4
        new = model((source, changed)).numpy()
        np.testing.assert_allclose(new[:, :t], logits[:, :t], atol=1e-5)
        assert np.abs(new[:, t:] - logits[:, t:]).max() > 1e-3  # the test can see a change


@pytest.mark.parametrize("cache_length", [10, None])  # None: the growing cache
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_cached_decoding_reproduces_teacher_forced_logits(variant, cache_length):
    rng = np.random.default_rng(3)
    config = SMALL.replace(**VARIANTS[variant])
    model = Transformer(config)
    source_lengths, target_lengths = [9, 4, 6], [7, 5, 7]
    source, target = random_batch(rng, config, source_lengths, target_lengths)
    full = model((source, target)).numpy()

    def decode_all(source, target):  # eagerly: tracing 7 unrolled steps costs ~10 s
        state = model.init_cache(model.encode(source), max_length=cache_length)
        assert state.per_beam_grows == (cache_length is None)
        steps = []
        for t in range(target.shape[1]):
            logits, state = model.decode_step(target[:, t], tf.constant(t), state)
            steps.append(logits)
        return tf.stack(steps, axis=1)

    cached = decode_all(tf.constant(source), tf.constant(target)).numpy()
    for b, length in enumerate(target_lengths):
        np.testing.assert_allclose(cached[b, :length], full[b, :length], atol=1e-5, rtol=0)


@pytest.mark.parametrize("beam_size,variant", [(1, "paper"), (3, "paper"),
                                                (3, "source_cursor")])
def test_growing_and_fixed_caches_find_the_same_hypotheses(beam_size, variant):
    """The searches with a growing cache (search_model's) and with a fixed one of the
    longest output's size (as under XLA) give the same ids and scores."""
    from transformer_tf.config import DecodingConfig
    from transformer_tf.decoding.model_driver import search_model, search_with_lengths

    rng = np.random.default_rng(8)
    model = Transformer(SMALL.replace(**VARIANTS[variant]))
    model.build()
    source, _ = random_batch(rng, SMALL, [9, 3, 6, 1], [2, 2, 2, 2])
    decoding = DecodingConfig(beam_size=beam_size, alpha=0.6, max_extra_length=5)
    grown = search_model(model, tf.constant(source), decoding, n_best=beam_size)
    lengths = np.minimum((source != 0).sum(1) + 5, model.max_target_length)
    fixed = search_with_lengths(model, tf.constant(source), beam_size=beam_size, alpha=0.6,
                                n_best=beam_size, max_lengths=lengths,
                                cache_length=int(lengths.max()))
    np.testing.assert_array_equal(grown.ids, fixed.ids)
    np.testing.assert_allclose(grown.scores, fixed.scores, rtol=1e-5, atol=1e-6)
    assert int(grown.num_steps) == int(fixed.num_steps)


def test_source_cursor_counts_target_tokens_found_in_the_source():
    # source: 7 8 9 EOS PAD; the target copies 7, 8, 9 around tokens of its own (20, 21)
    source = tf.constant([[7, 8, 9, 3, PAD_ID]])
    target = tf.constant([[BOS_ID, 20, 7, 21, 8, 9, 22, PAD_ID]])
    found = tokens_in_source(target, source).numpy()
    np.testing.assert_array_equal(found, [[0, 0, 1, 0, 1, 1, 0, 0]])  # PAD matches nothing
    valid = tf.constant([[True, True, True, True, False]])
    cursor = cursor_positions(tf.cumsum(found, axis=1), valid).numpy()
    np.testing.assert_array_equal(cursor, [[0, 0, 1, 1, 2, 3, 3, 3]])
    # past the last real token (EOS, position 3) the cursor stays there
    np.testing.assert_array_equal(cursor_positions(tf.constant([[5]]), valid), [[3]])


def test_source_cursor_adds_the_encoder_output_under_the_cursor():
    """decoder_inputs = embedding + position + W_c encoder_output[cursor], the cursor
    counted here by a plain loop over the tokens."""
    rng = np.random.default_rng(9)
    config = SMALL.replace(source_cursor=True)
    model = Transformer(config)
    source, target = random_batch(rng, config, [6, 3], [8, 6])
    target[0, 2], target[0, 5], target[1, 3] = source[0, 1], source[0, 4], source[1, 0]
    encoded = model.encode(tf.constant(source))
    got = model.decoder_inputs(tf.constant(target), encoded).numpy()
    embedded = model.target_embedding(target)
    plain = (embedded + model.target_positions(embedded)).numpy()
    encoder_output = encoded[0].numpy()
    kernel = model.cursor_projection.kernel.numpy()
    for b in range(2):
        last = int((source[b] != PAD_ID).sum()) - 1
        count = 0
        for t in range(target.shape[1]):
            if target[b, t] != PAD_ID and target[b, t] in source[b][source[b] != PAD_ID]:
                count += 1
            expected = plain[b, t] + encoder_output[b, min(count, last)] @ kernel
            np.testing.assert_allclose(got[b, t], expected, atol=1e-5)
    assert count > 0 and np.abs(kernel).max() > 0


def test_source_cursor_needs_one_vocabulary():
    with pytest.raises(ValueError, match="source_cursor"):
        SMALL.replace(source_cursor=True, embedding_sharing="none", target_vocab_size=33)


def test_dropout_is_active_only_in_training():
    rng = np.random.default_rng(4)
    model = Transformer(SMALL.replace(dropout=0.3, attention_dropout=0.2))
    source, target = random_batch(rng, SMALL, [5], [5])
    a, b = model((source, target)).numpy(), model((source, target)).numpy()
    np.testing.assert_array_equal(a, b)
    assert np.abs(model((source, target), training=True).numpy() - a).max() > 1e-3


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_save_and_load_round_trips(tmp_path, variant):
    rng = np.random.default_rng(5)
    config = SMALL.replace(**VARIANTS[variant])
    model = Transformer(config)
    source, target = random_batch(rng, config, [5, 2], [4, 3])
    expected = model((source, target)).numpy()

    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras")
    assert loaded.config == config
    np.testing.assert_array_equal(loaded((source, target)).numpy(), expected)

    model.save_weights(tmp_path / "model.weights.h5")
    fresh = Transformer(config)
    fresh.build()
    fresh.load_weights(tmp_path / "model.weights.h5")
    np.testing.assert_array_equal(fresh((source, target)).numpy(), expected)

    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt" / "step"))
    restored = Transformer(config)
    restored.build()
    tf.train.Checkpoint(model=restored).read(path).assert_consumed()
    np.testing.assert_array_equal(restored((source, target)).numpy(), expected)


LAYERS = [
    (SharedEmbedding(vocab_size=11, d_model=6), lambda l: l(np.array([[1, 2, 3]]))),
    (PositionwiseFeedForward(d_model=6, d_ff=10, dropout=0.1),
     lambda l: l(np.ones((2, 3, 6), np.float32))),
    (ResidualConnection("pre", 0.1, 1e-5), lambda l: l(np.ones((2, 3, 6), np.float32),
                                                       np.full((2, 3, 6), 2.0, np.float32))),
    (EncoderLayer(6, 10, 2, 3, 4, norm_position="pre"),
     lambda l: l(np.random.default_rng(0).normal(size=(2, 3, 6)).astype(np.float32),
                 attention_mask=np.ones((2, 3, 3), bool))),
    (DecoderLayer(6, 10, 2, 3, 4),
     lambda l: l(np.random.default_rng(0).normal(size=(2, 3, 6)).astype(np.float32),
                 np.random.default_rng(1).normal(size=(2, 4, 6)).astype(np.float32),
                 np.tril(np.ones((3, 3), bool))[None], np.ones((2, 1, 4), bool))),
]


@pytest.mark.parametrize("layer, run", LAYERS, ids=[type(l).__name__ for l, _ in LAYERS])
def test_every_layer_get_config_round_trips(layer, run):
    expected = run(layer)
    clone = type(layer).from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    run(clone)
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(run(clone).numpy(), expected.numpy(), rtol=1e-6)


def test_bad_inputs_say_what_was_expected():
    model = Transformer(get_preset("tiny").model)
    good_source, good_target = np.array([[5, 6, 3]]), np.array([[2, 7]])
    with pytest.raises(tf.errors.InvalidArgumentError, match="source_ids: token ids must be < vocabulary size 64"):
        model((np.array([[5, 64]]), good_target))
    with pytest.raises(tf.errors.InvalidArgumentError, match="target_input_ids: token ids must be >= 0"):
        model((good_source, np.array([[2, -1]])))
    with pytest.raises(ValueError, match=r"source_ids: expected token ids of shape \[batch, length\]"):
        model((np.array([5, 6, 3]), good_target))
    with pytest.raises(ValueError, match="same batch size, got 2 and 1"):
        model((np.array([[5, 3], [6, 3]]), good_target))
    with pytest.raises(TypeError, match="expected integer token ids"):
        model((good_source.astype(np.float32), good_target))
    with pytest.raises(tf.errors.InvalidArgumentError, match="exceeds the model's maximum length 128"):
        model((np.full((1, 129), 5), good_target))
    with pytest.raises(ValueError, match=r"expects inputs \(source_ids, target_input_ids\)"):
        model(good_source)


def test_smaller_key_dim_alone_shrinks_only_queries_and_keys():
    # Table 3 row (B): d_k changes, d_v stays d_model / h. Worked by hand for 1+1 layers
    # (3 attention layers: encoder self, decoder self, decoder cross), d_model 64, h 4:
    # each loses 2 x (64 x 4 x (16 - 4)) kernel and 2 x 4 x (16 - 4) bias entries.
    config = ModelConfig(vocab_size=64, num_layers=1, d_model=64, d_ff=32, num_heads=4,
                         max_position=16)
    base, row_b = Transformer(config), Transformer(config.replace(key_dim=4))
    base.build()
    row_b.build()
    assert base.count_params() - row_b.count_params() == 3 * (2 * 64 * 4 * 12 + 2 * 4 * 12)
