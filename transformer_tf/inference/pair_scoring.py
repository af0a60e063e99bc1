"""Scoring given translations line by line, for the score command (`cli.score`): reading
the (source, target) pairs, loading a model's `score` signature, and forced decoding
(`inference.forced_decoding`) in length-sorted batches.

Pairs come as "SOURCE ||| TARGET" lines (split at the first "|||"; spaces around each
side do not count) or as two files aligned line by line. A source longer than the
model's positions is truncated, as translate does, with a warning naming the line; a
target that is, cannot be scored whole and is an error naming the line.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Callable, Iterable, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the sentencepiece ops SavedModels need)

from transformer_tf.config import DecodingConfig
from transformer_tf.data.bpe import display_pieces, python_processor
from transformer_tf.data.text_lines import LineCountMismatchError, iter_lines
from transformer_tf.inference import loading
from transformer_tf.inference.batch import batch_rows
from transformer_tf.inference.translator import Translator

logger = logging.getLogger(__name__)

SEPARATOR = "|||"

# (sources, targets) lists of str -> the `score` signature's outputs as NumPy arrays
ScoreFn = Callable[[list, list], "dict[str, np.ndarray]"]


@dataclasses.dataclass(frozen=True)
class ScoredPair:
    """One pair's forced-decoding result.

    Attributes:
      log_prob: log P(target | source), natural log, EOS included, no length penalty.
      pieces: the target's pieces as sentencepiece writes them ("▁Hund", "e"), "</s>" last.
      token_scores: the log-probability of each piece (len(pieces) values).
    """

    log_prob: float
    pieces: list
    token_scores: list


@dataclasses.dataclass
class LoadedScorer:
    """A ready-to-call `score` signature and what reading its output needs."""

    score_batch: ScoreFn
    bpe_model_proto: bytes
    max_source_tokens: int
    owner: object = None  # keeps the Translator or SavedModel behind `score_batch` alive
    max_batch_rows: int = 0  # an export's request limit; 0: any


def pairs_from_lines(lines: Iterable[str], name: str = "<stdin>") -> list[tuple[str, str]]:
    """"SOURCE ||| TARGET" lines -> [(source, target)]; ValueError naming `name` and the
    line (from 1) of a line without the separator."""
    pairs = []
    for number, line in enumerate(lines, start=1):
        if SEPARATOR not in line:
            raise ValueError(f"{name}: line {number}: expected 'SOURCE {SEPARATOR} TARGET', "
                             f"found no {SEPARATOR!r}: {line[:60]!r}")
        source, target = line.split(SEPARATOR, 1)
        pairs.append((source.strip(), target.strip()))
    return pairs


def pairs_from_files(source_path, target_path) -> list[tuple[str, str]]:
    """Line i of `source_path` with line i of `target_path` (UTF-8, ".gz" read as text);
    `text_lines.LineCountMismatchError` naming both files and the first line without a
    partner when their lengths differ, `text_lines`'s errors for unreadable files."""
    sources, targets = list(iter_lines(source_path)), list(iter_lines(target_path))
    if len(sources) != len(targets):
        longer = source_path if len(sources) > len(targets) else target_path
        shorter = target_path if longer is source_path else source_path
        first = min(len(sources), len(targets)) + 1
        raise LineCountMismatchError(
            source_path, len(sources), target_path, len(targets),
            f"{longer}: line {first}: no partner in {shorter} ({source_path} has "
            f"{len(sources)} lines, {target_path} has {len(targets)}); line i of one must "
            "translate line i of the other")
    return list(zip(sources, targets))


def _score_fn(score) -> ScoreFn:
    def score_batch(sources, targets):
        out = score(source=tf.constant(sources, tf.string),
                    target=tf.constant(targets, tf.string))
        return {key: value.numpy() for key, value in out.items()}
    return score_batch


def scorer_from_translator(translator: Translator) -> LoadedScorer:
    """A LoadedScorer over an in-memory `Translator`."""
    return LoadedScorer(_score_fn(translator.score), translator.tokenizer.model_proto,
                        translator.max_source_tokens, owner=translator,
                        max_batch_rows=translator.max_batch_rows)


def load_scorer(model: str | None = None, model_dir: str | None = None,
                checkpoint: str | None = None) -> LoadedScorer:
    """From a SavedModel directory (`model`: its `score` signature; an export without one,
    such as the ids-only variant, is rebuilt from its variables) or a training run
    (`model_dir`, its default checkpoint unless `checkpoint`)."""
    if (model is None) == (model_dir is None):
        raise ValueError("give exactly one of a SavedModel directory or a model directory")
    if model_dir is not None:
        net, tokenizer, run, _ = loading.load_trained(model_dir, checkpoint)
        return scorer_from_translator(Translator(net, tokenizer, run.decoding))
    info = loading.read_export_info(model)
    loaded = loading.load_saved_model(model)
    if "score" not in loaded.signatures:
        decoding = DecodingConfig.from_config(info["decoding"])
        return scorer_from_translator(loading.translator_from_saved_model(model, decoding))
    return LoadedScorer(_score_fn(loaded.signatures["score"]), loading.read_bpe_model(model),
                        info["max_source_tokens"], owner=loaded,
                        max_batch_rows=info.get("max_batch_rows", 0))


def score_pairs(scorer: LoadedScorer, pairs: Sequence[tuple[str, str]],
                batch_size: int = 64, name: str = "<stdin>") -> list[ScoredPair]:
    """Forced decoding of every pair, in batches of similar target length; results in the
    input order. Warns about sources the model truncates (line numbers from 1). A target
    longer than the model's positions cannot be scored whole: its result has log_prob
    NaN and no pieces, and one warning names `name` and those lines; the other pairs of
    its batch are scored as usual.
    """
    processor = python_processor(scorer.bpe_model_proto)
    for number, (source, _) in enumerate(pairs, start=1):
        length = len(processor.encode(source.strip()))
        if length > scorer.max_source_tokens:
            logger.warning("%s: line %d: the source has %d BPE tokens, truncated to the "
                           "model's %d", name, number, length, scorer.max_source_tokens)
    order = np.argsort([len(target) for _, target in pairs], kind="stable")
    results: list = [None] * len(pairs)
    too_long = []  # line numbers
    step = batch_rows(batch_size, scorer.max_batch_rows)
    for start in range(0, len(order), step):
        chunk = order[start:start + step]
        out = scorer.score_batch([pairs[i][0] for i in chunk], [pairs[i][1] for i in chunk])
        for row, index in enumerate(chunk):
            if out["truncated"][row]:
                too_long.append(index + 1)
                results[index] = ScoredPair(log_prob=float("nan"), pieces=[], token_scores=[])
                continue
            length = int(out["length"][row])
            results[index] = ScoredPair(
                log_prob=float(out["log_prob"][row]),
                pieces=display_pieces(processor, out["token_ids"][row, :length]),
                token_scores=[float(s) for s in out["token_scores"][row, :length]])
    if too_long:
        lines = sorted(too_long)
        shown = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
        logger.warning("%s: line %s: the target is longer than the model's positions: not "
                       "scored (nan); %d pair(s) in all", name, shown, len(lines))
    return results
