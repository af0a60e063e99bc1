"""Configuration: one place for every knob, as dataclasses (their named bundles, the
presets, are in `transformer_tf.presets`).

The model knobs are those of Table 3 of the paper (N, d_model, d_ff, h, d_k, d_v,
P_drop, position encoding; eps_ls is a training knob, in TrainingConfig) plus the choices the paper fixes but users vary
(embedding sharing, post- or pre-norm, attention dropout). Every config serialises
with `get_config()` / `from_config()` (plain JSON-able dicts) so models, schedules and
training runs save and load.

Special token ids are fixed for the whole project: the BPE model reserves them in this
order (see `transformer_tf.data.bpe`) and the model masks `PAD_ID`.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import numbers
import typing
from typing import Any

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
NUM_SPECIAL_IDS = 4
# The character coverage sentencepiece's trainer accepts (its trainer_interface.cc checks
# it): `data.bpe.BpeOptions` and prepare_data's flag refuse anything else.
CHARACTER_COVERAGE = (0.98, 1.0)

POSITION_ENCODINGS = ("sinusoidal", "learned")
EMBEDDING_SHARING = ("all", "target", "none")
NORM_POSITIONS = ("post", "pre")
OPTIMIZERS = ("adam", "nesterov")
# The shapes of the "adam" optimizer's learning rate (training/schedule.py).
LR_SCHEDULES = ("inverse_sqrt", "warmup_hold_cooldown")
WORD_LOSSES = ("token", "any")
# Keras dtype policies a run can train in ("auto": chosen by device, training/precision.py).
PRECISIONS = ("auto", "float32", "mixed_float16", "mixed_bfloat16")
# The arithmetic an inference model (a serving export, a model rebuilt from one) runs in,
# by name, and the Keras dtype policy that gives it: "bfloat16" keeps float32 variables,
# runs the products in bfloat16 and softmax, layer norm, log-probabilities and the beam's
# scores in float32 (the layers and the search cast up where they need it).
SERVING_PRECISIONS = {"float32": "float32", "bfloat16": "mixed_bfloat16"}
# How a run's warm-up, dropouts and label smoothing are chosen (training/recipe_plan.py).
RECIPES = ("preset", "planned")


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the field and what is expected."""


def _check(condition: bool, field: str, message: str) -> None:
    if not condition:
        raise ConfigError(f"{field}: {message}")


def check_n_best(n_best, beam_size: int) -> None:
    """The one rule for how many hypotheses a search returns: an integer (Python or NumPy,
    not bool) with 1 <= n_best <= beam_size (greedy search, beam_size 1, returns one).
    Raises ConfigError naming n_best. `DecodingConfig.check_n_best` and
    `decoding.beam_and_greedy.beam_search` (for library callers) both apply it."""
    _check(isinstance(n_best, numbers.Integral) and not isinstance(n_best, bool)
           and 1 <= n_best <= beam_size, "n_best",
           f"expected an integer in [1, beam_size={beam_size}], got {n_best!r}")


def field_types(config_class) -> dict[str, tuple[Any, bool]]:
    """Each field of `config_class`: (its declared type without None, whether None is
    allowed): `int | None` gives (int, True), `str` (str, False); a union of several
    other types gives (Any, ...). How both configuration checks and the command line's
    overrides (`cli.model_flags`) read a field's type."""
    hints = typing.get_type_hints(config_class)
    types = {}
    for field in dataclasses.fields(config_class):
        declared = hints[field.name]
        optional = type(None) in typing.get_args(declared)
        if optional:
            others = [t for t in typing.get_args(declared) if t is not type(None)]
            declared = others[0] if len(others) == 1 else Any
        types[field.name] = (declared, optional)
    return types


@functools.lru_cache(maxsize=None)
def _scalar_fields(config_class) -> tuple[tuple[str, type, bool], ...]:
    """(name, type, optional) of each field of `config_class` declared bool, int or float,
    or one of them `| None` (optional)."""
    return tuple((name, declared, optional)
                 for name, (declared, optional) in field_types(config_class).items()
                 if declared in (bool, int, float))


