"""BLEU and chrF of translations: sacreBLEU, paper-style tokenized BLEU, lowercased BLEU.

BLEU figures are only comparable when computed the same way, so every score carries a label
saying how it was computed, and sacreBLEU's scores carry sacreBLEU's signature.

  * "bleu": sacreBLEU, cased, on detokenized text with its default ("13a") tokenizer and
    "exp" smoothing -- the number to compare across papers and systems.
  * "chrf": sacreBLEU's chrF2 (character 6-grams, beta = 2), cased.
  * "bleu_paper_tokenized": the Transformer paper's way (tensor2tensor `get_ende_bleu.sh`):
    Moses tokenization of hypothesis and reference (`tokenization.moses_tokenize`, sacremoses),
    "##AT##" compound splitting for German, then multi-bleu.perl-style corpus BLEU: cased,
    no smoothing, brevity penalty against the closest reference length. That last step is
    sacreBLEU's corpus BLEU with tokenize="none" (split on whitespace only),
    smooth_method="none" on the pre-tokenized text, which is exactly multi-bleu.perl's
    arithmetic: BLEU = BP * exp(1/4 * sum_{n=1..4} log p_n), BP = min(1, exp(1 - r/c)),
    p_n = clipped matching n-grams / hypothesis n-grams, and 0 if any p_n is 0.
  * "bleu_lowercase_tokenized": lowercased tokenized BLEU as the Multi30k literature reports
    it, computed as sacreBLEU with lowercase=True and tokenize="13a" (signature included).

References: a sequence of strings (one reference per segment) or, in sacreBLEU's layout, a
sequence of reference streams (`streams[k][i]` is reference k of segment i).
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Any, Sequence

import numpy as np
import sacrebleu
from sacrebleu.metrics import BLEU, CHRF

from transformer_tf.data.text_lines import LineCountMismatchError
from transformer_tf.evaluation.hypothesis_files import (
    EvaluationInputError, read_hypotheses_and_references)
from transformer_tf.evaluation.tokenization import paper_tokenize

__all__ = [
    "Score",
    "EvaluationReport",
    "sacrebleu_bleu",
    "chrf",
    "multi_bleu",
    "paper_tokenized_bleu",
    "lowercase_tokenized_bleu",
    "corpus_bleu",
    "sentence_bleu_statistics",
    "bleu_from_statistics",
    "evaluate",
    "evaluate_files",
    "guess_language",
    "DEFAULT_LANG",
]

DEFAULT_LANG = "de"
LOWERCASE_TOKENIZER = "13a"

References = Sequence[str] | Sequence[Sequence[str]]


@dataclasses.dataclass(frozen=True)
class Score:
    """One score with what is needed to compare it honestly.

    Attributes:
      key: its key in the JSON report ("bleu", "chrf", ...).
      label: how it was computed, in words.
      value: the score, 0-100.
      signature: sacreBLEU's signature of the computation ("nrefs:1|case:mixed|...").
      formatted: sacreBLEU's own one-line rendering ("BLEU|nrefs:1|... = 35.21 67.1/...").
      details: BLEU: n-gram precisions (%), brevity penalty, length ratio, hypothesis and
        reference lengths in tokens; chrF: its parameters.
    """

    key: str
    label: str
    value: float
    signature: str
    formatted: str
    details: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _reference_streams(hypotheses: Sequence[str], references: References) -> list[list[str]]:
    """Validate inputs; return references as sacreBLEU streams [num_refs][num_segments]."""
    if isinstance(hypotheses, str) or isinstance(references, str):
        raise TypeError("hypotheses and references must be sequences of strings, not a string")
    hypotheses = list(hypotheses)
    references = list(references)
    if not hypotheses:
        raise EvaluationInputError("nothing to score: the hypothesis list is empty")
    if not all(isinstance(h, str) for h in hypotheses):
        raise TypeError("hypotheses must be strings")
    if references and all(isinstance(r, str) for r in references):
        streams = [references]
    else:
        streams = [list(stream) for stream in references]
        if not streams or not all(isinstance(r, str) for s in streams for r in s):
            raise TypeError("references must be a sequence of strings or of string sequences")
    for k, stream in enumerate(streams):
        if len(stream) != len(hypotheses):
            which = "references" if len(streams) == 1 else f"reference stream {k}"
            raise LineCountMismatchError(
                None, len(hypotheses), None, len(stream),
                f"{len(hypotheses)} hypotheses but {len(stream)} {which}; "
                "each hypothesis needs exactly one reference per stream"
            )
    return streams


def _bleu_details(score) -> dict[str, Any]:
    return {
        "precisions": [float(p) for p in score.precisions],
        "brevity_penalty": float(score.bp),
        "length_ratio": float(score.ratio),
        "hyp_length": int(score.sys_len),
        "ref_length": int(score.ref_len),
        "matching_ngrams": [int(c) for c in score.counts],
        "total_ngrams": [int(t) for t in score.totals],
    }


def _bleu_score(metric: BLEU, key: str, label: str, hypotheses, streams) -> Score:
    result = metric.corpus_score(list(hypotheses), streams)
    signature = str(metric.get_signature())
    return Score(key=key, label=label, value=float(result.score), signature=signature,
                 formatted=result.format(signature=signature), details=_bleu_details(result))


def sacrebleu_bleu(hypotheses: Sequence[str], references: References,
                   lang: str | None = None) -> Score:
    """sacreBLEU: cased BLEU on detokenized text, sacreBLEU's default tokenizer and smoothing.

    Args:
      hypotheses: detokenized system outputs, one string per segment.
      references: detokenized references (strings, or reference streams).
      lang: target language; only changes the tokenizer for zh / ja / ko (13a otherwise).
    """
    streams = _reference_streams(hypotheses, references)
    metric = BLEU(trg_lang=lang or "")
    return _bleu_score(metric, "bleu", "sacreBLEU (cased, detokenized)", hypotheses, streams)


def corpus_bleu(hypotheses: Sequence[str], references: References) -> float:
    """Cased sacreBLEU as a float (0-100): the validation BLEU the training code logs."""
    return sacrebleu_bleu(hypotheses, references).value


def sentence_bleu_statistics(hypotheses: Sequence[str], references: References) -> np.ndarray:
    """[sentences, 10] int64: the counts behind `corpus_bleu`, per sentence: hypothesis and
    closest reference length in tokens, then matching and total n-grams for n = 1..4.
    Summed over any subset of sentences, `bleu_from_statistics` of the sum is that subset's
    corpus BLEU (sacreBLEU's own sufficient statistics; `tests/evaluation` checks the round
    trip against `corpus_bleu`)."""
    streams = _reference_streams(hypotheses, references)
    statistics = BLEU()._extract_corpus_statistics(list(hypotheses), streams)
    return np.asarray(statistics, dtype=np.int64).reshape(len(hypotheses), -1)


def bleu_from_statistics(summed: np.ndarray) -> np.ndarray:
    """[m, 10] summed `sentence_bleu_statistics` -> [m] cased sacreBLEU, 0-100."""
    metric = BLEU()
    return np.array([metric._compute_score_from_stats([int(x) for x in row]).score
                     for row in np.asarray(summed).reshape(-1, 10)], dtype=np.float64)


def chrf(hypotheses: Sequence[str], references: References) -> Score:
    """sacreBLEU's chrF2 (character n-grams up to 6, beta = 2, cased) of detokenized text."""
    streams = _reference_streams(hypotheses, references)
    metric = CHRF()
    result = metric.corpus_score(list(hypotheses), streams)
    signature = str(metric.get_signature())
    return Score(key="chrf", label="chrF2 (sacreBLEU, cased)", value=float(result.score),
                 signature=signature, formatted=result.format(signature=signature),
                 details={"char_order": metric.char_order, "word_order": metric.word_order,
                          "beta": metric.beta})


