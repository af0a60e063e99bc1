"""One decoder layer: masked self-attention, encoder-decoder attention, feed-forward."""
import keras
import tensorflow as tf

from transformer_tf.layers.encoder_layer import EncoderLayer, attention_layer
from transformer_tf.layers.residual import ResidualConnection


@keras.saving.register_keras_serializable(package="transformer_tf")
class DecoderLayer(EncoderLayer):
    """x -> Residual(masked SelfAttention) -> Residual(CrossAttention) -> Residual(FFN).

    Takes the encoder layer's arguments (see `EncoderLayer`) and adds the
    encoder-decoder attention between its two sub-layers.

    Call arguments:
      x: [batch, target_length, d_model] (target_length = 1 when decoding step by step).
      encoder_output: [batch, source_length, d_model]; unused when `cache` holds the
        encoder keys/values.
      self_attention_mask: bool, broadcastable to [batch, target_length, target_length or
        max_length].
      cross_attention_mask: bool [batch, target_length, source_length]; with a cache, of
        "cross_key"'s rows, [sentences, 1, source_length] broadcasts.
      cache: None for a full (teacher-forced) pass, or a dict with "self_key",
        "self_value" ([batch, heads, max_length, d_k|d_v]) and "cross_key", "cross_value"
        ([sentences, heads, source_length, d_k|d_v], batch a multiple of sentences: rows
        b * K ... b * K + K - 1 of x are a beam search's beams of sentence b, which attend
        to its one row of encoder keys as K query positions, reading them once).
      step: int scalar; with a cache, the position of x's first element.
      training: enables dropout.
      return_attention: without a cache only: also return the attention weights (for
        inspection; the default path keeps its graph).
      grow_cache: with a cache, append this step's keys/values (a growing cache).
      kernels: None, or `inference_kernels()` (not training).

    Returns:
      [batch, target_length, d_model], and the updated cache when one was given; with
      `return_attention`, the pair (that, {"decoder": self-attention weights [batch,
      heads, target_length, target_length], "cross": encoder-decoder attention weights
      [batch, heads, target_length, source_length]}), float32.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        policy = self.dtype_policy
        self.cross_attention = attention_layer(
            "cross_attention", self.num_heads, self.key_dim, self.value_dim,
            self.attention_dropout, policy)
        self.cross_attention_residual = ResidualConnection(
            self.norm_position, self.dropout, self.layer_norm_epsilon,
            name="cross_attention_residual", dtype=policy)

    def inference_kernels(self):
        return {**super().inference_kernels(),
                "cross_attention": self.cross_attention.inference_kernels()}

    def build(self, input_shape):
        super().build(input_shape)
        self.cross_attention.build(input_shape, input_shape)
        self.cross_attention_residual.build(input_shape)

    def call(self, x, encoder_output, self_attention_mask, cross_attention_mask,
             cache=None, step=None, training=None, return_attention=False,
             grow_cache=False, kernels=None):
        if return_attention and cache is not None:
            raise ValueError("DecoderLayer: return_attention needs a full pass (no cache)")
        weights = {}
        kernels = kernels or {}
        h = self.self_attention_residual.sublayer_input(x)
        if cache is None:
            y = self.self_attention(h, h, attention_mask=self_attention_mask, training=training,
                                    return_attention_scores=return_attention,
                                    kernels=kernels.get("self_attention"))
            if return_attention:
                y, weights["decoder"] = y
        else:
            y, (self_key, self_value) = self.self_attention(
                h, h, attention_mask=self_attention_mask,
                cache=(cache["self_key"], cache["self_value"]),
                cache_update_index=None if grow_cache else step, append_to_cache=grow_cache,
                training=training, kernels=kernels.get("self_attention"))
            cache = {**cache, "self_key": self_key, "self_value": self_value}
        x = self.self_attention_residual(x, y, training=training)

        h = self.cross_attention_residual.sublayer_input(x)
        if cache is None:
            y = self.cross_attention(h, encoder_output, attention_mask=cross_attention_mask,
                                     training=training, return_attention_scores=return_attention,
                                     kernels=kernels.get("cross_attention"))
            if return_attention:
                y, weights["cross"] = y
        else:
            sentences = tf.shape(cache["cross_key"])[0]
            y, _ = self.cross_attention(
                tf.reshape(h, [sentences, -1, h.shape[-1]]),  # [sentences, K * T, d]
                attention_mask=cross_attention_mask,
                cache=(cache["cross_key"], cache["cross_value"]), training=training,
                kernels=kernels.get("cross_attention"))
            y = tf.reshape(y, [-1, h.shape[1] or tf.shape(h)[1], h.shape[-1]])
        x = self.cross_attention_residual(x, y, training=training)

        x = self.feed_forward_sublayer(x, training, kernels.get("feed_forward"))
        if return_attention:
            return x, {kind: tf.cast(w, tf.float32) for kind, w in weights.items()}
        return x if cache is None else (x, cache)
