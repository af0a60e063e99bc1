"""Forced decoding: the log-probability a model gives a translation it is handed.

For a source x and a target y_1 .. y_n (its pieces, then EOS), one teacher-forced pass of
the model (its `call`, the training path, without dropout) gives

    log P(y | x) = sum_t log p(y_t | y_<t, x),      t = 1 .. n (EOS included),

natural logarithms, no label smoothing, no length penalty. `forbidden_ids` renormalises
each step's distribution over the ids a search may emit, as the searches of
`decoding.model_driver` do (their -1e9 logit bias, then log-softmax): with the search's
forbidden ids and alpha = 0 the result equals a beam search's score of the same output.
Without (the default) it is the model's own distribution, the one the training loss
(`training.losses` with label smoothing 0) measures.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import tensorflow as tf

from transformer_tf.config import BOS_ID, PAD_ID
from transformer_tf.decoding.model_driver import forbidden_token_bias, source_lengths


class ForcedScores(NamedTuple):
    """What `forced_scores` returns (N rows, T = target_ids' width).

    Attributes:
      log_prob: float32 [N], sum of `token_scores` over the row's tokens, in nats.
      token_scores: float32 [N, T], log p(target_ids[n, t] | earlier ones, source);
        0 at PAD positions.
      lengths: int32 [N], tokens scored per row (EOS included).
    """

    log_prob: tf.Tensor
    token_scores: tf.Tensor
    lengths: tf.Tensor


def teacher_forcing_inputs(target_ids) -> tf.Tensor:
    """target_ids int [N, T] (tokens, normally ending with EOS, PAD-padded) -> the target
    input int32 [N, T]: BOS, then target_ids shifted right by one, PAD after the row's
    length (position t of it predicts target_ids[:, t])."""
    target_ids = tf.cast(target_ids, tf.int32)
    shifted = tf.concat([tf.fill([tf.shape(target_ids)[0], 1], BOS_ID), target_ids[:, :-1]],
                        axis=1)
    positions = tf.range(tf.shape(target_ids)[1])[None, :]
    return tf.where(positions < source_lengths(target_ids)[:, None], shifted, PAD_ID)


def forced_scores(model, source_ids, target_ids,
                  forbidden_ids: Sequence[int] = ()) -> ForcedScores:
    """The log-probabilities `model` gives `target_ids` after `source_ids`.

    Args:
      model: a model of the sequence-to-sequence contract (`models.contract`).
      source_ids: int [N, S], tokens + EOS, PAD_ID-padded (as the searches take them).
      target_ids: int [N, T], the tokens to score, PAD_ID-padded: normally the pieces then
        EOS; a search output cut by its length limit (no EOS) is scored as it is.
        T <= model.max_target_length.
      forbidden_ids: ids whose probability is removed and the rest renormalised (module
        doc); () for the model's own distribution.

    Returns:
      A `ForcedScores`.
    """
    source_ids = tf.cast(source_ids, tf.int32)
    target_ids = tf.cast(target_ids, tf.int32)
    logits = model((source_ids, teacher_forcing_inputs(target_ids)), training=False)
    logits = tf.cast(logits, tf.float32)  # [N, T, V]
    if forbidden_ids:
        logits += forbidden_token_bias(model.target_vocab_size, forbidden_ids)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    token_scores = tf.gather(log_probs, target_ids, batch_dims=2)  # [N, T]
    real = tf.not_equal(target_ids, PAD_ID)
    token_scores = tf.where(real, token_scores, 0.0)
    return ForcedScores(log_prob=tf.reduce_sum(token_scores, axis=1),
                        token_scores=token_scores,
                        lengths=source_lengths(target_ids))