def multi_bleu(tokenized_hypotheses: Sequence[str], tokenized_references: References,
               lowercase: bool = False):
    """multi-bleu.perl's corpus BLEU on already tokenized text (tokens = whitespace splits).

    Computed by sacreBLEU with tokenize="none", smooth_method="none": clipped n-gram
    precisions p_1..p_4, BP = exp(1 - r/c) if c < r else 1 (r: closest reference lengths,
    c: hypothesis length, summed over the corpus), BLEU = 100 * BP * exp(mean_n log p_n),
    0 when any p_n is 0. `lowercase` is multi-bleu.perl's -lc.

    Returns:
      (sacrebleu BLEUScore, BLEU metric) -- the score and the metric that computed it.
    """
    streams = _reference_streams(tokenized_hypotheses, tokenized_references)
    metric = BLEU(tokenize="none", smooth_method="none", lowercase=lowercase, force=True)
    return metric.corpus_score(list(tokenized_hypotheses), streams), metric


def paper_tokenized_bleu(hypotheses: Sequence[str], references: References,
                         lang: str = DEFAULT_LANG,
                         compound_splitting: bool | None = None) -> Score:
    """The paper's tokenized BLEU: Moses tokenization (+ ##AT## compounds), multi-bleu.

    Args:
      hypotheses, references: detokenized text, as for `sacrebleu_bleu`.
      lang: target language (tokenizer rules; compound splitting defaults on for "de").
      compound_splitting: force compound splitting on or off; None = on for German only.

    Returns:
      A `Score` keyed "bleu_paper_tokenized"; not comparable with sacreBLEU's number.
    """
    streams = _reference_streams(hypotheses, references)
    if compound_splitting is None:
        compound_splitting = lang == "de"
    tok_hyps = [paper_tokenize(h, lang, compound_splitting) for h in hypotheses]
    tok_streams = [[paper_tokenize(r, lang, compound_splitting) for r in s] for s in streams]
    result, metric = multi_bleu(tok_hyps, tok_streams)
    steps = f"Moses tokenizer (sacremoses, lang={lang})"
    if compound_splitting:
        steps += " + ##AT## compound splitting"
    label = (f"paper-style tokenized BLEU: {steps} + multi-bleu.perl "
             "(cased, no smoothing); not comparable with sacreBLEU")
    # sacreBLEU's signature of the multi-bleu step, prefixed by how the text was tokenized.
    pretok = f"moses-{lang}" + ("+atat" if compound_splitting else "")
    signature = f"pretok:{pretok}|{metric.get_signature()}"
    return Score(key="bleu_paper_tokenized", label=label, value=float(result.score),
                 signature=signature, formatted=result.format(), details=_bleu_details(result))


