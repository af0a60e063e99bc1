"""A beam search hands `decode_step` one row of `per_sentence` tensors per sentence for the
K rows of its beams (DecoderState). The logits and the updated state must be what the
same step gives with those rows tiled to one per beam (the independent path: every row
its own copy), for both families, with growing and fixed caches, eagerly and in a graph."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import EOS_ID, PAD_ID, ModelConfig
from transformer_tf.presets import get_preset
from transformer_tf.decoding.beam_and_greedy import tile_beams
from transformer_tf.models.convs2s import ConvS2S
from transformer_tf.models.transformer import Transformer

SENTENCES, BEAMS, STEPS = 3, 4, 4


def _model(kind):
    tf.keras.utils.set_random_seed(21)
    if kind == "convs2s":
        model = ConvS2S(get_preset("convs2s_tiny").model.replace(vocab_size=30, max_position=32))
    else:
        model = Transformer(ModelConfig(
            vocab_size=30, num_layers=2, d_model=16, d_ff=32, num_heads=2, max_position=32,
            dropout=0.0, source_cursor=kind == "transformer_cursor"))
    model.build()
    return model


def _source():
    rng = np.random.default_rng(3)
    ids = np.full([SENTENCES, 7], PAD_ID, np.int32)
    for row, length in enumerate([7, 3, 5]):
        ids[row, :length - 1] = rng.integers(4, 30, length - 1)
        ids[row, length - 1] = EOS_ID
    return tf.constant(ids)


def _decode(model, state, tokens):
    logits = []
    for step in range(STEPS):
        step_logits, state = model.decode_step(tokens[:, step], tf.constant(step), state)
        logits.append(step_logits)
    return tf.stack(logits, 1), state.per_beam


@pytest.mark.parametrize("kind,cache_length", [
    ("transformer", None), ("transformer", 6), ("transformer_cursor", None), ("convs2s", 6)])
def test_beams_sharing_a_sentence_row_get_what_tiled_rows_get(kind, cache_length):
    model = _model(kind)
    source = _source()
    state = model.init_cache(model.encode(source, training=False), cache_length)
    beams = state._replace(per_beam=tf.nest.map_structure(
        lambda t: tile_beams(t, BEAMS), state.per_beam))
    tiled = beams._replace(per_sentence=tf.nest.map_structure(
        lambda t: tile_beams(t, BEAMS), state.per_sentence))
    # Each beam its own tokens, some copied from its source (the cursor moves).
    tokens = np.random.default_rng(4).integers(4, 30, [SENTENCES * BEAMS, STEPS])
    tokens[::2, 1] = tile_beams(source, BEAMS).numpy()[::2, 0]
    tokens = tf.constant(tokens, tf.int32)

    want_logits, want_state = _decode(model, tiled, tokens)
    for run in (_decode, tf.function(_decode, autograph=False)):
        got_logits, got_state = run(model, beams, tokens)
        np.testing.assert_allclose(got_logits, want_logits, rtol=1e-5, atol=1e-5)
        tf.nest.map_structure(
            lambda got, want: np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5),
            got_state, want_state)
    # The beams of a sentence differ (their tokens do), so rows were not mixed up by luck.
    assert not np.allclose(want_logits[0], want_logits[1])
