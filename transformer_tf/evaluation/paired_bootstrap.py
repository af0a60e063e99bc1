"""Is parser A better than parser B on this test set, or is the difference noise?

Paired bootstrap over sentences (Efron & Tibshirani 1993; as used for parsing and MT by
Koehn 2004 and Berg-Kirkpatrick et al. 2012): draw the test set's sentences with
replacement, score both parsers' trees of the same drawn sentences with EVALB's corpus-level
F1 (totals of matched, gold and test brackets, so long sentences weigh more, as in EVALB),
and repeat. The spread of F1(A) - F1(B) over the draws is what a different sample of
sentences of the same kind could have given.

Each parser keeps its own EVALB rules inside a draw: an error sentence of A is left out of
A's totals only, exactly as `evalb` leaves it out of A's report.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from transformer_tf.evaluation.evalb import SentenceScore, bracket_f1


@dataclasses.dataclass(frozen=True)
class PairedBootstrap:
    """F1 in percent. `interval` is the central `confidence` interval of F1(A) - F1(B) over
    the draws; `a_better` / `b_better` the fraction of draws in which A's (B's) F1 is
    strictly higher."""

    sentences: int
    samples: int
    f1_a: float
    f1_b: float
    difference: float
    interval: tuple[float, float]
    confidence: float
    a_better: float
    b_better: float

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def format_text(self, name_a: str = "A", name_b: str = "B") -> str:
        low, high = self.interval
        return (f"F1 {name_a} {self.f1_a:.2f}  {name_b} {self.f1_b:.2f}  difference "
                f"{self.difference:+.2f}\n{100 * self.confidence:.0f}% interval of the "
                f"difference [{low:+.2f}, {high:+.2f}] over {self.samples} paired bootstrap "
                f"samples of the {self.sentences} sentences; {name_a} higher in "
                f"{100 * self.a_better:.1f}%, {name_b} higher in {100 * self.b_better:.1f}%")


def _counts(scores: Sequence[SentenceScore]) -> np.ndarray:
    """[3, sentences] int64: matched, gold and test brackets, zero for non-"ok" lines."""
    return np.array([[s.matched, s.gold_brackets, s.test_brackets] if s.status == "ok"
                     else [0, 0, 0] for s in scores], dtype=np.int64).T


def draw_counts(sentences: int, samples: int, seed: int) -> np.ndarray:
    """[samples, sentences] int64: how often each sentence is drawn in each bootstrap
    sample (each row a multinomial draw of `sentences` sentences, equally likely)."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(sentences, np.full(sentences, 1.0 / sentences), size=samples)


def paired_bootstrap(scores_a: Sequence[SentenceScore], scores_b: Sequence[SentenceScore],
                     samples: int = 1000, confidence: float = 0.95,
                     seed: int = 0) -> PairedBootstrap:
    """Paired bootstrap of EVALB F1 for two parsers' scores of the same sentences, in
    the same order (`EvalbReport.sentences` of each).

    Raises:
      ValueError: the two lists differ in length or are empty, `samples` < 1, or
        `confidence` is not in (0, 1).
    """
    if len(scores_a) != len(scores_b):
        raise ValueError(f"{len(scores_a)} sentences scored for A but {len(scores_b)} for B")
    if not scores_a:
        raise ValueError("no sentences to compare")
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    counts_a, counts_b = _counts(scores_a), _counts(scores_b)
    f1_a = float(bracket_f1(*counts_a.sum(axis=1)))
    f1_b = float(bracket_f1(*counts_b.sum(axis=1)))
    draws = draw_counts(len(scores_a), samples, seed)
    drawn_a = bracket_f1(*(draws @ counts_a.T).T)  # [samples]
    drawn_b = bracket_f1(*(draws @ counts_b.T).T)
    differences = drawn_a - drawn_b
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(differences, [tail, 100.0 - tail])
    return PairedBootstrap(
        sentences=len(scores_a), samples=samples, f1_a=f1_a, f1_b=f1_b,
        difference=f1_a - f1_b, interval=(float(low), float(high)), confidence=confidence,
        a_better=float(np.mean(differences > 0)), b_better=float(np.mean(differences < 0)))