def lowercase_tokenized_bleu(hypotheses: Sequence[str], references: References) -> Score:
    """Lowercased tokenized BLEU as the Multi30k literature reports it.

    Exactly: sacreBLEU corpus BLEU with lowercase=True, tokenize="13a" (mteval-v13a
    tokenization), default "exp" smoothing, on the detokenized text.
    """
    streams = _reference_streams(hypotheses, references)
    metric = BLEU(lowercase=True, tokenize=LOWERCASE_TOKENIZER)
    label = (f"lowercased tokenized BLEU (sacreBLEU lowercase=True tokenize="
             f"{LOWERCASE_TOKENIZER}; the Multi30k literature's convention)")
    return _bleu_score(metric, "bleu_lowercase_tokenized", label, hypotheses, streams)


@dataclasses.dataclass(frozen=True)
class EvaluationReport:
    """All scores of one hypothesis set: sacreBLEU, chrF, paper-style and lowercased BLEU."""

    scores: tuple[Score, ...]
    lang: str
    num_segments: int
    num_references: int
    hypothesis_file: str | None = None
    reference_files: tuple[str, ...] = ()
    # `significance.Comparison` with another system (evaluate --against), or None.
    comparison: Any = None

    def __getitem__(self, key: str) -> Score:
        for score in self.scores:
            if score.key == key:
                return score
        raise KeyError(f"no score {key!r}; have {[s.key for s in self.scores]}")

    def to_dict(self) -> dict[str, Any]:
        """{"bleu", "chrf", "signature", ...}: flat values first, full records under "scores"."""
        out: dict[str, Any] = {}
        for score in self.scores:
            out[score.key] = score.value
        out["signature"] = self["bleu"].signature
        for score in self.scores:
            if score.key != "bleu":
                out[f"{score.key}_signature"] = score.signature
        out.update({
            "lang": self.lang,
            "num_segments": self.num_segments,
            "num_references": self.num_references,
            "sacrebleu_version": sacrebleu.__version__,
        })
        if self.hypothesis_file is not None:
            out["hyp"] = self.hypothesis_file
            out["ref"] = list(self.reference_files)
        out["scores"] = {score.key: score.to_dict() for score in self.scores}
        if self.comparison is not None:
            out["significance"] = self.comparison.to_dict()
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def format_text(self) -> str:
        """Human-readable report: one labelled block per score, sacreBLEU's own lines."""
        lines = [f"{self.num_segments} segments, {self.num_references} reference(s), "
                 f"target language {self.lang}"]
        for score in self.scores:
            lines.append(f"{score.label}:")
            lines.append(f"  {score.formatted}")
        if self.comparison is not None:
            lines.append(self.comparison.format_text())
        return "\n".join(lines)


