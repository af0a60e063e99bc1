"""The sequence-to-sequence contract: what data, training, search, export and serving
need from a model family (the Transformer, ConvS2S, a test's toy model ...).

A model is a `keras.Model` subclass of `Seq2SeqModel` that implements:

    call((source_ids [B, S], target_input_ids [B, T]), training) -> logits [B, T, V]
        Teacher forcing: position t predicts the target token after target_input_ids[:, t].
        Ids are int, PAD_ID-padded; source = tokens + EOS, target input = BOS + tokens.
    encode(source_ids [B, S], training=False) -> encoded
        Any nested structure of tensors; only the model's own `init_cache` reads it.
    init_cache(encoded, max_length) -> DecoderState
        The decoding state for outputs of at most `max_length` tokens. The model declares
        which tensors are `per_sentence` (fixed: one row per sentence, shared by its
        beams), `per_beam` (updated every step: reordered with the beams) and `constants`
        (no batch dimension).
        `max_length` None asks for a state that grows with the output instead, where the
        model has one (the Transformer's caches; `per_beam_grows` then says so); a model
        with a fixed-size state ignores it.
    decode_step(ids [B], step, state) -> (logits [B, V], DecoderState)
        `ids` is the token at position `step` (BOS at step 0); the logits predict position
        step + 1. Only `per_beam` may change; the new state keeps its structure, and its
        shapes unless `per_beam_grows`. In a beam search B = sentences x K while
        `per_sentence` keeps one row per sentence (rows b * K ... b * K + K - 1 of `ids`
        are sentence b's beams; `decoding.model_driver.DecoderState`).

and the properties `source_vocab_size`, `target_vocab_size`, `max_source_length`,
`max_target_length` (largest sequence lengths, specials included; defaults read the
config's `vocab_size`, `resolved_target_vocab_size` and `max_position`), `model_width`
(the width d whose d^-0.5 scales the paper's learning-rate schedule), plus `config` (a
serialisable config dataclass) and the class attribute `family` (its name in run
directories, see `transformer_tf.models.registry`).

Optionally, `attention_weights(source_ids, target_input_ids)` returns the attention
probabilities of one teacher-forced pass for inspection (see its docstring; the kinds
are `ATTENTION_KINDS`). It is never on the training or decoding path.

Optionally, a model names in `INFERENCE_WEIGHT_PARTS` the weights inference would
otherwise re-arrange at every call (the Transformer's laid-out kernels and W^T, ConvS2S'
weight-normalised decoder kernels), prepares each part in `prepare_inference_weights(part)`
and reads them through `inference_weights(part)`. `keep_inference_weights()` then
prepares them once and keeps them in variables, which it returns;
`keeps_inference_weights` says whether it has. The kept copies are a snapshot:
`rundir.checkpoints.load_weights` refreshes them, and a model that still trains never
keeps them. `inference.translator` calls it.

Losses are not part of a model: `transformer_tf.training` owns them, so a model has no
training knob (label smoothing lives in TrainingConfig).
"""
from __future__ import annotations

import keras
import tensorflow as tf

from transformer_tf.decoding.model_driver import DecoderState

__all__ = ["ATTENTION_KINDS", "DecoderState", "Seq2SeqModel", "check_ids"]

# What `Seq2SeqModel.attention_weights` may return, by key:
#   "encoder": source positions attending to source positions (encoder self-attention);
#   "decoder": target input positions attending to earlier ones (decoder self-attention);
#   "cross":   target input positions attending to source positions (encoder-decoder).
ATTENTION_KINDS = ("encoder", "decoder", "cross")


def check_ids(ids, vocab_size: int, max_length: int, name: str) -> tf.Tensor:
    """int32 `ids` [batch, length] after rank, dtype, range and length checks whose
    messages say what was expected (graph-mode assertions for the value checks). Takes
    tensors or array-likes."""
    ids = tf.convert_to_tensor(ids)
    if ids.shape.rank is not None and ids.shape.rank != 2:
        raise ValueError(
            f"{name}: expected token ids of shape [batch, length], got shape {ids.shape}")
    if not ids.dtype.is_integer:
        raise TypeError(f"{name}: expected integer token ids, got dtype {ids.dtype.name}")
    ids = tf.cast(ids, tf.int32)
    checks = [
        tf.debugging.assert_non_negative(ids, message=f"{name}: token ids must be >= 0"),
        tf.debugging.assert_less(
            ids, vocab_size, message=f"{name}: token ids must be < vocabulary size {vocab_size}"),
        tf.debugging.assert_less_equal(
            tf.shape(ids)[1], max_length,
            message=f"{name}: length exceeds the model's maximum length {max_length}"),
    ]
    with tf.control_dependencies(checks):
        return tf.identity(ids)


