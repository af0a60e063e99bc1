"""ConvS2S's multi-step attention: one attention per decoder block (Gehring et al. 2017,
section 3.3)."""

import keras
import tensorflow as tf

from transformer_tf.layers.glu_block import scaled_residual
from transformer_tf.layers.weight_norm import WeightNormConv1D, convs2s_stddev


@keras.saving.register_keras_serializable(package="transformer_tf")
class MultiStepAttention(keras.layers.Layer):
    """Attention of decoder block l over the encoder output.

        d_i  = W_d h_i + b_d + g_i                      (query, width f)
        a_ij = softmax_j(d_i . z_j)                     (source padding masked)
        c_i  = sqrt(m) * sum_j a_ij (z_j + e_j)         (m real source tokens: m * sqrt(1/m))
        out  = (h_i + W_c c_i + b_c) * sqrt(0.5)

    h the block's GLU output (width d), g the decoder's input embedding (token + position,
    width f), z the encoder output and e the source input embedding (width f). W_d maps
    d -> f and W_c maps the context back f -> d (both weight-normalised, std sqrt(1/n_in)).

    Call arguments:
      hidden: h [batch, target_length, d].
      target_embedding: g [batch, target_length, f].
      keys: z [batch, source_length, f].
      values: z + e [batch, source_length, f].
      source_valid: bool [batch, source_length], True at real tokens.
      return_weights: also return a [batch, target_length, source_length] (float32).
      kernels: optional `kernels()`, prepared once by a decoding loop.

    Returns:
      out [batch, target_length, d] (and the weights if asked).
    """

    def __init__(self, embedding_dim: int, **kwargs):
        super().__init__(**kwargs)
        self.embedding_dim = embedding_dim

    def build(self, hidden_shape):
        width = int(hidden_shape[-1])
        self.query_projection = WeightNormConv1D(
            self.embedding_dim, 1, stddev=convs2s_stddev(width), name="query_projection",
            dtype=self.dtype_policy)
        self.query_projection.build(hidden_shape)
        self.context_projection = WeightNormConv1D(
            width, 1, stddev=convs2s_stddev(self.embedding_dim), name="context_projection",
            dtype=self.dtype_policy)
        self.context_projection.build((None, None, self.embedding_dim))

    def kernels(self) -> dict:
        """The weight-normalised kernels, prepared once for many decoding steps."""
        return {"query": self.query_projection.kernel(),
                "context": self.context_projection.kernel()}

    def call(self, hidden, target_embedding, keys, values, source_valid, return_weights=False,
             kernels=None):
        kernels = kernels or {}
        query = self.query_projection(hidden, kernel=kernels.get("query")) + target_embedding
        scores = tf.einsum("btf,bsf->bts", tf.cast(query, tf.float32), tf.cast(keys, tf.float32))
        scores += (1.0 - tf.cast(source_valid, tf.float32))[:, None, :] * -1e9
        weights = tf.nn.softmax(scores, axis=-1)  # (batch, target, source)
        context = tf.einsum("bts,bsf->btf", tf.cast(weights, values.dtype), values)
        real_tokens = tf.reduce_sum(tf.cast(source_valid, context.dtype), axis=1)  # (batch,)
        context *= tf.sqrt(real_tokens)[:, None, None]
        out = scaled_residual(hidden, self.context_projection(context,
                                                              kernel=kernels.get("context")))
        return (out, weights) if return_weights else out

    def get_config(self):
        return {**super().get_config(), "embedding_dim": self.embedding_dim}