def evaluate(hypotheses: Sequence[str], references: References, lang: str = DEFAULT_LANG,
             compound_splitting: bool | None = None) -> EvaluationReport:
    """Every score of a hypothesis set (see the module docstring for what each one is).

    Args:
      hypotheses: detokenized system outputs, one per segment.
      references: detokenized references (strings, or sacreBLEU reference streams).
      lang: target language code (tokenizer rules of the paper-style BLEU).
      compound_splitting: for the paper-style BLEU; None = on for German only.
    """
    streams = _reference_streams(hypotheses, references)
    hypotheses = list(hypotheses)
    scores = (
        sacrebleu_bleu(hypotheses, streams, lang),
        chrf(hypotheses, streams),
        paper_tokenized_bleu(hypotheses, streams, lang, compound_splitting),
        lowercase_tokenized_bleu(hypotheses, streams),
    )
    return EvaluationReport(scores=scores, lang=lang, num_segments=len(hypotheses),
                            num_references=len(streams))


_LANG_SUFFIX = re.compile(r"[._-]([a-z]{2})(?:\.(?:txt|gz|txt\.gz|detok|sgm))*$")


def guess_language(path: str | os.PathLike) -> str | None:
    """The two-letter language code in a file name like "test_2016_flickr.de.gz", or None."""
    match = _LANG_SUFFIX.search(os.path.basename(os.fspath(path)))
    if not match or match.group(1) in {"gz", "tx"}:
        return None
    return match.group(1)


def evaluate_files(hyp_path: str | os.PathLike,
                   ref_paths: str | os.PathLike | Sequence[str | os.PathLike],
                   lang: str | None = None,
                   compound_splitting: bool | None = None) -> EvaluationReport:
    """`evaluate` on files: one segment per line, UTF-8 (".gz" decompressed).

    Args:
      hyp_path: hypothesis file.
      ref_paths: reference file, or several (multiple references per segment).
      lang: target language; None = taken from the first reference's name ("x.de"), else
        DEFAULT_LANG ("de").
      compound_splitting: for the paper-style BLEU; None = on for German only.

    Raises:
      EvaluationInputError: unreadable / non-UTF-8 file (file and line named), no segments.
      LineCountMismatchError: line counts differ (both files and both counts named).
    """
    if isinstance(ref_paths, (str, os.PathLike)):
        ref_paths = [ref_paths]
    ref_paths = [os.fspath(p) for p in ref_paths]
    hypotheses, streams = read_hypotheses_and_references(hyp_path, ref_paths)
    if not hypotheses:
        raise EvaluationInputError(f"{os.fspath(hyp_path)} is empty: nothing to score")
    if lang is None:
        lang = (guess_language(ref_paths[0]) if ref_paths else None) or DEFAULT_LANG
    report = evaluate(hypotheses, streams, lang, compound_splitting)
    return dataclasses.replace(report, hypothesis_file=os.fspath(hyp_path),
                               reference_files=tuple(ref_paths))
