"""An ensemble of sequence-to-sequence models that is itself a model of the contract.

At every decoding step each member predicts the next token from its own decoder state,
and the ensemble's prediction is the mean of the members' log-probabilities:

    scores(y | prefix, x) = (1 / M) * sum_m log p_m(y | prefix, x),
    log p_m = log_softmax(logits_m) over the target vocabulary.

The searches (`decoding.beam_and_greedy`) apply a log-softmax to whatever a step returns, so the
distribution they search is the renormalised geometric mean of the members'
distributions, p(y) proportional to prod_m p_m(y)^(1/M) (forbidden tokens left out, as for
one model). Greedy choices are the arg-max of the mean itself; an ensemble of one is its
member (the same distribution, up to float rounding).

The ensemble is a composition over the contract only (`encode`, `init_cache`,
`decode_step`): members may be of any families and sizes, e.g. a Transformer and a ConvS2S
model, as long as they read and write the same vocabulary (one tokenizer). Searches,
n-best lists, lanes, chunks, stopping rules, constraints and exports see one model.
"""
from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from transformer_tf.config import EnsembleConfig
from transformer_tf.models.contract import DecoderState, Seq2SeqModel
from transformer_tf.models.registry import build_model


def _log_probs(logits) -> tf.Tensor:
    """float32 log-softmax over the last axis (members may compute in float16)."""
    return tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)


class Ensemble(Seq2SeqModel):
    """Members of the sequence-to-sequence contract decoded together.

    Args:
      members: built models of the contract (at least one), sharing the source and the
        target vocabulary sizes (`ValueError` names the first member that differs).
      name: the Keras name.

    `source_vocab_size` and `target_vocab_size` are the members'; `max_source_length` and
    `max_target_length` the smallest of theirs. `config` is an `EnsembleConfig` (the
    members' families and configs), from which `build_ensemble` rebuilds it.

    Decoder state (`DecoderState`): `per_sentence` and `per_beam` are tuples with one
    entry per member (that member's own), `constants` a tuple of each member's
    `DecoderState` without its batch parts (its constants and its `per_beam_grows`), and
    `per_beam_grows` is True when any member's state grows.
    """

    family = "ensemble"

    def __init__(self, members: Sequence[Seq2SeqModel], name: str = "ensemble", **kwargs):
        super().__init__(name=name, **kwargs)
        members = list(members)
        if not members:
            raise ValueError("an ensemble needs at least one member")
        first = members[0]
        for index, member in enumerate(members[1:], start=1):
            for size in ("source_vocab_size", "target_vocab_size"):
                if getattr(member, size) != getattr(first, size):
                    raise ValueError(
                        f"ensemble member {index} ({member.family}) has {size} "
                        f"{getattr(member, size)}, member 0 ({first.family}) has "
                        f"{getattr(first, size)}: members must share one vocabulary")
        # One attribute per member: TensorFlow checkpoints (and so SavedModels) track
        # Keras sublayers by attribute, not inside lists.
        for index, member in enumerate(members):
            setattr(self, f"member_{index}", member)
        self._num_members = len(members)
        self.config = EnsembleConfig(members=tuple(
            {"family": m.family, "model": m.config.get_config()} for m in members))
        self.built = True

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return build_ensemble(config["config"], name=config.get("name", "ensemble"))

    @property
    def members(self) -> list:
        """The member models, in order."""
        return [getattr(self, f"member_{i}") for i in range(self._num_members)]

    # ---------------------------------------------------------------- sizes
    @property
    def source_vocab_size(self) -> int:
        return self.members[0].source_vocab_size

    @property
    def target_vocab_size(self) -> int:
        return self.members[0].target_vocab_size

    @property
    def max_source_length(self) -> int:
        return min(m.max_source_length for m in self.members)

    @property
    def max_target_length(self) -> int:
        return min(m.max_target_length for m in self.members)

    # ---------------------------------------------------------------- the contract
    def call(self, inputs, training=None):
        """Teacher forcing: the mean of the members' log-probabilities, float32
        [batch, target_length, target_vocab_size] (not renormalised)."""
        inputs = self.check_inputs(inputs)
        return tf.add_n([_log_probs(m(inputs, training=training))
                         for m in self.members]) / len(self.members)

    def encode(self, source_ids, training=False):
        """A tuple of the members' encodings of `source_ids` [batch, source_length]."""
        return tuple(m.encode(source_ids, training=training) for m in self.members)

    def init_cache(self, encoded, max_length) -> DecoderState:
        """Each member's state from its own encoding (see the class docstring)."""
        states = [m.init_cache(e, max_length) for m, e in zip(self.members, encoded)]
        return DecoderState(
            per_sentence=tuple(s.per_sentence for s in states),
            per_beam=tuple(s.per_beam for s in states),
            constants=tuple(DecoderState((), (), s.constants, s.per_beam_grows)
                            for s in states),
            per_beam_grows=any(s.per_beam_grows for s in states))

    def decode_step(self, ids, step, state: DecoderState):
        """One step of every member: (float32 mean log-probabilities [batch, V], the state
        with every member's `per_beam` advanced)."""
        log_probs, per_beam = [], []
        for member, per_sentence, beams, own in zip(self.members, state.per_sentence,
                                                   state.per_beam, state.constants):
            logits, new = member.decode_step(
                ids, step, own._replace(per_sentence=per_sentence, per_beam=beams))
            log_probs.append(_log_probs(logits))
            per_beam.append(new.per_beam)
        mean = tf.add_n(log_probs) / len(log_probs)
        return mean, state._replace(per_beam=tuple(per_beam))

    # ---------------------------------------------------------------- inference weights
    def keep_inference_weights(self) -> list:
        """Every member keeps (or refreshes) its own; returns all their variables."""
        return [v for m in self.members for v in m.keep_inference_weights()]

    @property
    def keeps_inference_weights(self) -> bool:
        return any(m.keeps_inference_weights for m in self.members)


def build_ensemble(config, name: str = "ensemble", dtype=None) -> Ensemble:
    """An `Ensemble` of freshly built members (untrained weights) from an `EnsembleConfig`
    or its dict; `dtype`: the members' Keras dtype policy (None: the global one)."""
    if isinstance(config, dict):
        config = EnsembleConfig.from_config(config)
    return Ensemble([build_model(m["family"], m["model"], dtype=dtype)
                     for m in config.members], name=name)
