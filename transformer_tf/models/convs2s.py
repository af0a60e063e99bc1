"""ConvS2S, the convolutional encoder-decoder of Gehring et al. 2017 ("Convolutional
Sequence to Sequence Learning"), the model the Transformer paper compares with in Table 2."""
from __future__ import annotations

import keras
import tensorflow as tf

from transformer_tf.config import PAD_ID, ConvS2SConfig
from transformer_tf.decoding.model_driver import DecoderState
from transformer_tf.layers.glu_block import ConvGLUBlock, scaled_residual
from transformer_tf.layers.gradient_scale import scale_gradient
from transformer_tf.layers.masks import padding_mask
from transformer_tf.layers.multistep_attention import MultiStepAttention
from transformer_tf.layers.position_encoding import LearnedPositionEmbedding
from transformer_tf.layers.weight_norm import WeightNormConv1D, convs2s_stddev
from transformer_tf.models.contract import Seq2SeqModel

EMBEDDING_STDDEV = 0.1


@keras.saving.register_keras_serializable(package="transformer_tf")
class ConvS2S(Seq2SeqModel):
    """Convolutional encoder-decoder with multi-step attention (a `Seq2SeqModel`).

    Encoder: e = dropout(token + learned position embeddings) (width f); a linear map
    f -> d; blocks of convolution + GLU + scaled residual (centred convolutions, padding
    zeroed before each); a linear map back d -> f gives z. The attention reads keys z and
    values z + e; the gradient reaching z is divided by the number of attention layers.

    Decoder: g = dropout(token + position embeddings); f -> d; causal blocks, each with
    (optionally) its own attention added to the GLU output before the residual sum; then
    d -> decoder_output_dim, dropout, and the output projection to the vocabulary.

    Every convolution and linear map is weight-normalised and initialised by ConvS2S's rule
    (layers/weight_norm.py); embeddings N(0, 0.1).

    Args:
      config: a `ConvS2SConfig` (or its `get_config()` dict).

    Call arguments / returns: as for every `Seq2SeqModel` (models/contract.py): a pair
    (source_ids [batch, S], target_input_ids [batch, T]) -> float32 logits [batch, T, V].

    Decoding keeps, per decoder block, its last k - 1 inputs (`per_beam`, reordered with
    the beams) and the encoder's keys, values and source mask (`per_sentence`): a step
    costs one position of every block, not a pass over the prefix.
    """

    family = "convs2s"

    def __init__(self, config: ConvS2SConfig | dict, **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = ConvS2SConfig.from_config(config)
        self.config = c = config
        policy = self.dtype_policy
        keep = 1.0 - c.dropout
        f = c.embedding_dim

        def embedding(vocab, name):
            return keras.layers.Embedding(
                vocab, f, embeddings_initializer=keras.initializers.RandomNormal(
                    stddev=EMBEDDING_STDDEV), name=name, dtype=policy)

        def positions(name):
            return LearnedPositionEmbedding(c.max_position, f, stddev=EMBEDDING_STDDEV,
                                            name=name, dtype=policy)

        def linear(units, fan_in, name, keep_probability=1.0):
            return WeightNormConv1D(units, 1, convs2s_stddev(fan_in, keep_probability),
                                    name=name, dtype=policy)

        self.source_embedding = embedding(c.vocab_size, "source_embedding")
        self.target_embedding = embedding(c.resolved_target_vocab_size, "target_embedding")
        self.source_positions = positions("source_positions")
        self.target_positions = positions("target_positions")
        self.source_dropout = keras.layers.Dropout(c.dropout, name="source_dropout", dtype=policy)
        self.target_dropout = keras.layers.Dropout(c.dropout, name="target_dropout", dtype=policy)
        self.output_dropout = keras.layers.Dropout(c.dropout, name="output_dropout", dtype=policy)

        encoder_first, encoder_last = c.encoder_layers[0][0], c.encoder_layers[-1][0]
        decoder_first, decoder_last = c.decoder_layers[0][0], c.decoder_layers[-1][0]
        self.encoder_input = linear(encoder_first, f, "encoder_input", keep)
        self.encoder_output = linear(f, encoder_last, "encoder_output")
        self.decoder_input = linear(decoder_first, f, "decoder_input", keep)
        self.decoder_output = linear(c.decoder_output_dim, decoder_last, "decoder_output")
        self.output_projection = linear(c.resolved_target_vocab_size, c.decoder_output_dim,
                                        "output_projection", keep)
        # One attribute per layer (not a list): tf.train.Checkpoint tracks attributes.
        for i, (width, kernel) in enumerate(c.encoder_layers):
            setattr(self, f"encoder_block_{i}", ConvGLUBlock(
                width, kernel, causal=False, dropout=c.dropout, name=f"encoder_block_{i}",
                dtype=policy))
        for i, ((width, kernel), attends) in enumerate(
                zip(c.decoder_layers, c.resolved_decoder_attention)):
            setattr(self, f"decoder_block_{i}", ConvGLUBlock(
                width, kernel, causal=True, dropout=c.dropout, name=f"decoder_block_{i}",
                dtype=policy))
            if attends:
                setattr(self, f"decoder_attention_{i}", MultiStepAttention(
                    f, name=f"decoder_attention_{i}", dtype=policy))
        self.attention_layer_count = sum(c.resolved_decoder_attention)

    @property
    def encoder_blocks(self) -> list[ConvGLUBlock]:
        return [getattr(self, f"encoder_block_{i}") for i in range(len(self.config.encoder_layers))]

    @property
    def decoder_blocks(self) -> list[tuple[ConvGLUBlock, MultiStepAttention | None]]:
        """(block, its attention or None) per decoder block."""
        return [(getattr(self, f"decoder_block_{i}"), getattr(self, f"decoder_attention_{i}", None))
                for i in range(len(self.config.decoder_layers))]

    # ------------------------------------------------------------------ building
    def build(self, input_shape=None):
        c = self.config
        f = c.embedding_dim

        def width(w):
            return (None, None, w)

        for layer in (self.source_embedding, self.target_embedding):
            layer.build((None, None))
        for layer in (self.source_positions, self.target_positions):
            layer.build(width(f))
        self.encoder_input.build(width(f))
        self.decoder_input.build(width(f))
        in_width = c.encoder_layers[0][0]
        for block, (out_width, _) in zip(self.encoder_blocks, c.encoder_layers):
            block.build(width(in_width))
            in_width = out_width
        self.encoder_output.build(width(in_width))
        in_width = c.decoder_layers[0][0]
        for (block, attention), (out_width, _) in zip(self.decoder_blocks, c.decoder_layers):
            block.build(width(in_width))
            if attention is not None:
                attention.build(width(out_width))
            in_width = out_width
        self.decoder_output.build(width(in_width))
        self.output_projection.build(width(c.decoder_output_dim))
        self.built = True

    # ------------------------------------------------------------------ contract sizes
    # (vocabulary sizes and maximum lengths: Seq2SeqModel's defaults, from the config)
    @property
    def model_width(self) -> int:
        return self.config.embedding_dim

    # ------------------------------------------------------------------ training pass
    def call(self, inputs, training=None):
        source_ids, target_input_ids = self.check_inputs(inputs)
        return self.decode(target_input_ids, self.encode(source_ids, training=training),
                           training=training)

    def encode(self, source_ids, training=False):
        """Encoder stack.

        Args:
          source_ids: int [batch, source_length], PAD_ID-padded.

        Returns:
          {"keys": z, "values": z + e} [batch, source_length, f] (zero at padding) and
          {"source_valid": bool [batch, source_length]}, in one dict.
        """
        source_valid = padding_mask(source_ids, PAD_ID)
        valid = tf.cast(source_valid, self.compute_dtype)[:, :, None]
        tokens = self.source_embedding(source_ids)
        embedded = self.source_dropout(tokens + self.source_positions(tokens),
                                       training=training) * valid  # e
        x = self.encoder_input(embedded)
        for block in self.encoder_blocks:
            x = block(x, valid=source_valid, training=training)
        keys = self.encoder_output(x) * valid  # z
        keys = scale_gradient(keys, 1.0 / self.attention_layer_count)
        return {"keys": keys, "values": keys + embedded, "source_valid": source_valid}

    def _target_embedding(self, target_ids, offset=0, training=False):
        """g: dropout(token + position embeddings) [batch, length, f]."""
        tokens = self.target_embedding(target_ids)
        return self.target_dropout(tokens + self.target_positions(tokens, offset=offset),
                                   training=training)

    def decode(self, target_input_ids, encoded, training=False, return_weights=False):
        """Decoder stack over a whole target prefix (teacher forcing).

        Args:
          target_input_ids: int [batch, target_length].
          encoded: `encode`'s output.
          return_weights: also return the attention weights, a list with one float32
            [batch, target_length, source_length] per attending block.

        Returns:
          float32 logits [batch, target_length, target_vocab_size] (and the weights).
        """
        g = self._target_embedding(target_input_ids, training=training)
        x = self.decoder_input(g)
        all_weights = []
        for block, attention in self.decoder_blocks:
            residual = block.residual(x)
            h = block.gated_conv(x, training=training)
            if attention is not None:
                h, weights = attention(h, g, encoded["keys"], encoded["values"],
                                       encoded["source_valid"], return_weights=True)
                all_weights.append(weights)
            x = scaled_residual(h, residual)
        logits = self._logits(x, training)
        return (logits, all_weights) if return_weights else logits

    def _logits(self, x, training=False, kernels=None):
        kernels = kernels or {}
        x = self.decoder_output(x, kernel=kernels.get("decoder_output"))
        x = self.output_dropout(x, training=training)
        return tf.cast(self.output_projection(x, kernel=kernels.get("output_projection")),
                       tf.float32)

    def attention_weights(self, source_ids, target_input_ids):
        """The encoder-decoder attention of one teacher-forced pass (inference mode).

        Returns:
          {"cross": [one float32 [batch, 1, target_length, source_length] per attending
          decoder block, in order]} (ConvS2S's attention has a single head). ConvS2S has
          no self-attention, so no "encoder" or "decoder" entries.
        """
        source_ids, target_input_ids = self.check_inputs((source_ids, target_input_ids))
        _, weights = self.decode(target_input_ids, self.encode(source_ids), return_weights=True)
        return {"cross": [w[:, None] for w in weights]}

    # ------------------------------------------------------------------ inference
    def init_cache(self, encoded, max_length) -> DecoderState:
        """The decoding state (`max_length` is not needed: the state has a fixed size).

        Returns:
          DecoderState with
            per_sentence: `encode`'s {"keys", "values", "source_valid"};
            per_beam: per decoder block, its last k - 1 inputs [batch, k - 1, in_width]
              (zeros at the start: the causal convolution's left padding);
            constants: the decoder's weight-normalised kernels g * v / ||v||, computed
              once per search instead of at every step (the output projection alone is
              embedding_dim x vocabulary), or once per translator when kept.
        """
        del max_length
        batch_size = tf.shape(encoded["keys"])[0]
        buffers = []
        in_width = self.config.decoder_layers[0][0]
        for width, kernel in self.config.decoder_layers:
            buffers.append(tf.zeros([batch_size, kernel - 1, in_width], self.compute_dtype))
            in_width = width
        return DecoderState(per_sentence=encoded, per_beam=buffers,
                            constants=self.inference_weights("decoder"))

    # The decoder's weight-normalised kernels, kept by a translator (the contract's
    # `keep_inference_weights`) instead of being derived again for every search.
    INFERENCE_WEIGHT_PARTS = ("decoder",)

    def prepare_inference_weights(self, part: str):
        if part != "decoder":
            raise ValueError(f"ConvS2S has no inference weights {part!r}")
        return {"decoder_input": self.decoder_input.kernel(),
                "decoder_output": self.decoder_output.kernel(),
                "output_projection": self.output_projection.kernel(),
                "blocks": [block.kernels() for block, _ in self.decoder_blocks],
                "attention": [attention.kernels() if attention is not None else {}
                              for _, attention in self.decoder_blocks]}

    def decode_step(self, ids, step, state: DecoderState):
        """One decoding step: ids int [batch] at position `step` -> (float32 logits
        [batch, target_vocab_size] for position step + 1, state with the input buffers
        shifted by one). `state.per_sentence` may have one row per sentence for K rows of
        `ids` (DecoderState)."""
        encoded, kernels = state.per_sentence, state.constants
        sentences = tf.shape(encoded["keys"])[0]

        def by_sentence(t):  # (sentences * K, 1, width) -> (sentences, K, width): a
            # sentence's beams attend as K query positions of its row of `encoded`
            return tf.reshape(t, [sentences, -1, t.shape[-1]])

        g = self._target_embedding(tf.cast(ids, tf.int32)[:, None], offset=step)
        x = self.decoder_input(g, kernel=kernels["decoder_input"])  # (batch, 1, d)
        new_buffers = []
        for (block, attention), buffer, block_kernels, attention_kernels in zip(
                self.decoder_blocks, state.per_beam, kernels["blocks"], kernels["attention"]):
            window = tf.concat([buffer, x], axis=1)  # (batch, k, in_width), oldest first
            new_buffers.append(window[:, 1:])
            residual = block.residual(x, block_kernels)
            h = block.gated_conv_window(window, block_kernels)
            if attention is not None:
                h = tf.reshape(attention(by_sentence(h), by_sentence(g), encoded["keys"],
                                         encoded["values"], encoded["source_valid"],
                                         kernels=attention_kernels), [-1, 1, h.shape[-1]])
            x = scaled_residual(h, residual)
        return self._logits(x, kernels=kernels)[:, 0, :], state._replace(per_beam=new_buffers)