def _is_a(value, scalar: type) -> bool:
    """Whether `value` is a `scalar` (bool, int or float): a bool only for bool (1 and 0
    too); an integer for int and any real number for float, never a bool."""
    if scalar is bool:
        return not isinstance(value, str) and value in (True, False)
    kind = numbers.Integral if scalar is int else numbers.Real
    return isinstance(value, kind) and not isinstance(value, bool)


class _Serialisable:
    """get_config / from_config / JSON helpers shared by the config dataclasses."""

    def _check_types(self) -> None:
        """Each bool, int or float field holds one (None where it is optional), so that a
        configuration file's "abc" or "False" is refused by the field's name rather than
        compared with a number or taken as true. The fields' own checks follow."""
        words = {bool: "true or false", int: "an integer", float: "a number"}
        for name, scalar, optional in _scalar_fields(type(self)):
            value = getattr(self, name)
            if not (_is_a(value, scalar) or (optional and value is None)):
                raise ConfigError(f"{name}: expected {words[scalar]}"
                                  f"{' or null' if optional else ''}, got {value!r}")

    def get_config(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_config(cls, config: dict[str, Any]):
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ConfigError(
                f"{cls.__name__}: unknown field(s) {unknown}; known fields are {sorted(known)}"
            )
        return cls(**config)

    def replace(self, **changes):
        """A copy with `changes` applied (and validated)."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ConfigError(f"{type(self).__name__}: unknown field(s) {unknown}")
        return dataclasses.replace(self, **changes)

    def with_overrides(self, **values):
        """A copy with the fields of `values` that are not None replaced (command-line
        options left unset keep this config's values)."""
        changes = {name: value for name, value in values.items() if value is not None}
        return self.replace(**changes) if changes else self

    def to_json(self) -> str:
        return json.dumps(self.get_config(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str):
        return cls.from_config(json.loads(text))


@dataclasses.dataclass(frozen=True)
class ModelConfig(_Serialisable):
    """Shape and regularisation of the Transformer (paper section 3, Table 3).

    Attributes:
      vocab_size: source vocabulary size (also the target's when embeddings are shared).
      target_vocab_size: target vocabulary size; None means the same as `vocab_size`.
        Must equal `vocab_size` when `embedding_sharing == "all"`.
      num_layers: N, the number of encoder layers.
      num_decoder_layers: decoder layers; None means N.
      d_model: width of every sub-layer output and of the embeddings.
      d_ff: inner width of the position-wise feed-forward network.
      num_heads: h, the number of attention heads.
      key_dim: d_k per head; None means d_model // h.
      value_dim: d_v per head; None means d_model // h (independent of key_dim, as in
        Table 3 row B, which varies d_k alone).
      dropout: P_drop, applied to each sub-layer output before the residual sum and to
        the embedding + position sums.
      attention_dropout: dropout on the attention weights (0 in the paper).
      ffn_dropout: dropout after the ReLU of the FFN (0 in the paper).
      position_encoding: "sinusoidal" (section 3.5) or "learned" (Table 3 row E).
      max_position: largest position the model can encode (source and target lengths
        must not exceed it); also the size of the learned position table.
      embedding_sharing: "all" (source, target and pre-softmax share one matrix, section
        3.4), "target" (target embedding shared with the pre-softmax weights only) or
        "none".
      norm_position: "post" (LayerNorm(x + Dropout(Sublayer(x))), the paper) or "pre"
        (x + Dropout(Sublayer(LayerNorm(x))), with a final LayerNorm per stack).
      layer_norm_epsilon: epsilon of every LayerNormalization.
      scale_embeddings: multiply embeddings by sqrt(d_model) (section 3.4).
      attention_window: restricted self-attention (Table 1, section 4): a position attends
        only to the positions within this many steps of it (encoder: both sides; decoder:
        earlier ones); None attends to the whole sequence (the paper's models).
      source_cursor: each decoder input also gets a learned projection of the encoder
        output at a cursor: the source position after as many tokens as the decoder's
        input so far holds tokens that occur in its source row (BOS and tokens absent
        from the source do not move it; clipped to the source's last token). For outputs
        that copy the source in order around tokens of their own (parsing with `words`
        leaves, whose bracket tokens never occur in a sentence), the cursor is the next
        word to place, as in deterministic-attention parsers (Ma et al. 2017). Needs one
        vocabulary for source and target. Off in the paper's models.
    """

    vocab_size: int = 37000
    target_vocab_size: int | None = None
    num_layers: int = 6
    num_decoder_layers: int | None = None
    d_model: int = 512
    d_ff: int = 2048
    num_heads: int = 8
    key_dim: int | None = None
    value_dim: int | None = None
    dropout: float = 0.1
    attention_dropout: float = 0.0
    ffn_dropout: float = 0.0
    position_encoding: str = "sinusoidal"
    max_position: int = 1024
    embedding_sharing: str = "all"
    norm_position: str = "post"
    layer_norm_epsilon: float = 1e-6
    scale_embeddings: bool = True
    attention_window: int | None = None
    source_cursor: bool = False

    def __post_init__(self):
        self._check_types()
        def positive_int(name):
            value = getattr(self, name)
            _check(
                isinstance(value, int) and not isinstance(value, bool) and value > 0,
                name,
                f"expected a positive integer, got {value!r}",
            )

        for name in ("vocab_size", "num_layers", "d_model", "d_ff", "num_heads", "max_position"):
            positive_int(name)
        for name in ("target_vocab_size", "num_decoder_layers", "key_dim", "value_dim",
                     "attention_window"):
            if getattr(self, name) is not None:
                positive_int(name)
        _check(
            self.vocab_size > NUM_SPECIAL_IDS,
            "vocab_size",
            f"must exceed the {NUM_SPECIAL_IDS} reserved ids (pad, unk, bos, eos), "
            f"got {self.vocab_size}",
        )
        if self.key_dim is None or self.value_dim is None:
            _check(
                self.d_model % self.num_heads == 0,
                "num_heads",
                f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}; "
                "choose h dividing d_model or set key_dim and value_dim explicitly",
            )
        for name in ("dropout", "attention_dropout", "ffn_dropout"):
            value = getattr(self, name)
            _check(
                isinstance(value, (int, float)) and 0.0 <= value < 1.0,
                name,
                f"expected a probability in [0, 1), got {value!r}",
            )
        _check(
            self.position_encoding in POSITION_ENCODINGS,
            "position_encoding",
            f"expected one of {POSITION_ENCODINGS}, got {self.position_encoding!r}",
        )
        _check(
            self.embedding_sharing in EMBEDDING_SHARING,
            "embedding_sharing",
            f"expected one of {EMBEDDING_SHARING}, got {self.embedding_sharing!r}",
        )
        _check(
            self.norm_position in NORM_POSITIONS,
            "norm_position",
            f"expected one of {NORM_POSITIONS}, got {self.norm_position!r}",
        )
        if self.embedding_sharing == "all" and self.target_vocab_size is not None:
            _check(
                self.target_vocab_size == self.vocab_size,
                "target_vocab_size",
                f"embedding_sharing='all' needs one shared vocabulary, but "
                f"vocab_size={self.vocab_size} and target_vocab_size={self.target_vocab_size}",
            )
        _check(self.layer_norm_epsilon > 0, "layer_norm_epsilon", "must be positive")
        _check(
            not self.source_cursor or self.resolved_target_vocab_size == self.vocab_size,
            "source_cursor",
            "compares target tokens with source tokens, so it needs one vocabulary, but "
            f"vocab_size={self.vocab_size} and target_vocab_size={self.target_vocab_size}",
        )

    # Resolved values: the defaults the paper implies.
    @property
    def resolved_target_vocab_size(self) -> int:
        return self.target_vocab_size or self.vocab_size

    @property
    def resolved_num_decoder_layers(self) -> int:
        return self.num_decoder_layers or self.num_layers

    @property
    def resolved_key_dim(self) -> int:
        return self.key_dim or self.d_model // self.num_heads

    @property
    def resolved_value_dim(self) -> int:
        return self.value_dim or self.d_model // self.num_heads

    def resolved(self) -> "ModelConfig":
        """This config with every derived size written out (target vocabulary, decoder
        layers, d_k, d_v): what a run directory records, so that a later change of a
        default never changes the meaning of a saved run."""
        return self.replace(target_vocab_size=self.resolved_target_vocab_size,
                            num_decoder_layers=self.resolved_num_decoder_layers,
                            key_dim=self.resolved_key_dim, value_dim=self.resolved_value_dim)


def _stack(layers, field: str) -> tuple[tuple[int, int], ...]:
    """A stack of convolutional blocks as ((width, kernel_size), ...), checked."""
    try:
        stack = tuple((int(width), int(kernel)) for width, kernel in layers)
    except (TypeError, ValueError):
        raise ConfigError(f"{field}: expected a list of [width, kernel_size] pairs, "
                          f"got {layers!r}") from None
    _check(len(stack) > 0, field, "needs at least one block")
    for width, kernel in stack:
        _check(width > 0 and kernel > 0, field,
               f"widths and kernel sizes must be positive, got {[width, kernel]}")
    return stack


@dataclasses.dataclass(frozen=True)
class ConvS2SConfig(_Serialisable):
    """Shape and regularisation of the convolutional sequence-to-sequence model (Gehring
    et al. 2017, "Convolutional Sequence to Sequence Learning"), the paper's Table 2 peer.

    Attributes:
      vocab_size: source vocabulary size.
      target_vocab_size: target vocabulary size; None means the same as `vocab_size`.
        Source and target have separate embedding tables either way (as in ConvS2S).
      embedding_dim: f, the width of token and position embeddings and of the attention's
        dot products.
      encoder_layers: ((width d, kernel size k), ...) per encoder block; a width change
        between blocks sends the residual through a linear projection.
      decoder_layers: the same for the decoder blocks (causal convolutions).
      decoder_attention: per decoder block, whether it has multi-step attention; None
        means every block (the paper).
      decoder_output_dim: width of the linear map between the last decoder block and the
        output softmax (fairseq's decoder_out_embed_dim).
      dropout: dropout on embeddings, on every block's input and on the decoder output
        (1 - p is the keep probability p of the initialisation rule).
      max_position: size of the learned position tables (longest source or target).
    """

    vocab_size: int = 40000
    target_vocab_size: int | None = None
    embedding_dim: int = 768
    encoder_layers: tuple = ((512, 3),) * 9 + ((1024, 3),) * 4 + ((2048, 1),) * 2
    decoder_layers: tuple = ((512, 3),) * 9 + ((1024, 3),) * 4 + ((2048, 1),) * 2
    decoder_attention: tuple | None = None
    decoder_output_dim: int = 512
    dropout: float = 0.2
    max_position: int = 1024

    def __post_init__(self):
        self._check_types()
        # Frozen dataclass: normalise JSON lists to tuples once, here.
        object.__setattr__(self, "encoder_layers", _stack(self.encoder_layers, "encoder_layers"))
        object.__setattr__(self, "decoder_layers", _stack(self.decoder_layers, "decoder_layers"))
        if self.decoder_attention is not None:
            attention = tuple(bool(a) for a in self.decoder_attention)
            _check(len(attention) == len(self.decoder_layers), "decoder_attention",
                   f"expected one flag per decoder block ({len(self.decoder_layers)}), "
                   f"got {len(attention)}")
            _check(any(attention), "decoder_attention", "at least one block must attend")
            object.__setattr__(self, "decoder_attention", attention)
        for name in ("vocab_size", "embedding_dim", "decoder_output_dim", "max_position"):
            value = getattr(self, name)
            _check(isinstance(value, int) and not isinstance(value, bool) and value > 0, name,
                   f"expected a positive integer, got {value!r}")
        _check(self.vocab_size > NUM_SPECIAL_IDS, "vocab_size",
               f"must exceed the {NUM_SPECIAL_IDS} reserved ids, got {self.vocab_size}")
        if self.target_vocab_size is not None:
            _check(self.target_vocab_size > NUM_SPECIAL_IDS, "target_vocab_size",
                   f"must exceed the {NUM_SPECIAL_IDS} reserved ids")
        _check(isinstance(self.dropout, (int, float)) and 0.0 <= self.dropout < 1.0,
               "dropout", f"expected a probability in [0, 1), got {self.dropout!r}")

    def get_config(self) -> dict[str, Any]:
        config = dataclasses.asdict(self)
        for name in ("encoder_layers", "decoder_layers"):
            config[name] = [list(block) for block in config[name]]
        if config["decoder_attention"] is not None:
            config["decoder_attention"] = list(config["decoder_attention"])
        return config

    @property
    def resolved_target_vocab_size(self) -> int:
        return self.target_vocab_size or self.vocab_size

    @property
    def resolved_decoder_attention(self) -> tuple[bool, ...]:
        return self.decoder_attention or (True,) * len(self.decoder_layers)

    def resolved(self) -> "ConvS2SConfig":
        """This config with the target vocabulary and attention flags written out."""
        return self.replace(target_vocab_size=self.resolved_target_vocab_size,
                            decoder_attention=self.resolved_decoder_attention)


@dataclasses.dataclass(frozen=True)
class EnsembleConfig(_Serialisable):
    """What an ensemble (`models.ensemble.Ensemble`) is made of: its members in order,
    each `{"family": <registry name>, "model": <that family's config as a dict>}`.
    Recorded in an ensemble's SavedModel so that it can be rebuilt; an ensemble has no
    knobs of its own (its decoding settings are a `DecodingConfig`)."""

    members: tuple = ()

    def __post_init__(self):
        members = tuple(dict(m) if isinstance(m, dict) else m for m in self.members)
        _check(len(members) > 0, "members", "an ensemble needs at least one member")
        for index, member in enumerate(members):
            _check(isinstance(member, dict) and set(member) == {"family", "model"}
                   and isinstance(member["family"], str) and isinstance(member["model"], dict),
                   "members", f"member {index}: expected {{'family': str, 'model': dict}}, "
                              f"got {member!r}")
        object.__setattr__(self, "members", members)

    def get_config(self) -> dict[str, Any]:
        return {"members": [dict(member) for member in self.members]}


@dataclasses.dataclass(frozen=True)
class TrainingConfig(_Serialisable):
    """Optimisation and batching (paper section 5).

    Attributes:
      warmup_steps: warm-up of the learning-rate schedule (paper: 4000).
      learning_rate_scale: factor on d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).
      lr_schedule: the rate's shape after the warm-up. "inverse_sqrt": the paper's
        equation 3, decaying with step^-0.5. "warmup_hold_cooldown": the same warm-up to
        the same peak, held, then falling linearly to zero over the last `cooldown_steps`
        of `schedule_steps` (the budget-aware recipe's, training/recipe_plan.py).
      schedule_steps, cooldown_steps: the "warmup_hold_cooldown" budget and cool-down, in
        updates: a step clock (None with "inverse_sqrt" or a time clock).
      cooldown_minutes: a time clock instead: the "warmup_hold_cooldown" rate falls over the
        last this many minutes of the run's time budget, reaching zero as it runs out.
      adam_beta_1, adam_beta_2, adam_epsilon: Adam's constants (paper: 0.9, 0.98, 1e-9).
      tokens_per_batch: global token budget of a batch, per side, counting padding
        (paper: about 25,000 source and 25,000 target tokens).
      max_length: longest source or target (in BPE tokens, eos/bos included) kept for
        training; longer pairs are dropped and counted.
      label_smoothing: eps_ls of the loss (paper: 0.1; Table 3 row D varies it).
      bpe_dropout: BPE-dropout (Provilkov et al., 2020; not in the paper): while
        training, each merge of the shared BPE is skipped with this probability, on both
        sides, drawn anew at every pass; evaluation and serving segment as the model does.
        0 (the default) turns it off; sentencepiece BPE models only.
      word_loss: how target word pieces are scored. "token": each id is its own class
        (translation; the paper). "any": for parsing with `words` leaves, every piece
        that is not a tree token, EOS or PAD is scored as one class, "a word", as the
        tree grammar scores the copied words in search (`training.losses`); the model
        learns where words and brackets go, not which word comes.
      gradient_accumulation_steps: optimizer steps accumulate this many batches; the
        update is the per-token mean over all of them, as for one batch holding them all.
      clip_norm: global gradient-norm clip; None disables.
      optimizer: "adam" (the paper's Adam with the warm-up schedule above) or "nesterov"
        (ConvS2S: SGD with Nesterov momentum at a constant `learning_rate`, multiplied by
        `lr_shrink` whenever the dev loss stops improving; training ends once it falls
        below `min_learning_rate`).
      learning_rate, momentum, lr_shrink, min_learning_rate: the "nesterov" optimizer's
        knobs (ConvS2S: 0.25, 0.99, 0.1, 1e-4); unused by "adam".
      checkpoint_every_minutes: checkpoint period (paper: 10).
      checkpoint_every_steps: when set, a checkpoint every this many steps (and at the
        end) instead of by the minute: the same steps on any machine (the planned
        recipe's step plans, training/recipe_plan.py); None: by the minute.
      keep_checkpoints: how many recent checkpoints to keep.
      average_last: how many final checkpoints to average (paper: 5 base, 20 big).
      seed: seed for weights, dropout and data shuffling.
      train_steps: the preset's step plan, used when a run is given no plan of its own
        (paper: base 100,000 steps, big 300,000, at ~25k+25k tokens per step); None: a
        plan must be given.
    """

    warmup_steps: int = 4000
    learning_rate_scale: float = 1.0
    lr_schedule: str = "inverse_sqrt"
    schedule_steps: int | None = None
    cooldown_steps: int | None = None
    cooldown_minutes: float | None = None
    adam_beta_1: float = 0.9
    adam_beta_2: float = 0.98
    adam_epsilon: float = 1e-9
    tokens_per_batch: int = 25000
    max_length: int = 256
    label_smoothing: float = 0.1
    bpe_dropout: float = 0.0
    word_loss: str = "token"
    gradient_accumulation_steps: int = 1
    clip_norm: float | None = None
    optimizer: str = "adam"
    learning_rate: float = 0.25
    momentum: float = 0.99
    lr_shrink: float = 0.1
    min_learning_rate: float = 1e-4
    checkpoint_every_minutes: float = 10.0
    checkpoint_every_steps: int | None = None
    keep_checkpoints: int = 20
    average_last: int = 5
    seed: int = 1234
    train_steps: int | None = None

    def __post_init__(self):
        self._check_types()
        _check(self.train_steps is None or (isinstance(self.train_steps, int)
                                            and self.train_steps > 0),
               "train_steps", f"expected a positive integer or None, got {self.train_steps!r}")
        for name in ("warmup_steps", "tokens_per_batch", "max_length",
                     "gradient_accumulation_steps", "keep_checkpoints", "average_last"):
            value = getattr(self, name)
            _check(isinstance(value, int) and value > 0, name,
                   f"expected a positive integer, got {value!r}")
        _check(self.learning_rate_scale > 0, "learning_rate_scale", "must be positive")
        _check(self.lr_schedule in LR_SCHEDULES, "lr_schedule",
               f"expected one of {LR_SCHEDULES}, got {self.lr_schedule!r}")
        self._check_cooldown_clock()
        _check(isinstance(self.label_smoothing, (int, float)) and 0.0 <= self.label_smoothing < 1.0,
               "label_smoothing", f"expected a probability in [0, 1), got {self.label_smoothing!r}")
        _check(isinstance(self.bpe_dropout, (int, float)) and not isinstance(self.bpe_dropout, bool)
               and 0.0 <= self.bpe_dropout < 1.0,
               "bpe_dropout", f"expected a probability in [0, 1), got {self.bpe_dropout!r}")
        _check(self.word_loss in WORD_LOSSES, "word_loss",
               f"expected one of {WORD_LOSSES}, got {self.word_loss!r}")
        _check(0 <= self.adam_beta_1 < 1, "adam_beta_1", "expected a value in [0, 1)")
        _check(0 <= self.adam_beta_2 < 1, "adam_beta_2", "expected a value in [0, 1)")
        _check(self.adam_epsilon > 0, "adam_epsilon", "must be positive")
        _check(self.clip_norm is None or self.clip_norm > 0, "clip_norm",
               "must be positive or None")
        _check(self.checkpoint_every_minutes > 0, "checkpoint_every_minutes", "must be positive")
        _check(self.checkpoint_every_steps is None
               or (isinstance(self.checkpoint_every_steps, int)
                   and not isinstance(self.checkpoint_every_steps, bool)
                   and self.checkpoint_every_steps > 0),
               "checkpoint_every_steps",
               f"expected a positive integer or None, got {self.checkpoint_every_steps!r}")
        _check(self.optimizer in OPTIMIZERS, "optimizer",
               f"expected one of {OPTIMIZERS}, got {self.optimizer!r}")
        _check(self.learning_rate > 0, "learning_rate", "must be positive")
        _check(0 <= self.momentum < 1, "momentum", "expected a value in [0, 1)")
        _check(0 < self.lr_shrink < 1, "lr_shrink", "expected a factor in (0, 1)")
        _check(self.min_learning_rate >= 0, "min_learning_rate", "must be non-negative")

    def _check_cooldown_clock(self) -> None:
        """A "warmup_hold_cooldown" rate has one clock: schedule_steps with cooldown_steps,
        or cooldown_minutes."""
        for name in ("schedule_steps", "cooldown_steps"):
            value = getattr(self, name)
            _check(value is None or (isinstance(value, int) and not isinstance(value, bool)
                                     and value > 0),
                   name, f"expected a positive integer or None, got {value!r}")
        _check((self.schedule_steps is None) == (self.cooldown_steps is None),
               "cooldown_steps" if self.cooldown_steps is None else "schedule_steps",
               "schedule_steps and cooldown_steps go together (a step clock)")
        _check(self.cooldown_steps is None or self.cooldown_steps <= self.schedule_steps,
               "cooldown_steps",
               f"{self.cooldown_steps} exceeds schedule_steps {self.schedule_steps}")
        _check(self.cooldown_minutes is None or self.cooldown_minutes > 0, "cooldown_minutes",
               f"expected a positive number of minutes or None, got {self.cooldown_minutes!r}")
        clocks = (self.schedule_steps is not None) + (self.cooldown_minutes is not None)
        if self.lr_schedule == "warmup_hold_cooldown":
            _check(clocks == 1, "lr_schedule",
                   "warmup_hold_cooldown needs one clock: schedule_steps and cooldown_steps "
                   "(a step budget) or cooldown_minutes (a time budget)")


GRAMMARS = ("none", "tree")
# When a beam search stops before the length limit; see transformer_tf.decoding.beam_and_greedy.
STOPPING_RULES = ("exact", "k_finished", "never")
# How a finished hypothesis's log-probability is normalised by its length; see
# transformer_tf.decoding.beam_and_greedy.length_penalty.
LENGTH_PENALTIES = ("gnmt", "average")
DEFAULT_MAX_BATCH_ROWS = 256  # rows per request an export's signatures accept (0: any)


@dataclasses.dataclass(frozen=True)
class DecodingConfig(_Serialisable):
    """Beam search as the paper ran it (section 6.1).

    Attributes:
      beam_size: hypotheses kept per sentence (paper: 4); 1 is greedy.
      alpha: GNMT length penalty exponent, ((5 + len) / 6) ** alpha (paper: 0.6).
      length_penalty: how a finished hypothesis is ranked. "gnmt": log P divided by
        ((5 + len) / 6) ** alpha (the Transformer paper's rule); "average": log P / len,
        the mean log-probability per token (ConvS2S's and fairseq's normalisation; alpha
        plays no part). len counts the EOS.
      max_extra_length: output may be at most input length + this (paper: 50).
      chunk_size: N > 0 sorts a batch by source length and searches it N rows at a time
        (`decoding.model_driver.search_model_by_length`): the same outputs. Since the
        graph-mode search drops done sentences from its batch, a bigger chunk is faster:
        64 (one sorted chunk for batches up to 64) is as fast as the whole batch at
        batches of 8 and 64 and faster than chunks of 16; a cap keeps the memory of very
        large requests bounded. 0 searches a batch as it comes.
      lanes: N > 1 deals a request's rows, sorted by source length, into N searches
        that run at the same time when TensorFlow's inter-op pool has N threads
        (`decoding.model_driver.search_in_lanes`): the same outputs. For CPU serving of
        large batches, one lane per core with intra-op 1 and inter-op N threads: the
        lanes keep every core busy while one search's batch thins out (measure it with
        `bench/run_all.py --only serving`, docs/performance.md). 1 (one search) for GPUs.
      xla: compile each chunk's search with XLA, for a fixed set of shapes (chunk sizes,
        source lengths in steps of 8); needs chunk_size > 0.
      grammar: what every output must be. "none": any sequence; "tree": a linearised
        parse tree, well formed, every source word in place (one `XX` per word, or the
        source pieces copied in order: `decoding.constraints.BracketGrammar` /
        `CopyBracketGrammar`, by the vocabulary's leaves; the parsing presets' default).
      stopping: when a sentence's beam search ends before its length limit. "exact": once
        no alive hypothesis can beat the best finished one (the result of searching to
        the limit; tensor2tensor's rule). "k_finished": once beam_size hypotheses have
        finished (fairseq's and CTranslate2's rule; fewer steps, and it can miss a longer,
        better-scoring output). See `decoding.beam_and_greedy`.
    """

    beam_size: int = 4
    alpha: float = 0.6
    max_extra_length: int = 50
    length_penalty: str = "gnmt"
    chunk_size: int = 64
    lanes: int = 1
    xla: bool = False
    grammar: str = "none"
    stopping: str = "exact"

    def __post_init__(self):
        self._check_types()
        _check(isinstance(self.beam_size, int) and self.beam_size > 0, "beam_size",
               f"expected a positive integer, got {self.beam_size!r}")
        _check(self.alpha >= 0, "alpha", f"expected a non-negative number, got {self.alpha!r}")
        _check(isinstance(self.max_extra_length, int) and self.max_extra_length >= 0,
               "max_extra_length", f"expected a non-negative integer, got {self.max_extra_length!r}")
        _check(isinstance(self.chunk_size, int) and self.chunk_size >= 0, "chunk_size",
               f"expected a non-negative integer, got {self.chunk_size!r}")
        _check(isinstance(self.lanes, int) and self.lanes >= 1, "lanes",
               f"expected a positive integer, got {self.lanes!r}")
        _check(not self.xla or self.chunk_size > 0, "xla",
               "the XLA search compiles fixed chunk shapes: give chunk_size > 0 too")
        _check(self.grammar in GRAMMARS, "grammar",
               f"expected one of {GRAMMARS}, got {self.grammar!r}")
        _check(self.stopping in STOPPING_RULES, "stopping",
               f"expected one of {STOPPING_RULES}, got {self.stopping!r}")
        _check(self.length_penalty in LENGTH_PENALTIES, "length_penalty",
               f"expected one of {LENGTH_PENALTIES}, got {self.length_penalty!r}")

    def check_n_best(self, n_best) -> None:
        """`check_n_best` for this config's beam size. Whoever builds the settings a search
        runs with checks it (`cli.flags.search_settings`)."""
        check_n_best(n_best, self.beam_size)
