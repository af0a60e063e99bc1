"""Raw source sentences to a model's input ids, in the graph (serving and validation).

The rule: strip surrounding whitespace, BPE-tokenize, keep at most `max_tokens` pieces
(longer sentences are TRUNCATED, and flagged), append EOS, pad with PAD_ID. Sentences
that are empty after stripping (or tokenize to nothing) are flagged too: callers run them
as a lone EOS to keep the batch rectangular and replace their output.
"""
from __future__ import annotations

import tensorflow as tf

from transformer_tf.config import EOS_ID, PAD_ID


def encode_sources(tokenizer, text, max_tokens: int):
    """tf.string [N] -> (source_ids int32 [N, S]: pieces + EOS, PAD_ID-padded;
    truncated bool [N]: more than `max_tokens` pieces; empty bool [N])."""
    text = tf.strings.strip(text)
    tokens = tokenizer.tokenize(text)
    lengths = tokens.row_lengths()
    truncated = lengths > max_tokens
    tokens = tokens[:, :max_tokens]
    eos = tf.fill([tokens.nrows(), 1], tf.constant(EOS_ID, tf.int32))
    with_eos = tf.concat([tf.cast(tokens, tf.int32), eos], axis=1)
    empty = tf.logical_or(tf.equal(text, ""), tf.equal(lengths, 0))
    return with_eos.to_tensor(default_value=PAD_ID), truncated, empty
