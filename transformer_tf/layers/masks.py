"""Explicit attention masks (no implicit Keras masks anywhere in the model).

Convention: a mask is boolean and True where attention is allowed.
"""
import tensorflow as tf

from transformer_tf.config import PAD_ID


def padding_mask(ids: tf.Tensor, pad_id: int = PAD_ID) -> tf.Tensor:
    """True at real tokens. ids: int [batch, length] -> bool [batch, length]."""
    return tf.not_equal(ids, pad_id)


def causal_mask(query_length, key_length, query_offset=0) -> tf.Tensor:
    """bool [query_length, key_length]: query i (at position i + query_offset) sees keys <= it."""
    query_positions = tf.range(query_length)[:, None] + query_offset
    key_positions = tf.range(key_length)[None, :]
    return key_positions <= query_positions


def window_mask(query_length, key_length, window: int, query_offset=0) -> tf.Tensor:
    """bool [query_length, key_length]: query i (at position i + query_offset) sees the keys
    within `window` positions of it, |i - j| <= window (restricted self-attention, the
    paper's Table 1 row with neighbourhood size r = 2 * window + 1)."""
    query_positions = tf.range(query_length)[:, None] + query_offset
    key_positions = tf.range(key_length)[None, :]
    return tf.abs(key_positions - query_positions) <= window


def attention_mask(query_valid: tf.Tensor, key_valid: tf.Tensor, causal: bool = False,
                   window: int | None = None) -> tf.Tensor:
    """Mask for MultiHeadAttention.

    Args:
      query_valid: bool [batch, query_length], True at real query positions.
      key_valid: bool [batch, key_length], True at real key positions.
      causal: also forbid attention to later positions (queries and keys aligned at 0).
      window: also forbid keys more than `window` positions away (self-attention, queries
        and keys aligned at 0); None: no restriction.

    Returns:
      bool [batch, query_length, key_length]. Rows of padded queries keep their real
      keys so that no row is all-False (their outputs are ignored downstream).
    """
    del query_valid  # padded query rows are harmless; only the keys decide.
    mask = key_valid[:, None, :]
    length = tf.shape(key_valid)[1]
    if causal:
        mask = tf.logical_and(mask, causal_mask(length, length)[None])
    if window is not None:
        mask = tf.logical_and(mask, window_mask(length, length, window)[None])
    return mask
