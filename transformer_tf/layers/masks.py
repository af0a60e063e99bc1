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


def attention_mask(query_valid: tf.Tensor, key_valid: tf.Tensor, causal: bool = False) -> tf.Tensor:
    """Mask for MultiHeadAttention.

    Args:
      query_valid: bool [batch, query_length], True at real query positions.
      key_valid: bool [batch, key_length], True at real key positions.
      causal: also forbid attention to later positions (queries and keys aligned at 0).

    Returns:
      bool [batch, query_length, key_length]. Rows of padded queries keep their real
      keys so that no row is all-False (their outputs are ignored downstream).
    """
    del query_valid  # padded query rows are harmless; only the keys decide.
    mask = key_valid[:, None, :]
    if causal:
        query_length = tf.shape(key_valid)[1]
        mask = tf.logical_and(mask, causal_mask(query_length, query_length)[None])
    return mask
