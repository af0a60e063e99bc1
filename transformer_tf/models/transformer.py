"""The Transformer encoder-decoder (paper section 3, Figure 1) as a keras.Model."""
from __future__ import annotations

import keras
import tensorflow as tf

from transformer_tf.config import PAD_ID, ModelConfig
from transformer_tf.decoding.model_search import DecoderState
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
        for norm in (self.encoder_final_norm, self.decoder_final_norm):
            if norm is not None:
                norm.build(hidden)
        self.built = True

    # ------------------------------------------------------------------ contract sizes
    # (vocabulary sizes and maximum lengths: Seq2SeqModel's defaults, from the config)
    @property
    def model_width(self) -> int:
        return self.config.d_model

    # ------------------------------------------------------------------ training pass
    def call(self, inputs, training=None):
        source_ids, target_input_ids = self.check_inputs(inputs)
        encoder_output, source_valid = self.encode(source_ids, training=training)
        return self.decode(target_input_ids, encoder_output, source_valid, training=training)

    def encode(self, source_ids, training=False):
        """Encoder stack.

        Args:
          source_ids: int [batch, source_length], PAD_ID-padded.

        Returns:
          (encoder_output [batch, source_length, d_model], source_valid bool
          [batch, source_length] True at real tokens).
        """
        return self._encoder_stack(source_ids, training)

    def decode(self, target_input_ids, encoder_output, source_valid, training=False):
        """Decoder stack over a whole target prefix (teacher forcing).

        Args:
          target_input_ids: int [batch, target_length].
          encoder_output: [batch, source_length, d_model].
          source_valid: bool [batch, source_length].

        Returns:
          float32 logits [batch, target_length, target_vocab_size].
        """
        return self._decoder_stack(target_input_ids, encoder_output, source_valid, training)

    def attention_weights(self, source_ids, target_input_ids):
        """Attention probabilities of one teacher-forced pass without dropout (see
        `Seq2SeqModel.attention_weights` for the structure): "encoder", "decoder" and
        "cross", one float32 [batch, num_heads, query_length, key_length] tensor per
        layer. The training and decoding paths never compute this structure."""
        source_ids, target_input_ids = self.check_inputs((source_ids, target_input_ids))
        weights = {"encoder": [], "decoder": [], "cross": []}
        encoder_output, source_valid = self._encoder_stack(source_ids, False, weights)
        self._decoder_stack(target_input_ids, encoder_output, source_valid, False, weights)
        return weights

    def _encoder_stack(self, source_ids, training, weights=None):
        """`encode`; with a `weights` dict, each layer's self-attention weights are also
        appended to weights["encoder"]."""
        source_valid = padding_mask(source_ids, PAD_ID)
        x = self.source_embedding(source_ids)
        x = self.source_dropout(x + self.source_positions(x), training=training)
        # (batch, 1 or source, source)
        mask = attention_mask(source_valid, source_valid, window=self.config.attention_window)
        for layer in self.encoder_layers:
            if weights is None:
                x = layer(x, attention_mask=mask, training=training)
            else:
                x, layer_weights = layer(x, attention_mask=mask, training=training,
                                         return_attention=True)
                weights["encoder"].append(layer_weights)
        if self.encoder_final_norm is not None:
            x = self.encoder_final_norm(x)
        return x, source_valid

    def _decoder_stack(self, target_input_ids, encoder_output, source_valid, training,
                       weights=None):
        """`decode`; with a `weights` dict, each layer's self- and encoder-decoder
        attention weights are also appended to weights["decoder"] and weights["cross"]."""
        target_valid = padding_mask(target_input_ids, PAD_ID)
        x = self.target_embedding(target_input_ids)
        x = self.target_dropout(x + self.target_positions(x), training=training)
        self_mask = attention_mask(target_valid, target_valid, causal=True,
                                   window=self.config.attention_window)
        cross_mask = source_valid[:, None, :]  # (batch, 1, source)
        for layer in self.decoder_layers:
            if weights is None:
                x = layer(x, encoder_output, self_mask, cross_mask, training=training)
            else:
                x, layer_weights = layer(x, encoder_output, self_mask, cross_mask,
                                         training=training, return_attention=True)
                for kind, value in layer_weights.items():
                    weights[kind].append(value)
        return self._logits(x)

    def _logits(self, x, output_kernel=None):
        if self.decoder_final_norm is not None:
            x = self.decoder_final_norm(x)
        return self.output_projection.logits(x, kernel=output_kernel)

    # ------------------------------------------------------------------ inference
    def init_cache(self, encoded, max_length) -> DecoderState:
        """The decoding state for outputs of at most `max_length` target positions.

        Args:
          encoded: `encode`'s (encoder_output, source_valid).
          max_length: int scalar, positions of the self-attention caches; None: caches
            that start empty and grow by one position per step (`per_beam_grows`; graph
            mode: a step then costs its own length, not max_length).

        Returns:
          DecoderState with
            per_sentence: {"source_valid": bool [batch, source_length], "layers": per
              decoder layer {"cross_key", "cross_value"} [batch, heads, source_length,
              d_k|d_v]} (the encoder keys/values, computed once);
            per_beam: per decoder layer {"self_key", "self_value"} zeros [batch, heads,
              max_length (or 0), d_k|d_v];
            constants: {"output_kernel": [d_model, vocab]}, the output projection's W^T
              prepared once per search (TF would otherwise redo it at every step).
        """
        encoder_output, source_valid = encoded
        batch_size = tf.shape(encoder_output)[0]
        cross, own = [], []
        grows = max_length is None
        for layer in self.decoder_layers:
            self_key, self_value = layer.self_attention.empty_cache(
                batch_size, 0 if grows else max_length)
            cross_key, cross_value = layer.cross_attention.project_key_value(encoder_output)
            cross.append({"cross_key": cross_key, "cross_value": cross_value})
            own.append({"self_key": self_key, "self_value": self_value})
        return DecoderState(
            per_sentence={"source_valid": source_valid, "layers": cross},
            per_beam=own,
            constants={"output_kernel": self.output_projection.output_kernel()},
            per_beam_grows=grows)

    def decode_step(self, ids, step, state: DecoderState):
        """One decoding step.

        Args:
          ids: int [batch], the token at position `step` (BOS at step 0).
          step: int scalar, the position of `ids`.
          state: from `init_cache` or a previous step.

        Returns:
          (float32 logits [batch, target_vocab_size] for position step + 1, the state with
          the self-attention caches updated at `step`).
        """
        ids = tf.cast(ids, tf.int32)[:, None]  # (batch, 1)
        x = self.target_embedding(ids)
        x = x + self.target_positions(x, offset=step)
        # Keys at positions 0..step exist; (1, 1, key_length) broadcasts over the batch.
        if state.per_beam_grows:  # the cache will hold exactly positions 0..step
            key_length = step + 1
        else:
            key_length = tf.shape(state.per_beam[0]["self_key"])[2]
        self_mask = tf.range(key_length) <= step
        if self.config.attention_window is not None:
            self_mask &= tf.range(key_length) >= step - self.config.attention_window
        self_mask = self_mask[None, None, :]
        cross_mask = state.per_sentence["source_valid"][:, None, :]
        new_per_beam = []
        for layer, cross, own in zip(self.decoder_layers, state.per_sentence["layers"],
                                     state.per_beam):
            x, layer_cache = layer(x, None, self_mask, cross_mask, cache={**cross, **own},
                                   step=step, grow_cache=state.per_beam_grows)
            new_per_beam.append({k: layer_cache[k] for k in own})
        logits = self._logits(x, state.constants["output_kernel"])[:, 0, :]
        return logits, state._replace(per_beam=new_per_beam)
