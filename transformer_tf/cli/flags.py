"""Flags several commands share, each defined here once: the search's (--beam-size,
--alpha, --max-extra-length, --stopping), --precision, --quiet and the flags of `SHARED`
(--model-dir, --out, --eval-every, ...). Their forms and choices come from here and from
`transformer_tf.config`, so a new value is added in one place; a command says what a flag
means for it (the help of --out: which directory it writes) and where its defaults come
from ("the model's", "the run's", "the preset's")."""
from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from transformer_tf.cli.arguments import (
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
)
from transformer_tf.config import (
    GRAMMARS,
    PRECISIONS,
    RECIPES,
    SERVING_PRECISIONS,
    STOPPING_RULES,
    ConfigError,
    DecodingConfig,
)
from transformer_tf.presets import DEFAULT_PRESETS, PRESET_NAMES

_PAPER = DecodingConfig()
# The DecodingConfig fields a command's search flags may set (`search_settings`); a flag a
# command does not define counts as not given.
SEARCH_FLAG_FIELDS = ("beam_size", "alpha", "max_extra_length", "stopping", "grammar",
                      "chunk_size", "lanes", "xla")


def add_search_flags(parser: argparse.ArgumentParser, defaults: str, *,
                     length: bool = False, stopping: bool = False, alpha: bool = True,
                     purpose: str = "") -> None:
    """--beam-size and --alpha (and --max-extra-length, --stopping when asked; no --alpha
    when `alpha` is False), each None unless given: `defaults` ("the model's", "the
    run's", ...) fills them in."""
    where = f"{purpose}; " if purpose else ""
    parser.add_argument("--beam-size", type=positive_int, metavar="N",
                        help=f"{where}hypotheses kept per sentence, 1 is greedy (default: "
                             f"{defaults}; the paper's {_PAPER.beam_size})")
    if alpha:
        parser.add_argument("--alpha", type=non_negative_float, metavar="A",
                            help=f"{where}length penalty exponent, scores divided by "
                                 f"((5 + length) / 6) ** A; unused where hypotheses are "
                                 f"ranked by log-probability per token (ConvS2S) "
                                 f"(default: {defaults}; the paper's {_PAPER.alpha})")
    if length:
        parser.add_argument("--max-extra-length", type=non_negative_int, metavar="N",
                            help=f"outputs end at input length + N pieces (default: "
                                 f"{defaults}; {_PAPER.max_extra_length})")
    if stopping:
        parser.add_argument("--stopping", choices=STOPPING_RULES,
                            help=f"when a sentence's beam search ends (default: {defaults}, "
                                 f"{_PAPER.stopping}): exact, once no live hypothesis can "
                                 f"beat the best finished one; k_finished, once beam-size "
                                 f"hypotheses have finished, as CTranslate2 and fairseq do "
                                 f"(faster; can miss a better, longer output)")


def search_settings(args, base: DecodingConfig, n_best: int = 1) -> DecodingConfig:
    """The one `DecodingConfig` a command searches with, built once and passed down as it
    is: `base` (the model's or the run's settings) with the search flags the user gave
    (`SEARCH_FLAG_FIELDS`; None keeps `base`'s), and `n_best` checked against its beam
    size. Raises ConfigError naming --n-best."""
    decoding = base.with_overrides(**{field: getattr(args, field, None)
                                      for field in SEARCH_FLAG_FIELDS})
    try:
        decoding.check_n_best(n_best)
    except ConfigError:
        raise ConfigError(f"--n-best {n_best}: a search of beam size {decoding.beam_size} "
                          f"keeps at most {decoding.beam_size} hypotheses per sentence; "
                          f"give --beam-size {n_best} or more") from None
    return decoding


def add_precision_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--precision", choices=PRECISIONS, default="auto",
                        help="dtype policy (default auto: on GPUs mixed_bfloat16 from "
                             "compute capability 8.0, mixed_float16 from 7.0; on CPUs "
                             "mixed_bfloat16 with native bfloat16 (AVX512-BF16/AMX); float32 "
                             "elsewhere); mixed_float16 adds dynamic loss scaling")


def add_export_precision_flags(parser: argparse.ArgumentParser, refused: bool = False) -> None:
    """An export's --precision (the arithmetic of the exported signatures) and
    --force-precision; with `refused`, only a hidden --precision, which the command
    refuses with the way to what the user wanted."""
    if refused:
        parser.add_argument("--precision", help=argparse.SUPPRESS)
        return
    parser.add_argument("--precision", choices=tuple(SERVING_PRECISIONS), default="float32",
                        help="the signatures' arithmetic: bfloat16 multiplies in bfloat16 "
                             "(weights stored so) with softmax, layer norm and scores in "
                             "float32; for GPUs and CPUs with AVX512-BF16 or AMX-BF16, "
                             "refused elsewhere unless --force-precision (default "
                             "%(default)s)")
    parser.add_argument("--force-precision", action="store_true",
                        help="export --precision bfloat16 on a machine without native "
                             "bfloat16 (for another machine, or to test it)")


def add_recipe_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--recipe", choices=RECIPES, default="preset",
                        help="preset (default): the preset's warm-up, learning rate, "
                             "dropouts and label smoothing as they are; planned: they follow "
                             "the run's budget and expected passes over the data, the rate "
                             "held at its peak and cooled down over the last 20%% "
                             "(docs/training.md, the budget-aware recipe); settings you give "
                             "win. A resumed run keeps its recipe")