class Seq2SeqModel(keras.Model):
    """Base class of the model families; see the module docstring for the contract.

    Subclasses set `family`, store their config dataclass as `self.config`, and implement
    the methods below. `get_config`/`from_config` round-trip through that config.
    """

    family: str = ""

    # ---------------------------------------------------------------- to implement
    def encode(self, source_ids, training=False):
        raise NotImplementedError

    def init_cache(self, encoded, max_length) -> DecoderState:
        raise NotImplementedError

    def decode_step(self, ids, step, state: DecoderState):
        raise NotImplementedError

    # ---------------------------------------------------------------- optional
    # The parts of the weights that inference re-arranges (laid-out kernels, W^T,
    # weight-normalised kernels ...), each prepared by `prepare_inference_weights(part)`.
    INFERENCE_WEIGHT_PARTS: tuple = ()

    def prepare_inference_weights(self, part: str):
        """`part`'s weights as inference uses them, computed now from the model's weights:
        nested tensors, None leaves allowed. Override with INFERENCE_WEIGHT_PARTS."""
        raise NotImplementedError(f"{type(self).__name__} prepares no inference weights")

    def inference_weights(self, part: str):
        """`part`'s prepared weights: the kept snapshot (as tensors) once
        `keep_inference_weights` has run, else prepared now."""
        kept = self.__dict__.get("_kept_inference_weights")
        if kept is None:
            return self.prepare_inference_weights(part)
        return tf.nest.map_structure(
            lambda v: None if v is None else tf.convert_to_tensor(v), kept[part])

    def keep_inference_weights(self) -> list:
        """Prepares every part of INFERENCE_WEIGHT_PARTS once and keeps it in variables (a
        snapshot of the current weights; another call refreshes them in place), so that a
        search no longer prepares them at every call. Costs their memory. Returns the
        variables: untracked by Keras and by checkpoints (a module exporting the model
        tracks them); none for a model without parts."""
        if not self.INFERENCE_WEIGHT_PARTS:
            return []
        fresh = {part: self.prepare_inference_weights(part)
                 for part in self.INFERENCE_WEIGHT_PARTS}
        kept = self.__dict__.get("_kept_inference_weights")
        if kept is None:
            # Set in __dict__, where neither Keras nor tf.train.Checkpoint tracks it: the
            # model's weights and checkpoints stay as they are, and restoring one stays exact.
            self.__dict__["_kept_inference_weights"] = tf.nest.map_structure(
                lambda t: None if t is None else tf.Variable(t, trainable=False), fresh)
        else:
            tf.nest.map_structure(lambda v, t: None if v is None else v.assign(t), kept, fresh)
        return [v for v in tf.nest.flatten(self.__dict__["_kept_inference_weights"])
                if v is not None]

    @property
    def keeps_inference_weights(self) -> bool:
        return self.__dict__.get("_kept_inference_weights") is not None

    # Sizes. The defaults read the config fields the built-in families share (vocab_size,
    # resolved_target_vocab_size, max_position for both lengths); override them if yours differ.
    @property
    def source_vocab_size(self) -> int:
        return self.config.vocab_size

    @property
    def target_vocab_size(self) -> int:
        return self.config.resolved_target_vocab_size

    @property
    def max_source_length(self) -> int:
        return self.config.max_position

    @property
    def max_target_length(self) -> int:
        return self.config.max_position

    @property
    def model_width(self) -> int:
        raise NotImplementedError

    def attention_weights(self, source_ids, target_input_ids):
        """Attention probabilities of one teacher-forced pass, for inspection (figures,
        alignments); families that support it override this. Not used for training or
        decoding, so it may be slow and need not trace into a SavedModel.

        Args:
          source_ids: int [batch, source_length], tokens + EOS, PAD_ID-padded.
          target_input_ids: int [batch, target_length], BOS + tokens, PAD_ID-padded
            (a reference, or a search output with BOS put in front).

        Returns:
          A dict from kind (a subset of `ATTENTION_KINDS`: only the kinds the family
          has; a ConvS2S model, say, has "cross" only) to a list with one entry per
          layer, first layer first, each a float32 tensor
          [batch, heads, query_length, key_length] (heads = 1 for single-head attention):
            "encoder": queries and keys are source positions;
            "decoder": queries and keys are target input positions;
            "cross":   queries are target input positions, keys source positions.
          Query position t of the target is the one that predicts target token t + 1
          (after BOS: the first output token). Computed without dropout. For every real
          query row the weights sum to 1; keys the query may not see (PAD_ID
          positions; for "decoder", later positions; outside a restricted window) have
          weight exactly 0. Rows of padded queries are unspecified.
        """
        raise NotImplementedError(f"{type(self).__name__} does not expose attention weights")

    # ---------------------------------------------------------------- shared
    def check_inputs(self, inputs):
        """(source_ids, target_input_ids) as int32 after the checks of `check_ids` and a
        batch-size check; raises ValueError naming what is wrong."""
        if not isinstance(inputs, (tuple, list)) or len(inputs) != 2:
            raise ValueError(
                f"{type(self).__name__} expects inputs (source_ids, target_input_ids), got "
                f"{type(inputs).__name__}")
        source_ids = check_ids(inputs[0], self.source_vocab_size, self.max_source_length,
                               "source_ids")
        target_input_ids = check_ids(inputs[1], self.target_vocab_size,
                                     self.max_target_length, "target_input_ids")
        source_batch, target_batch = source_ids.shape[0], target_input_ids.shape[0]
        if source_batch is not None and target_batch is not None and source_batch != target_batch:
            raise ValueError(
                f"source_ids and target_input_ids must have the same batch size, got "
                f"{source_batch} and {target_batch}")
        return source_ids, target_input_ids

    def get_config(self):
        return {"config": self.config.get_config(), "name": self.name}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        model_config = config.pop("config")
        config.pop("trainable", None)
        config.pop("dtype", None)
        return cls(model_config, **config)
