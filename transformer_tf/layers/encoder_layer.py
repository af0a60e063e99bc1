"""One encoder layer: self-attention then feed-forward, each with its residual (section 3.1)."""
import keras
import tensorflow as tf

from transformer_tf.layers.attention import CachedMultiHeadAttention
from transformer_tf.layers.feed_forward import PositionwiseFeedForward
from transformer_tf.layers.residual import ResidualConnection


def attention_layer(name, num_heads, key_dim, value_dim, attention_dropout, dtype_policy):
    """The multi-head attention sub-layer used throughout the model."""
    return CachedMultiHeadAttention(
        num_heads=num_heads, key_dim=key_dim, value_dim=value_dim,
        dropout=attention_dropout, name=name, dtype=dtype_policy,
    )


@keras.saving.register_keras_serializable(package="transformer_tf")
class EncoderLayer(keras.layers.Layer):
    """x -> Residual(SelfAttention) -> Residual(FFN).

    Args:
      d_model, d_ff, num_heads, key_dim, value_dim: sizes (Table 3).
      dropout: residual dropout P_drop.
      attention_dropout: dropout on attention weights.
      ffn_dropout: dropout after the FFN's ReLU.
      norm_position: "post" (paper) or "pre".
      layer_norm_epsilon: LayerNormalization epsilon.

    Call arguments:
      x: [batch, source_length, d_model].
      attention_mask: bool [batch, source_length, source_length] (True = may attend).
      training: enables dropout.
      return_attention: also return the self-attention weights (for inspection only;
        the default path returns nothing more and so keeps its graph).
      kernels: None, or `inference_kernels()` (not training: no dropout where used).

    Returns:
      [batch, source_length, d_model]; with `return_attention`, the pair (that, float32
      self-attention weights [batch, heads, source_length, source_length]).
    """

    def __init__(self, d_model, d_ff, num_heads, key_dim, value_dim, dropout=0.1,
                 attention_dropout=0.0, ffn_dropout=0.0, norm_position="post",
                 layer_norm_epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.d_model, self.d_ff, self.num_heads = d_model, d_ff, num_heads
        self.key_dim, self.value_dim = key_dim, value_dim
        self.dropout, self.attention_dropout, self.ffn_dropout = dropout, attention_dropout, ffn_dropout
        self.norm_position, self.layer_norm_epsilon = norm_position, layer_norm_epsilon
        policy = self.dtype_policy
        self.self_attention = attention_layer(
            "self_attention", num_heads, key_dim, value_dim, attention_dropout, policy)
        self.self_attention_residual = ResidualConnection(
            norm_position, dropout, layer_norm_epsilon, name="self_attention_residual",
            dtype=policy)
        self.feed_forward = PositionwiseFeedForward(
            d_model, d_ff, ffn_dropout, name="feed_forward", dtype=policy)
        self.feed_forward_residual = ResidualConnection(
            norm_position, dropout, layer_norm_epsilon, name="feed_forward_residual",
            dtype=policy)

    def build(self, input_shape):
        self.self_attention.build(input_shape, input_shape)
        for layer in (self.self_attention_residual, self.feed_forward, self.feed_forward_residual):
            layer.build(input_shape)

    def call(self, x, attention_mask, training=None, return_attention=False, kernels=None):
        kernels = kernels or {}
        h = self.self_attention_residual.sublayer_input(x)
        y = self.self_attention(h, h, attention_mask=attention_mask, training=training,
                                return_attention_scores=return_attention,
                                kernels=kernels.get("self_attention"))
        if return_attention:
            y, weights = y
        x = self.self_attention_residual(x, y, training=training)
        x = self.feed_forward_sublayer(x, training, kernels.get("feed_forward"))
        return (x, tf.cast(weights, tf.float32)) if return_attention else x

    def feed_forward_sublayer(self, x, training, kernels=None):
        """x -> Residual(FFN)(x), the last sub-layer of both layer kinds."""
        h = self.feed_forward_residual.sublayer_input(x)
        y = self.feed_forward(h, training=training, kernels=kernels)
        return self.feed_forward_residual(x, y, training=training)

    def inference_kernels(self):
        """The sub-layers' `inference_kernels()` by sub-layer name, for `call(...,
        kernels=...)` when not training (weights laid out once, `layers.kernel_layout`)."""
        return {"self_attention": self.self_attention.inference_kernels(),
                "feed_forward": self.feed_forward.inference_kernels()}

    def get_config(self):
        return {
            **super().get_config(),
            "d_model": self.d_model, "d_ff": self.d_ff, "num_heads": self.num_heads,
            "key_dim": self.key_dim, "value_dim": self.value_dim, "dropout": self.dropout,
            "attention_dropout": self.attention_dropout, "ffn_dropout": self.ffn_dropout,
            "norm_position": self.norm_position, "layer_norm_epsilon": self.layer_norm_epsilon,
        }
