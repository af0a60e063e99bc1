"""Is system A better than system B on this test set, or is the difference noise?

Paired bootstrap over sentences (Efron & Tibshirani 1993; as used for MT and parsing by
Koehn 2004 and Berg-Kirkpatrick et al. 2012): draw the test set's sentences with
replacement, score both systems' outputs of the same drawn sentences with the corpus-level
metric, and repeat. The spread of score(A) - score(B) over the draws is what a different
sample of sentences of the same kind could have given.

Both metrics here are corpus-level functions of per-sentence counts that add up: EVALB's F1
of matched, gold and test brackets (long sentences weigh more, as in EVALB), and sacreBLEU's
BLEU of n-gram matches and lengths. A draw is then a weighted sum of those counts.

Each parser keeps its own EVALB rules inside a draw: an error sentence of A is left out of
A's totals only, exactly as `evalb` leaves it out of A's report.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np

from transformer_tf.evaluation.evalb import SentenceScore, bracket_f1
from transformer_tf.evaluation.scoring import (
    References,
    bleu_from_statistics,
    sentence_bleu_statistics,
)

# A difference is "beyond noise" when the better system is higher in at least this fraction
# of the draws: a one-sided test at the 5% level (Koehn 2004).
SIGNIFICANT_FRACTION = 0.95


@dataclasses.dataclass(frozen=True)
class PairedBootstrap:
    """Scores in percent (0-100). `interval` is the central `confidence` interval of
    score(A) - score(B) over the draws; `a_better` / `b_better` the fraction of draws in
    which A's (B's) score is strictly higher."""

    metric: str  # "F1", "BLEU"
    sentences: int
    samples: int
    score_a: float
    score_b: float
    difference: float
    interval: tuple[float, float]
    confidence: float
    a_better: float
    b_better: float

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @property
    def beyond_noise(self) -> bool:
        """True when the system with the higher score is higher in at least
        `SIGNIFICANT_FRACTION` of the draws (a tie never is)."""
        if self.difference > 0:
            return self.a_better >= SIGNIFICANT_FRACTION
        if self.difference < 0:
            return self.b_better >= SIGNIFICANT_FRACTION
        return False

    def format_text(self, name_a: str = "A", name_b: str = "B") -> str:
        low, high = self.interval
        return (f"{self.metric} {name_a} {self.score_a:.2f}  {name_b} {self.score_b:.2f}  "
                f"difference {self.difference:+.2f}\n{100 * self.confidence:.0f}% interval of "
                f"the difference [{low:+.2f}, {high:+.2f}] over {self.samples} paired bootstrap "
                f"samples of the {self.sentences} sentences; {name_a} higher in "
                f"{100 * self.a_better:.1f}%, {name_b} higher in {100 * self.b_better:.1f}%")


def draw_counts(sentences: int, samples: int, seed: int) -> np.ndarray:
    """[samples, sentences] int64: how often each sentence is drawn in each bootstrap
    sample (each row a multinomial draw of `sentences` sentences, equally likely)."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(sentences, np.full(sentences, 1.0 / sentences), size=samples)


def paired_bootstrap_of_counts(counts_a: np.ndarray, counts_b: np.ndarray,
                               corpus_score: Callable[[np.ndarray], np.ndarray], metric: str,
                               samples: int = 1000, confidence: float = 0.95,
                               seed: int = 0) -> PairedBootstrap:
    """Paired bootstrap of a corpus metric computed from per-sentence counts that add up.

    Args:
      counts_a: [sentences, k] counts of A's output of each sentence.
      counts_b: [sentences, k] counts of B's output, in the same sentence order.
      corpus_score: [m, k] summed counts -> [m] corpus scores in percent.
      metric: the metric's name, for the report.

    Raises:
      ValueError: the two differ in sentences or are empty, `samples` < 1, or `confidence`
        is not in (0, 1).
    """
    counts_a, counts_b = np.asarray(counts_a), np.asarray(counts_b)
    if len(counts_a) != len(counts_b):
        raise ValueError(f"{len(counts_a)} sentences scored for A but {len(counts_b)} for B")
    if not len(counts_a):
        raise ValueError("no sentences to compare")
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    score_a = float(corpus_score(counts_a.sum(axis=0, keepdims=True))[0])
    score_b = float(corpus_score(counts_b.sum(axis=0, keepdims=True))[0])
    draws = draw_counts(len(counts_a), samples, seed)
    differences = corpus_score(draws @ counts_a) - corpus_score(draws @ counts_b)  # [samples]
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(differences, [tail, 100.0 - tail])
    return PairedBootstrap(
        metric=metric, sentences=len(counts_a), samples=samples, score_a=score_a,
        score_b=score_b, difference=score_a - score_b, interval=(float(low), float(high)),
        confidence=confidence, a_better=float(np.mean(differences > 0)),
        b_better=float(np.mean(differences < 0)))


def _bracket_counts(scores: Sequence[SentenceScore]) -> np.ndarray:
    """[sentences, 3] int64: matched, gold and test brackets, zero for non-"ok" lines."""
    return np.array([[s.matched, s.gold_brackets, s.test_brackets] if s.status == "ok"
                     else [0, 0, 0] for s in scores], dtype=np.int64).reshape(-1, 3)


def _f1_of_counts(summed: np.ndarray) -> np.ndarray:
    return np.asarray(bracket_f1(*summed.T), dtype=np.float64)


def paired_bootstrap(scores_a: Sequence[SentenceScore], scores_b: Sequence[SentenceScore],
                     samples: int = 1000, confidence: float = 0.95,
                     seed: int = 0) -> PairedBootstrap:
    """Paired bootstrap of EVALB F1 for two parsers' scores of the same sentences, in
    the same order (`EvalbReport.sentences` of each). Raises ValueError as
    `paired_bootstrap_of_counts`."""
    return paired_bootstrap_of_counts(_bracket_counts(scores_a), _bracket_counts(scores_b),
                                      _f1_of_counts, "F1", samples, confidence, seed)


def bleu_paired_bootstrap(hypotheses_a: Sequence[str], hypotheses_b: Sequence[str],
                          references: References, samples: int = 1000,
                          confidence: float = 0.95, seed: int = 0) -> PairedBootstrap:
    """Paired bootstrap of cased sacreBLEU (`scoring.corpus_bleu`) for two systems'
    translations of the same sentences. Raises ValueError as `paired_bootstrap_of_counts`,
    and when a hypothesis list and the references differ in length."""
    return paired_bootstrap_of_counts(sentence_bleu_statistics(hypotheses_a, references),
                                      sentence_bleu_statistics(hypotheses_b, references),
                                      bleu_from_statistics, "BLEU", samples, confidence, seed)