def add_early_stopping_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--early-stopping", type=positive_int, metavar="PATIENCE",
                        help="end training once dev BLEU has not improved for PATIENCE "
                             "validation runs in a row (default: train the whole plan); the "
                             "best checkpoint by dev BLEU is kept in MDIR/checkpoints/best/ "
                             "either way")


def add_quiet_flag(parser: argparse.ArgumentParser, help: str = "no progress bars") -> None:
    parser.add_argument("--quiet", action="store_true", help=help)


@dataclasses.dataclass(frozen=True)
class SharedFlag:
    """A flag several commands take: its string, its form (type, choices, action, nargs,
    metavar) and the help that holds for every command, if one does."""

    flag: str
    form: dict
    help: str | None = None


# Each shared flag by the name of what it means; two meanings of one string (--model: a
# model family or a SavedModel; --src: a language or a file) are two entries.
SHARED = {
    # What a command reads: runs, exports, data.
    "model_dir": SharedFlag("--model-dir", {}, "training run directory"),
    "checkpoint": SharedFlag("--checkpoint", {}, "with --model-dir: checkpoint prefix to use"),
    "ensemble": SharedFlag("--ensemble", {"nargs": "+", "metavar": "MDIR"},
                           "training run directories decoded together (the mean of their "
                           "log-probabilities at every step), each at its default "
                           "checkpoint; they must share one tokenizer; the first run's "
                           "search settings"),
    "saved_model": SharedFlag("--model", {}, "SavedModel directory (saved_models/NAME/VERSION)"),
    "family": SharedFlag("--model", {"choices": sorted(DEFAULT_PRESETS)},
                         "model family; alone, it picks the family's Multi30k preset "
                         "(transformer: multi30k, convs2s: convs2s_multi30k)"),
    "preset": SharedFlag("--preset", {"choices": PRESET_NAMES}),
    "data": SharedFlag("--data", {}, "prepared data directory (scripts/prepare_data.py)"),
    "data_dir": SharedFlag("--data-dir", {}),
    "dataset": SharedFlag("--dataset", {}),
    "source_language": SharedFlag("--src", {}),
    "target_language": SharedFlag("--tgt", {}),
    "source_file": SharedFlag("--src", {"metavar": "FILE"}),
    "target_file": SharedFlag("--tgt", {"metavar": "FILE"}),
    "vocab_size": SharedFlag("--vocab-size", {"type": positive_int}),
    "subword": SharedFlag("--subword", {"choices": ("bpe", "wordpiece")}),
    "treebank": SharedFlag("--treebank", {}, "directory of .mrg files (default "
                                             "$TRANSFORMER_TF_DATA/ptb_wsj_sample)"),
    # What a command writes.
    "out": SharedFlag("--out", {}),
    "work_dir": SharedFlag("--work-dir", {}),
    "results": SharedFlag("--results", {}),
    "overwrite": SharedFlag("--overwrite", {"action": "store_true"}),
    "plan_only": SharedFlag("--plan-only", {"action": "store_true"}),
    "alongside": SharedFlag("--alongside", {"metavar": "TEXT"},
                            "what else the machine runs while this trains, in your words "
                            "(e.g. \"the parsing ablation on the other core\"): each row "
                            "trained now records it, and the results file's conditions "
                            "say it"),
    # Training plans and checks.
    "max_steps": SharedFlag("--max-steps", {"type": positive_int},
                            "train this many steps in total"),
    "epochs": SharedFlag("--epochs", {"type": positive_float}),
    # The jobs' time budget; 0 means none (then --epochs or --max-steps), never negative.
    "train_minutes": SharedFlag("--train-minutes", {"type": non_negative_float}),
    "eval_every": SharedFlag("--eval-every", {"type": positive_int}),
    "validation_sentences": SharedFlag("--validation-sentences", {"type": non_negative_int}),
    "average_last": SharedFlag("--average-last", {"type": positive_int}),
    "dev_limit": SharedFlag("--dev-limit", {"type": positive_int}),
    "seed": SharedFlag("--seed", {"type": int}),
    "xla": SharedFlag("--xla", {"action": "store_true"}),
    # Scoring.
    "against": SharedFlag("--against", {"metavar": "OTHER"}),
    "json": SharedFlag("--json", {"action": "store_true"}),
    # Decoding.
    "batch_size": SharedFlag("--batch-size", {"type": positive_int}),
    "window": SharedFlag("--window", {"type": positive_int}),
    "grammar": SharedFlag("--grammar", {"choices": GRAMMARS}),
}

_NOT_GIVEN = object()


def add_flag(parser, name: str, help: str | None = None, *, default: Any = _NOT_GIVEN,
             required: bool = False, choices=None) -> None:
    """Add the shared flag `SHARED[name]` to `parser` (or an argument group): its form from
    here, with `help` (what it means for this command; else the common help), `default`,
    `required`, and `choices` for a command that takes only some values."""
    shared = SHARED[name]
    text = help or shared.help
    if text is None:
        raise ValueError(f"{shared.flag} ({name}) has no common help: give the command's")
    options = dict(shared.form, help=text)
    if default is not _NOT_GIVEN:
        options["default"] = default
    if required:
        options["required"] = True
    if choices is not None:
        options["choices"] = choices
    parser.add_argument(shared.flag, **options)
