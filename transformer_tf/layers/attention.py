"""Multi-head attention with an incremental-decoding cache (paper sections 3.2.1-3.2.2).

Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V                      (equation 1)
MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

`keras.layers.MultiHeadAttention` already computes exactly this (its query/key/value
EinsumDense layers hold all heads' W_i at once, (d_model, h, d_k)); this subclass only
overrides `call` to add caches, reusing `_query_dense`, `_key_dense`, `_value_dense`,
`_compute_attention` (so Keras' fused `dot_product_attention` path stays in use when
attention dropout is off) and `_output_dense`.
"""
import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="transformer_tf")
class CachedMultiHeadAttention(keras.layers.MultiHeadAttention):
    """MultiHeadAttention with two kinds of cache for decoding.

    - Self-attention cache (decoder): fixed-size key/value tensors
      [batch, max_length, heads, d_k|d_v]; the keys/values of the new query positions are
      written at `cache_update_index` and the queries attend over the whole cache (the
      caller's mask hides positions not yet written). Fixed shapes keep one trace for
      every step, inside a SavedModel and under XLA.
    - Static cache (encoder-decoder attention): the keys/values of the encoder output,
      computed once per sentence with `project_key_value` and reused at every step
      (pass `cache` with `cache_update_index=None`).

    Call arguments:
      query: [batch, query_length, d_model].
      value: [batch, key_length, d_model]; ignored when a static cache is given.
      key: optional, defaults to `value`.
      attention_mask: bool [batch, query_length, key_length], True where attention is
        allowed (key_length = max_length when a self-attention cache is used).
      cache: None or a (key, value) pair of projected tensors
        [batch, key_length, heads, d_k] and [batch, key_length, heads, d_v].
      cache_update_index: int scalar; with a cache, where to write the new keys/values.
      training: enables attention dropout.
      return_attention_scores: also return the weights [batch, heads, query, key]
        (uses the unfused path).

    Returns:
      output [batch, query_length, d_model]; then the updated cache if `cache` was given;
      then the attention scores if requested.
    """

    def call(
        self,
        query,
        value=None,
        key=None,
        attention_mask=None,
        cache=None,
        cache_update_index=None,
        training=None,
        return_attention_scores=False,
    ):
        query_heads = self._query_dense(query)  # (batch, query_len, heads, d_k)
        if cache is not None and cache_update_index is None:
            key_heads, value_heads = cache  # static cache: encoder keys/values
        else:
            new_keys, new_values = self.project_key_value(value, key)
            if cache is None:
                key_heads, value_heads = new_keys, new_values
            else:
                start = [0, cache_update_index, 0, 0]
                key_heads = keras.ops.slice_update(cache[0], start, new_keys)
                value_heads = keras.ops.slice_update(cache[1], start, new_values)
                cache = (key_heads, value_heads)

        attention_output, attention_scores = self._compute_attention(
            query_heads, key_heads, value_heads, attention_mask, training,
            return_attention_scores,
        )
        output = self._output_dense(attention_output)  # (batch, query_len, d_model)

        results = (output,)
        if cache is not None:
            results += (cache,)
        if return_attention_scores:
            results += (attention_scores,)
        return results[0] if len(results) == 1 else results

    def project_key_value(self, value, key=None):
        """Keys and values of `value` (and `key`), split into heads.

        Returns:
          ([batch, length, heads, d_k], [batch, length, heads, d_v]).
        """
        key = value if key is None else key
        return self._key_dense(key), self._value_dense(value)

    def empty_cache(self, batch_size, max_length):
        """Zeros for a self-attention cache of `max_length` positions."""
        dtype = self.compute_dtype
        return (
            tf.zeros([batch_size, max_length, self._num_heads, self._key_dim], dtype),
            tf.zeros([batch_size, max_length, self._num_heads, self._value_dim], dtype),
        )
