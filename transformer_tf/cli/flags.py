"""Flags several commands share, each defined here once: the search's (--beam-size,
--alpha, --max-extra-length, --stopping), --precision and --quiet. Their choices come from
`transformer_tf.config`, so a new value is added in one place; a command says where its
defaults come from ("the model's", "the run's", "the preset's")."""
from __future__ import annotations

import argparse

from transformer_tf.cli.arguments import (
    non_negative_float,
    non_negative_int,
    positive_int,
)
from transformer_tf.config import (
    PRECISIONS,
    RECIPES,
    STOPPING_RULES,
    ConfigError,
    DecodingConfig,
)

_PAPER = DecodingConfig()
# The DecodingConfig fields a command's search flags may set (`search_settings`); a flag a
# command does not define counts as not given.
SEARCH_FLAG_FIELDS = ("beam_size", "alpha", "max_extra_length", "stopping", "grammar",
                      "chunk_size", "lanes", "xla")


def add_search_flags(parser: argparse.ArgumentParser, defaults: str, *,
                     length: bool = False, stopping: bool = False, purpose: str = "") -> None:
    """--beam-size and --alpha (and --max-extra-length, --stopping when asked), each None
    unless given: `defaults` ("the model's", "the run's", ...) fills them in."""
    where = f"{purpose}; " if purpose else ""
    parser.add_argument("--beam-size", type=positive_int, metavar="N",
                        help=f"{where}hypotheses kept per sentence, 1 is greedy (default: "
                             f"{defaults}; the paper's {_PAPER.beam_size})")
    parser.add_argument("--alpha", type=non_negative_float, metavar="A",
                        help=f"{where}length penalty exponent, scores divided by "
                             f"((5 + length) / 6) ** A (default: {defaults}; the paper's "
                             f"{_PAPER.alpha})")
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


def add_recipe_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--recipe", choices=RECIPES, default="preset",
                        help="preset (default): the preset's warm-up, dropouts and label "
                             "smoothing as they are; planned: they follow the run's expected "
                             "passes over the data (docs/training.md, the budget-aware "
                             "recipe), settings you give win. A resumed run keeps its recipe")


def add_early_stopping_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--early-stopping", type=positive_int, metavar="PATIENCE",
                        help="end training once dev BLEU has not improved for PATIENCE "
                             "validation runs in a row (default: train the whole plan); the "
                             "best checkpoint by dev BLEU is kept in MDIR/checkpoints/best/ "
                             "either way")


def add_quiet_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
