"""Multi-head attention with an incremental-decoding cache (paper sections 3.2.1-3.2.2).

Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V                      (equation 1)
MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

The weights, their layout and the configuration are `keras.layers.MultiHeadAttention`'s
(its query/key/value EinsumDense layers hold all heads' W_i at once, (d_model, h, d_k),
so checkpoints and `get_config` are the Keras ones). `call` is overridden, and so is the
arithmetic, for speed (bench/README.md has the measurements):

  * Projections are one 2-D matmul over [batch * length, d_model] with the kernel
    reshaped to (d_model, h * d_k). Keras' EinsumDense multiplies a 3-D input by the
    kernel with a broadcasting batched matmul, whose weight gradient materialises one
    (d_model, h * d_k) product per sentence and then sums them.
  * Heads are kept head-major, [batch, heads, length, depth], so that Q K^T and the
    weighted sum of V are plain batched matmuls. Keras' einsums over [batch, length,
    heads, depth] transpose the keys and values on every call, which when decoding
    means the whole cache at every step.
"""
import keras
import tensorflow as tf

from transformer_tf.layers import kernel_layout

# Added to the logits of masked positions (in float32, where the softmax is computed).
_MASKED_LOGIT = -1e9


@keras.saving.register_keras_serializable(package="transformer_tf")
class CachedMultiHeadAttention(keras.layers.MultiHeadAttention):
    """MultiHeadAttention with two kinds of cache for decoding.

    - Growing self-attention cache (decoder, graph mode): with `append_to_cache`, the new
      keys/values are appended, so step t reads and copies t positions, not max_length.
    - Self-attention cache (decoder): fixed-size key/value tensors
      [batch, heads, max_length, d_k|d_v]; the keys/values of the new query positions
      are written at `cache_update_index` and the queries attend over the whole cache
      (the caller's mask hides positions not yet written). Fixed shapes keep one trace
      for every step, inside a SavedModel and under XLA.
    - Static cache (encoder-decoder attention): the keys/values of the encoder output,
      computed once per sentence with `project_key_value` and reused at every step
      (pass `cache` with `cache_update_index=None`).

    Only attention over one sequence axis and an output of the query's width are
    supported (`attention_axes` and `output_shape` left at their defaults).

    Call arguments:
      query: [batch, query_length, d_model].
      value: [batch, key_length, d_model]; ignored when a static cache is given.
      key: optional, defaults to `value`.
      attention_mask: bool, broadcastable to [batch, query_length, key_length], True
        where attention is allowed (key_length = max_length with a self-attention cache).
      cache: None or a (key, value) pair of projected tensors
        [batch, heads, key_length, d_k] and [batch, heads, key_length, d_v].
      cache_update_index: int scalar; with a cache, where to write the new keys/values.
      append_to_cache: with a cache, append the new keys/values instead (growing cache).
      training: enables attention dropout.
      return_attention_scores: also return the weights [batch, heads, query, key].
      kernels: None, or `inference_kernels()` (inference: the projections' weights laid
        out once for CPU matrix products).

    Returns:
      output [batch, query_length, d_model]; then the updated cache if `cache` was given;
      then the attention scores if requested.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self._output_shape:
            raise ValueError("CachedMultiHeadAttention: output_shape is not supported")
        if self._attention_axes not in (None, (1,)):
            raise ValueError(
                "CachedMultiHeadAttention: only attention over axis 1 is supported, got "
                f"attention_axes={self._attention_axes}")

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
        append_to_cache=False,
        kernels=None,
    ):
        kernels = kernels or {}
        query_heads = self._project_heads(  # (batch, h, T, d_k)
            self._query_dense, query, kernels.get("query"))
        if cache is not None and cache_update_index is None and not append_to_cache:
            key_heads, value_heads = cache  # static cache: encoder keys/values
        else:
            new_keys, new_values = self.project_key_value(value, key, kernels)
            if cache is None:
                key_heads, value_heads = new_keys, new_values
            elif append_to_cache:  # growing cache: one more position per step
                key_heads = tf.concat([cache[0], new_keys], axis=2)
                value_heads = tf.concat([cache[1], new_values], axis=2)
                cache = (key_heads, value_heads)
            else:
                start = [0, 0, cache_update_index, 0]
                key_heads = keras.ops.slice_update(cache[0], start, new_keys)
                value_heads = keras.ops.slice_update(cache[1], start, new_values)
                cache = (key_heads, value_heads)

        attention_output, attention_scores = self._attend(
            query_heads, key_heads, value_heads, attention_mask, training)
        output = self._merge_heads(attention_output, kernels.get("output"))  # (batch, T, d_model)

        results = (output,)
        if cache is not None:
            results += (cache,)
        if return_attention_scores:
            results += (attention_scores,)
        return results[0] if len(results) == 1 else results

    def project_key_value(self, value, key=None, kernels=None):
        """Keys and values of `value` (and `key`), split into heads, head-major;
        `kernels`: None or `inference_kernels()`.

        Returns:
          ([batch, heads, length, d_k], [batch, heads, length, d_v]).
        """
        key = value if key is None else key
        kernels = kernels or {}
        return (self._project_heads(self._key_dense, key, kernels.get("key")),
                self._project_heads(self._value_dense, value, kernels.get("value")))

    def inference_kernels(self):
        """{"query", "key", "value", "output"}: each projection's (2-D kernel, bias or
        None) in the compute dtype, laid out once for inference products
        (`layers.kernel_layout`), for `call(..., kernels=...)` and `project_key_value`;
        None for a projection whose width the layout leaves alone (its product reads the
        layer's own kernel, reshaped: a kept copy would only duplicate it). None when
        Keras has quantized the weights (their own path)."""
        denses = {"query": self._query_dense, "key": self._key_dense,
                  "value": self._value_dense, "output": self._output_dense}
        if any(dense.quantization_mode is not None for dense in denses.values()):
            return None
        laid_out = {}
        for name, dense in denses.items():
            shape = dense.kernel.shape
            width = shape[-1] if name == "output" else shape[1] * shape[2]
            if kernel_layout.laid_out_width(width) == width:
                laid_out[name] = None
                continue
            kernel, bias = self._weights_of(dense)
            kernel = tf.reshape(kernel, [-1, width])
            if bias is not None:
                bias = tf.reshape(bias, [-1])
            laid_out[name] = kernel_layout.pad_output_columns(kernel, bias)
        return laid_out

    def empty_cache(self, batch_size, max_length):
        """Zeros for a self-attention cache of `max_length` positions."""
        dtype = self.compute_dtype
        return (
            tf.zeros([batch_size, self._num_heads, max_length, self._key_dim], dtype),
            tf.zeros([batch_size, self._num_heads, max_length, self._value_dim], dtype),
        )

    # ------------------------------------------------------------------ arithmetic
    def _weights_of(self, dense):
        kernel = tf.cast(dense.kernel, self.compute_dtype)
        bias = None if dense.bias is None else tf.cast(dense.bias, self.compute_dtype)
        return kernel, bias

    def _project_heads(self, dense, x, laid_out=None):
        """x [batch, length, d_in] -> [batch, heads, length, depth] with `dense`'s
        (d_in, heads, depth) kernel (or its `laid_out` (kernel, bias) of
        `inference_kernels`), as one 2-D matmul."""
        if dense.quantization_mode is not None:  # Keras' quantized kernels: its own path
            return tf.transpose(dense(x), [0, 2, 1, 3])
        d_in, heads, depth = dense.kernel.shape
        if laid_out is None:
            kernel, bias = self._weights_of(dense)
            laid_out = (tf.reshape(kernel, [d_in, heads * depth]),
                        None if bias is None else tf.reshape(bias, [heads * depth]))
        y = kernel_layout.dense(tf.reshape(x, [-1, d_in]), *laid_out, heads * depth)
        batch, length = tf.shape(x)[0], tf.shape(x)[1]
        return tf.transpose(tf.reshape(y, [batch, length, heads, depth]), [0, 2, 1, 3])

    def _merge_heads(self, heads_output, laid_out=None):
        """[batch, heads, length, d_v] -> W^O Concat(heads): [batch, length, d_model]
        (`laid_out`: W^O's (kernel, bias) of `inference_kernels`, or None)."""
        per_position = tf.transpose(heads_output, [0, 2, 1, 3])  # (batch, T, h, d_v)
        dense = self._output_dense
        if dense.quantization_mode is not None:
            return dense(per_position)
        heads, depth, d_model = dense.kernel.shape
        if laid_out is None:
            kernel, bias = self._weights_of(dense)
            laid_out = (tf.reshape(kernel, [heads * depth, d_model]), bias)
        y = kernel_layout.dense(tf.reshape(per_position, [-1, heads * depth]), *laid_out,
                                d_model)
        shape = tf.concat([tf.shape(per_position)[:2], [d_model]], axis=0)
        return tf.reshape(y, shape)

    def _attend(self, query, key, value, attention_mask, training):
        """Equation (1) per head. query [B, h, T, d_k], key [B, h, S, d_k],
        value [B, h, S, d_v], mask broadcastable to [B, T, S].

        Returns ([B, h, T, d_v], attention weights [B, h, T, S] before dropout).
        """
        query = query * tf.cast(self._inverse_sqrt_key_dim, query.dtype)
        logits = tf.matmul(query, key, transpose_b=True)  # (B, h, T, S)
        # The softmax runs in float32 whatever the compute dtype (mixed precision).
        logits = tf.cast(logits, tf.float32)
        if attention_mask is not None:
            mask = tf.cast(attention_mask, tf.bool)
            mask = mask[:, None] if mask.shape.rank == 3 else mask
            logits = tf.where(mask, logits, _MASKED_LOGIT)
        weights = tf.cast(tf.nn.softmax(logits), value.dtype)
        dropped = self._dropout_layer(weights, training=training)
        return tf.matmul(dropped, value), weights
