"""Searching a sequence-to-sequence model: the glue between a model's decoding methods and
the model-independent greedy and beam searches of `transformer_tf.decoding.search`.

A model searched here provides (see `transformer_tf.models.contract.Seq2SeqModel`):

    encode(source_ids, training=False) -> encoded           any nested structure
    init_cache(encoded, max_length)    -> DecoderState
    decode_step(ids [B], step, state)  -> (logits [B, V], DecoderState)
    target_vocab_size, max_target_length                    ints

and declares in its `DecoderState` which tensors a beam search must reorder after every
step (`per_beam`) and which it tiles once and leaves alone (`per_sentence`, `constants`).
Nothing here knows a model's cache layout or key names.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID, DecodingConfig
from transformer_tf.decoding.search import (
    SearchResult, beam_search, check_n_best, greedy_search, tile_beams)


class DecoderState(NamedTuple):
    """A model's decoding state, split by how a beam search must treat each part.

    Attributes:
      per_sentence: nested tensors [batch, ...] fixed for the whole search (encoder
        keys/values, source masks): tiled once to [batch * beam, ...], never reordered.
      per_beam: nested tensors [batch, ...] that `decode_step` updates (self-attention
        caches, input buffers): tiled, then gathered by the surviving beams every step.
      constants: nested tensors without a batch dimension (weights rearranged once per
        search); neither tiled nor reordered.
    """

    per_sentence: Any
    per_beam: Any
    constants: Any = ()


def _forbidden_token_bias(vocab_size: int, token_ids: Sequence[int]) -> tf.Tensor:
    """float32 [vocab_size]: -1e9 at `token_ids`, 0 elsewhere (added to every step's logits)."""
    bias = tf.zeros([vocab_size], tf.float32)
    ids = tf.constant(list(token_ids), tf.int32)[:, None]
    return tf.tensor_scatter_nd_update(bias, ids, tf.fill([len(token_ids)], -1e9))


def source_lengths(source_ids) -> tf.Tensor:
    """int32 [batch]: real tokens per row of PAD_ID-padded `source_ids` (EOS included)."""
    return tf.reduce_sum(tf.cast(tf.not_equal(source_ids, PAD_ID), tf.int32), axis=1)


def search_model(model, source_ids, decoding: DecodingConfig, n_best: int = 1,
                 forbidden_ids: Sequence[int] = (PAD_ID, BOS_ID)) -> SearchResult:
    """Translate padded source ids: beam search (greedy when decoding.beam_size == 1).

    Args:
      model: a model of the sequence-to-sequence contract.
      source_ids: int [batch, source_length], tokens + EOS, PAD_ID-padded.
      decoding: beam size, alpha and max_extra_length (output length limit: source length
        + max_extra_length tokens, EOS included, and never more than the model's
        max_target_length).
      n_best: hypotheses returned per sentence, 1 <= n_best <= beam_size.
      forbidden_ids: ids the search never emits (PAD and BOS always belong there).

    Returns:
      `SearchResult`: ids [batch, n_best, L], scores [batch, n_best], lengths, num_steps.
      The search never emits PAD, BOS or any of `forbidden_ids`.
    """
    check_n_best(n_best, decoding.beam_size)
    source_ids = tf.cast(source_ids, tf.int32)
    max_lengths = tf.minimum(source_lengths(source_ids) + decoding.max_extra_length,
                             model.max_target_length)
    return search_with_lengths(
        model, source_ids, beam_size=decoding.beam_size, alpha=decoding.alpha, n_best=n_best,
        max_lengths=max_lengths, cache_length=tf.maximum(tf.reduce_max(max_lengths), 1),
        forbidden_ids=sorted({PAD_ID, BOS_ID, *forbidden_ids}))


def search_with_lengths(model, source_ids, *, beam_size: int, alpha: float, n_best: int,
                        max_lengths, cache_length, max_decode_length: int | None = None,
                        forbidden_ids: Sequence[int] = (PAD_ID, BOS_ID)) -> SearchResult:
    """The search with explicit length limits, for callers that need control over them
    (benchmarks fix the output length: EOS in `forbidden_ids`, static lengths for XLA).

    Args:
      model: a model of the sequence-to-sequence contract.
      source_ids: int32 [batch, source_length].
      beam_size, alpha, n_best: as in `DecodingConfig` (beam_size 1: greedy).
      max_lengths: int32 [batch] or scalar, tokens allowed per sentence (EOS included).
      cache_length: the decoder cache's size in positions (>= max(max_lengths)).
      max_decode_length: static output size, or None (derived from max_lengths).
      forbidden_ids: ids that can never be produced (their logits get -1e9).
    """
    batch_size = tf.shape(source_ids)[0]
    encoded = model.encode(source_ids, training=False)
    state = model.init_cache(encoded, cache_length)
    per_sentence, constants = state.per_sentence, state.constants
    if beam_size > 1:
        per_sentence = tf.nest.map_structure(lambda t: tile_beams(t, beam_size), per_sentence)
    forbidden = _forbidden_token_bias(model.target_vocab_size, forbidden_ids)  # once

    def step_fn(ids, step, per_beam):
        logits, new_state = model.decode_step(
            ids, step, DecoderState(per_sentence, per_beam, constants))
        return tf.cast(logits, tf.float32) + forbidden, new_state.per_beam

    common = dict(max_decode_length=max_decode_length, eos_id=EOS_ID, bos_id=BOS_ID,
                  pad_id=PAD_ID)
    if beam_size == 1:
        return greedy_search(step_fn, state.per_beam, batch_size, max_lengths, **common)
    return beam_search(step_fn, state.per_beam, batch_size, beam_size, max_lengths,
                       alpha=alpha, n_best=n_best, **common)
