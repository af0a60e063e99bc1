"""The Transformer encoder-decoder (paper section 3, Figure 1) as a keras.Model."""
from __future__ import annotations

import keras
import tensorflow as tf

from transformer_tf.config import PAD_ID, ModelConfig
from transformer_tf.decoding.model_driver import DecoderState
from transformer_tf.layers.decoder_layer import DecoderLayer
from transformer_tf.layers.encoder_layer import EncoderLayer
from transformer_tf.layers.masks import attention_mask, padding_mask
from transformer_tf.layers.position_encoding import (
    LearnedPositionEmbedding,
    SinusoidalPositionEncoding,
)
from transformer_tf.layers.shared_embedding import SharedEmbedding
from transformer_tf.models.contract import Seq2SeqModel


@keras.saving.register_keras_serializable(package="transformer_tf")
class Transformer(Seq2SeqModel):
    """Encoder-decoder Transformer for translation (a `Seq2SeqModel`, see models/contract.py).

    Args:
      config: a `ModelConfig` (or its `get_config()` dict).

    Call arguments:
      inputs: a pair (source_ids int [batch, source_length],
        target_input_ids int [batch, target_length]), padded with PAD_ID; the target
        input starts with BOS (teacher forcing).
      training: enables dropout.

    Returns:
      float32 logits [batch, target_length, target_vocab_size]; position t predicts
      the target token after target_input_ids[:, t].

    Training wraps it in `transformer_tf.training.trainer.Seq2SeqTrainer`, which owns the
    loss (label-smoothed cross-entropy over real target tokens).

    Inference uses `encode`, `init_cache` and `decode_step` (one token at a time, with
    the decoder self-attention cache and the encoder keys/values computed once).

    Example:
      >>> model = Transformer(get_preset("tiny").model)
      >>> logits = model((source_ids, target_input_ids))
    """

    family = "transformer"

    def __init__(self, config: ModelConfig | dict, **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = ModelConfig.from_config(config)
        self.config = config
        c = config
        policy = self.dtype_policy

        self.source_embedding = SharedEmbedding(
            c.vocab_size, c.d_model, c.scale_embeddings, name="source_embedding", dtype=policy)
        if c.embedding_sharing == "all":
            self.target_embedding = self.source_embedding
        else:
            self.target_embedding = SharedEmbedding(
                c.resolved_target_vocab_size, c.d_model, c.scale_embeddings,
                name="target_embedding", dtype=policy)
        if c.embedding_sharing == "none":
            self.output_projection = SharedEmbedding(
                c.resolved_target_vocab_size, c.d_model, False, name="output_projection",
                dtype=policy)
        else:
            self.output_projection = self.target_embedding

        if c.position_encoding == "sinusoidal":
            self.source_positions = SinusoidalPositionEncoding(
                c.max_position, name="position_encoding", dtype=policy)
            self.target_positions = self.source_positions
        else:
            self.source_positions = LearnedPositionEmbedding(
                c.max_position, c.d_model, name="source_positions", dtype=policy)
            self.target_positions = LearnedPositionEmbedding(
                c.max_position, c.d_model, name="target_positions", dtype=policy)
        self.source_dropout = keras.layers.Dropout(c.dropout, name="source_dropout", dtype=policy)
        self.target_dropout = keras.layers.Dropout(c.dropout, name="target_dropout", dtype=policy)

        layer_args = dict(
            d_model=c.d_model, d_ff=c.d_ff, num_heads=c.num_heads, key_dim=c.resolved_key_dim,
            value_dim=c.resolved_value_dim, dropout=c.dropout,
            attention_dropout=c.attention_dropout, ffn_dropout=c.ffn_dropout,
            norm_position=c.norm_position, layer_norm_epsilon=c.layer_norm_epsilon,
            dtype=policy,
        )
        # One attribute per layer (not a list): Keras' tracked lists are invisible to
        # tf.train.Checkpoint, which the training checkpoints and averaging rely on.
        for i in range(c.num_layers):
            setattr(self, f"encoder_layer_{i}", EncoderLayer(**layer_args, name=f"encoder_layer_{i}"))
        for i in range(c.resolved_num_decoder_layers):
            setattr(self, f"decoder_layer_{i}", DecoderLayer(**layer_args, name=f"decoder_layer_{i}"))
        # The source cursor's input (ModelConfig.source_cursor): a projection of the
        # encoder output at the next source token to copy.
        self.cursor_projection = None
        if c.source_cursor:
            self.cursor_projection = keras.layers.Dense(
                c.d_model, use_bias=False, name="cursor_projection", dtype=policy)
        # Pre-norm stacks end with a LayerNorm (their residual stream is never normalised).
        self.encoder_final_norm = self.decoder_final_norm = None
        if c.norm_position == "pre":
            self.encoder_final_norm = keras.layers.LayerNormalization(
                epsilon=c.layer_norm_epsilon, name="encoder_final_norm", dtype=policy)
            self.decoder_final_norm = keras.layers.LayerNormalization(
                epsilon=c.layer_norm_epsilon, name="decoder_final_norm", dtype=policy)

    @property
    def encoder_layers(self) -> list[EncoderLayer]:
        return [getattr(self, f"encoder_layer_{i}") for i in range(self.config.num_layers)]

    @property
    def decoder_layers(self) -> list[DecoderLayer]:
        return [getattr(self, f"decoder_layer_{i}")
                for i in range(self.config.resolved_num_decoder_layers)]

    # ------------------------------------------------------------------ building
    def build(self, input_shape=None):
        d = self.config.d_model
        hidden = (None, None, d)
        for layer in {id(l): l for l in (self.source_embedding, self.target_embedding,
                                         self.output_projection)}.values():
            layer.build()
        for positions in (self.source_positions, self.target_positions):
            positions.build(hidden)
        for layer in self.encoder_layers + self.decoder_layers:
            layer.build(hidden)
        for layer in (self.encoder_final_norm, self.decoder_final_norm, self.cursor_projection):
            if layer is not None:
                layer.build(hidden)
        self.built = True

    def _build_once(self):
        if not self.built:
            self.build()

    # ------------------------------------------------------------------ inference weights
    # In `layers.kernel_layout`'s layout: "encoder" and "decoder", per layer its
    # `inference_kernels()`; "output_kernel", W^T [d_model, vocab']. Kept (the contract's
    # `keep_inference_weights`), they save their re-laying on every call, mostly W^T's
    # transposition (a sizeable share of a short request at the `base` shape).
    INFERENCE_WEIGHT_PARTS = ("encoder", "decoder", "output_kernel")

    def prepare_inference_weights(self, part: str):
        self._build_once()  # inference_kernels() reads the weights before any layer call
        if part == "output_kernel":
            return self.output_projection.output_kernel()
        layers = self.encoder_layers if part == "encoder" else self.decoder_layers
        return [layer.inference_kernels() for layer in layers]

    # ------------------------------------------------------------------ contract sizes
    # (vocabulary sizes and maximum lengths: Seq2SeqModel's defaults, from the config)
    @property
    def model_width(self) -> int:
        return self.config.d_model

    # ------------------------------------------------------------------ training pass
    def call(self, inputs, training=None):
        source_ids, target_input_ids = self.check_inputs(inputs)
        return self.decode(target_input_ids, *self.encode(source_ids, training=training),
                           training=training)

    def encode(self, source_ids, training=False):
        """Encoder stack.

        Args:
          source_ids: int [batch, source_length], PAD_ID-padded.

        Returns:
          (encoder_output [batch, source_length, d_model], source_valid bool
          [batch, source_length] True at real tokens), and with `source_cursor` also
          source_ids int32 [batch, source_length] (the cursor compares tokens with them).
        """
        encoder_output, source_valid = self._encoder_stack(source_ids, training)
        if self.config.source_cursor:
            return encoder_output, source_valid, tf.cast(source_ids, tf.int32)
        return encoder_output, source_valid

    def decode(self, target_input_ids, encoder_output, source_valid, source_ids=None,
               training=False):
        """Decoder stack over a whole target prefix (teacher forcing).

        Args:
          target_input_ids: int [batch, target_length].
          encoder_output: [batch, source_length, d_model].
          source_valid: bool [batch, source_length].
          source_ids: int [batch, source_length]; needed with `source_cursor` only.

        Returns:
          float32 logits [batch, target_length, target_vocab_size].
        """
        return self._decoder_stack(target_input_ids, (encoder_output, source_valid, source_ids),
                                   training)

    def attention_weights(self, source_ids, target_input_ids):
        """Attention probabilities of one teacher-forced pass without dropout (see
        `Seq2SeqModel.attention_weights` for the structure): "encoder", "decoder" and
        "cross", one float32 [batch, num_heads, query_length, key_length] tensor per
        layer. The training and decoding paths never compute this structure."""
        source_ids, target_input_ids = self.check_inputs((source_ids, target_input_ids))
        weights = {"encoder": [], "decoder": [], "cross": []}
        encoder_output, source_valid = self._encoder_stack(source_ids, False, weights)
        self._decoder_stack(target_input_ids, (encoder_output, source_valid, source_ids),
                            False, weights)
        return weights

    def _encoder_stack(self, source_ids, training, weights=None):
        """`encode`; with a `weights` dict, each layer's self-attention weights are also
        appended to weights["encoder"]."""
        self._build_once()  # the whole model, before any of its layers builds itself
        source_valid = padding_mask(source_ids, PAD_ID)
        x = self.source_embedding(source_ids)
        x = self.source_dropout(x + self.source_positions(x), training=training)
        # (batch, 1 or source, source)
        mask = attention_mask(source_valid, source_valid, window=self.config.attention_window)
        # Training keeps the plain kernels (gradients flow to the variables themselves).
        per_layer = ([None] * len(self.encoder_layers) if training
                     else self.inference_weights("encoder"))
        for layer, kernels in zip(self.encoder_layers, per_layer):
            if weights is None:
                x = layer(x, attention_mask=mask, training=training, kernels=kernels)
            else:
                x, layer_weights = layer(x, attention_mask=mask, training=training,
                                         return_attention=True, kernels=kernels)
                weights["encoder"].append(layer_weights)
        if self.encoder_final_norm is not None:
            x = self.encoder_final_norm(x)
        return x, source_valid

    def _decoder_stack(self, target_input_ids, encoded, training, weights=None):
        """`decode` of (encoder_output, source_valid, source_ids); with a `weights` dict,
        each layer's self- and encoder-decoder attention weights are also appended to
        weights["decoder"] and weights["cross"]."""
        self._build_once()
        encoder_output, source_valid, _ = encoded
        target_valid = padding_mask(target_input_ids, PAD_ID)
        x = self.target_dropout(self.decoder_inputs(target_input_ids, encoded),
                                training=training)
        self_mask = attention_mask(target_valid, target_valid, causal=True,
                                   window=self.config.attention_window)
        cross_mask = source_valid[:, None, :]  # (batch, 1, source)
        # Training keeps the plain kernels (gradients flow to the variables themselves).
        per_layer = ([None] * len(self.decoder_layers) if training
                     else self.inference_weights("decoder"))
        for layer, kernels in zip(self.decoder_layers, per_layer):
            if weights is None:
                x = layer(x, encoder_output, self_mask, cross_mask, training=training,
                          kernels=kernels)
            else:
                x, layer_weights = layer(x, encoder_output, self_mask, cross_mask,
                                         training=training, return_attention=True,
                                         kernels=kernels)
                for kind, value in layer_weights.items():
                    weights[kind].append(value)
        return self._logits(x)

    def decoder_inputs(self, target_input_ids, encoded):
        """The decoder stack's input before dropout: target embeddings + positions, and
        with `source_cursor` the cursor projection of the encoder output at each
        position's cursor.

        Args:
          target_input_ids: int [batch, target_length].
          encoded: (encoder_output, source_valid, source_ids or None).

        Returns:
          [batch, target_length, d_model].
        """
        encoder_output, source_valid, source_ids = encoded
        x = self.target_embedding(target_input_ids)
        x = x + self.target_positions(x)
        if self.cursor_projection is None:
            return x
        if source_ids is None:
            raise ValueError("a model with source_cursor decodes with the source ids "
                             "(decode(..., source_ids=...))")
        in_source = tokens_in_source(target_input_ids, source_ids)
        cursor = cursor_positions(tf.cumsum(in_source, axis=1), source_valid)
        return x + self.cursor_projection(tf.gather(encoder_output, cursor, batch_dims=1))

    def _logits(self, x, output_kernel=None):
        if self.decoder_final_norm is not None:
            x = self.decoder_final_norm(x)
        return self.output_projection.logits(x, kernel=output_kernel)

    # ------------------------------------------------------------------ inference
    def init_cache(self, encoded, max_length) -> DecoderState:
        """The decoding state for outputs of at most `max_length` target positions.

        Args:
          encoded: `encode`'s (encoder_output, source_valid[, source_ids]).
          max_length: int scalar, positions of the self-attention caches; None: caches
            that start empty and grow by one position per step (`per_beam_grows`; graph
            mode: a step then costs its own length, not max_length).

        Returns:
          DecoderState with
            per_sentence: {"source_valid": bool [batch, source_length], "layers": per
              decoder layer {"cross_key", "cross_value"} [batch, heads, source_length,
              d_k|d_v]} (the encoder keys/values, computed once);
            per_beam: {"layers": per decoder layer {"self_key", "self_value"} zeros [batch,
              heads, max_length (or 0), d_k|d_v]}; with `source_cursor` also "cursor"
              int32 [batch], the tokens so far that occur in the source (zeros);
            constants: weights prepared once per search (TF would otherwise redo it at
              every step): "output_kernel" [d_model, vocab'], the output projection's
              W^T, and "layers", per decoder layer its `inference_kernels()` (vocab'
              and the kernels' widths: `layers.kernel_layout`).
            With `source_cursor`, per_sentence also holds "source_ids" int32 [batch,
            source_length] and "cursor_memory" [batch, source_length, d_model] (the
            cursor projection of every encoder output, computed once).
        """
        self._build_once()
        encoder_output, source_valid = encoded[:2]
        batch_size = tf.shape(encoder_output)[0]
        cross, own = [], []
        grows = max_length is None
        kernels = self.inference_weights("decoder")
        for layer, layer_kernels in zip(self.decoder_layers, kernels):
            self_key, self_value = layer.self_attention.empty_cache(
                batch_size, 0 if grows else max_length)
            cross_key, cross_value = layer.cross_attention.project_key_value(
                encoder_output, kernels=layer_kernels["cross_attention"])
            cross.append({"cross_key": cross_key, "cross_value": cross_value})
            own.append({"self_key": self_key, "self_value": self_value})
        per_sentence = {"source_valid": source_valid, "layers": cross}
        per_beam = {"layers": own}
        if self.cursor_projection is not None:
            per_sentence["source_ids"] = encoded[2]
            per_sentence["cursor_memory"] = self.cursor_projection(encoder_output)
            per_beam["cursor"] = tf.zeros([batch_size], tf.int32)
        return DecoderState(
            per_sentence=per_sentence,
            per_beam=per_beam,
            constants={"output_kernel": self.inference_weights("output_kernel"),
                       "layers": kernels},
            per_beam_grows=grows)

    def decode_step(self, ids, step, state: DecoderState):
        """One decoding step.

        Args:
          ids: int [batch], the token at position `step` (BOS at step 0).
          step: int scalar, the position of `ids`.
          state: from `init_cache` or a previous step; its `per_sentence` may have one row
            per sentence for K rows of `ids` (a beam search's beams, DecoderState).

        Returns:
          (float32 logits [batch, target_vocab_size] for position step + 1, the state with
          the self-attention caches updated at `step`).
        """
        ids = tf.cast(ids, tf.int32)[:, None]  # (batch, 1)
        x = self.target_embedding(ids)
        x = x + self.target_positions(x, offset=step)
        new_per_beam = {}
        if self.cursor_projection is not None:
            source = state.per_sentence
            sentences = tf.shape(source["source_ids"])[0]
            beams = tf.reshape(ids, [sentences, -1])  # (sentences, K): a sentence's beams
            count = state.per_beam["cursor"] + tf.reshape(
                tokens_in_source(beams, source["source_ids"]), [-1])
            cursor = cursor_positions(tf.reshape(count, [sentences, -1]), source["source_valid"])
            copied = tf.gather(source["cursor_memory"], cursor, batch_dims=1)  # (sentences, K, d)
            x = x + tf.reshape(copied, tf.shape(x))
            new_per_beam["cursor"] = count
        # Keys at positions 0..step exist; (1, 1, key_length) broadcasts over the batch.
        if state.per_beam_grows:  # the cache will hold exactly positions 0..step
            key_length = step + 1
        else:
            key_length = tf.shape(state.per_beam["layers"][0]["self_key"])[2]
        self_mask = tf.range(key_length) <= step
        if self.config.attention_window is not None:
            self_mask &= tf.range(key_length) >= step - self.config.attention_window
        self_mask = self_mask[None, None, :]
        cross_mask = state.per_sentence["source_valid"][:, None, :]
        new_layers = []
        for layer, cross, own, kernels in zip(self.decoder_layers, state.per_sentence["layers"],
                                              state.per_beam["layers"],
                                              state.constants["layers"]):
            x, layer_cache = layer(x, None, self_mask, cross_mask, cache={**cross, **own},
                                   step=step, grow_cache=state.per_beam_grows,
                                   kernels=kernels)
            new_layers.append({k: layer_cache[k] for k in own})
        new_per_beam["layers"] = new_layers
        logits = self._logits(x, state.constants["output_kernel"])[:, 0, :]
        return logits, state._replace(per_beam=new_per_beam)


def tokens_in_source(target_ids, source_ids) -> tf.Tensor:
    """int32 [batch, target_length]: 1 where a target token occurs among its row's real
    (non-PAD) source tokens, else 0. (batch, target_length) and (batch, source_length)."""
    target_ids = tf.cast(target_ids, tf.int32)
    source_ids = tf.cast(source_ids, tf.int32)
    same = tf.equal(target_ids[:, :, None], source_ids[:, None, :])
    same &= tf.not_equal(source_ids, PAD_ID)[:, None, :]
    return tf.cast(tf.reduce_any(same, axis=-1), tf.int32)


def cursor_positions(counts, source_valid) -> tf.Tensor:
    """int32 [batch, length]: the source position after `counts` copied tokens, clipped
    to the last real source token. counts int32 [batch, length]; source_valid bool
    [batch, source_length]."""
    last = tf.reduce_sum(tf.cast(source_valid, tf.int32), axis=1, keepdims=True) - 1
    return tf.minimum(counts, tf.maximum(last, 0))
