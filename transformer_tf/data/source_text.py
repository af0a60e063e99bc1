"""Source sentences (text or ids) to a model's input ids, in the graph: the one set of rules
for every serving signature and for validation.

The rules, row by row (no row can fail or change another):
  * blank rows -- nothing but Unicode separators (Z*: spaces, NBSP, U+3000, U+2028, ...),
    control characters (Cc: tab, NUL, NEL, ...) and format characters (Cf: ZWSP, BOM,
    soft hyphen, ...) -- are flagged `empty`; callers run them as a lone EOS, to keep the
    batch rectangular, and replace their output by "" (no ids) with score 0;
  * invalid UTF-8 bytes become U+FFFD (see BpeTokenizer.tokenize);
  * ids given directly (the ids signatures) are read up to the row's first EOS; PAD ids
    are dropped wherever they are; ids outside the vocabulary and the other special ids
    (BOS) become UNK -- the row still gets a translation, as text with characters the
    vocabulary lacks does; a row with no id left is `empty` like a blank text row;
  * at most `max_tokens` pieces are kept (longer rows are TRUNCATED, and flagged), EOS is
    appended and rows are padded with PAD_ID.
`is_blank` is the same blank rule in Python, for tools that read text outside the graph.
Target inputs from raw text (teacher forcing on a reference, `encode_target_inputs`): BOS,
then at most `max_tokens` pieces.
"""
from __future__ import annotations

import unicodedata

import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, NUM_SPECIAL_IDS, PAD_ID, UNK_ID

# General categories of the characters that make a row blank: separators, controls, formats.
BLANK_CATEGORIES = ("Zs", "Zl", "Zp", "Cc", "Cf")
_BLANK_ROW = r"[\p{Z}\p{Cc}\p{Cf}]*"  # RE2, the same categories


def is_blank(text: str) -> bool:
    """True when `text` has no character outside BLANK_CATEGORIES (so "" is blank)."""
    return all(unicodedata.category(character) in BLANK_CATEGORIES for character in text)


def blank_rows(text) -> tf.Tensor:
    """tf.string [N] (any bytes) -> bool [N]: the rows `is_blank` would call blank
    (invalid UTF-8 is repaired to U+FFFD first, which is not blank)."""
    repaired = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace",
                                            replacement_char=0xFFFD)
    return tf.strings.regex_full_match(repaired, _BLANK_ROW)


def _finish(tokens: tf.RaggedTensor, max_tokens: int, empty):
    """Ragged ids [N, None] -> (source_ids int32 [N, <= max_tokens + 1], truncated, empty)."""
    lengths = tokens.row_lengths()
    truncated = lengths > max_tokens
    tokens = tf.cast(tokens[:, :max_tokens], tf.int32)
    eos = tf.fill([tokens.nrows(), 1], tf.constant(EOS_ID, tf.int32))
    with_eos = tf.concat([tokens, eos], axis=1)
    empty = tf.logical_or(empty, tf.equal(lengths, 0))
    return with_eos.to_tensor(default_value=PAD_ID), truncated, empty


def encode_sources(tokenizer, text, max_tokens: int):
    """tf.string [N] -> (source_ids int32 [N, S]: pieces + EOS, PAD_ID-padded;
    truncated bool [N]: more than `max_tokens` pieces; empty bool [N]: blank row)."""
    empty = blank_rows(text)
    tokens = tokenizer.tokenize(tf.strings.strip(text))
    return _finish(tokens, max_tokens, empty)


def clean_source_ids(source_ids, vocab_size: int, max_tokens: int):
    """Ids from a client -> what `encode_sources` would give for the same pieces.

    Args:
      source_ids: int [N, S], any values (pieces, optionally EOS, PAD-padded).
      vocab_size: ids at or above it (and negative ids, and BOS) become UNK_ID.
      max_tokens: pieces kept per row (before the appended EOS).

    Returns:
      (source_ids int32 [N, <= max_tokens + 1], truncated bool [N], empty bool [N]).
    """
    ids = tf.cast(source_ids, tf.int32)
    before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=1), 0)
    keep = tf.logical_and(before_eos, tf.not_equal(ids, PAD_ID))
    valid = tf.logical_or(tf.equal(ids, UNK_ID),
                          tf.logical_and(ids >= NUM_SPECIAL_IDS, ids < vocab_size))
    ids = tf.where(valid, ids, UNK_ID)
    tokens = tf.ragged.boolean_mask(ids, keep)
    return _finish(tokens, max_tokens, tf.zeros([tf.shape(ids)[0]], tf.bool))


def encode_target_inputs(tokenizer, text, max_tokens: int):
    """tf.string [N] -> target input ids int32 [N, T]: BOS + at most `max_tokens` pieces,
    PAD_ID-padded (teacher forcing on raw reference text, as `transforms.add_special_tokens`
    does for the training data)."""
    tokens = tokenizer.tokenize(tf.strings.strip(text))[:, :max_tokens]
    bos = tf.fill([tokens.nrows(), 1], tf.constant(BOS_ID, tf.int32))
    return tf.concat([bos, tf.cast(tokens, tf.int32)], axis=1).to_tensor(default_value=PAD_ID)
