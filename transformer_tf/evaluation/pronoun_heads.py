"""Which attention heads resolve possessive pronouns: for each head, the share of cases in
which the pronoun's strongest attention goes to its antecedent, against the best
positional baseline (no TensorFlow here; `jobs.pronoun_heads` feeds it a model's
attention).

A case is one sentence with a pronoun at word p and its antecedent at word a
(`data.possessives`). A head's choice is the word, other than the pronoun itself, with
the largest weight in the pronoun's row of its word-level attention (pieces merged as in
`visualization.words.merge_weights`); ties go to the earlier word. The positional
baseline answers every case with the word at p + d for one fixed offset d != 0; its share
is that of the best d (ties: the smaller |d|, then the negative one).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np


def strongest_other_word(rows: np.ndarray, pronoun: int) -> np.ndarray:
    """rows float [layers, heads, words], the pronoun's attention over the words ->
    int [layers, heads], each head's most attended word other than `pronoun`."""
    masked = np.array(rows, dtype=np.float64, copy=True)
    masked[..., pronoun] = -np.inf
    return masked.argmax(axis=-1)


def head_hits(choices: np.ndarray, antecedents: Sequence[int]) -> np.ndarray:
    """choices int [cases, layers, heads], antecedents [cases] -> int [layers, heads]:
    the number of cases each head chose the antecedent in (divide by the cases for its
    share)."""
    return (choices == np.asarray(antecedents)[:, None, None]).sum(axis=0)


@dataclasses.dataclass(frozen=True)
class PositionalBaseline:
    """The best fixed offset (antecedent = pronoun + offset) and the share it gets right."""

    offset: int
    share: float


def positional_baseline(pronouns: Sequence[int], antecedents: Sequence[int],
                        lengths: Sequence[int]) -> PositionalBaseline:
    """The best fixed offset over cases given by pronoun and antecedent word indices and
    their sentences' lengths in words (module doc)."""
    if not len(pronouns):
        raise ValueError("no cases to score")
    longest = max(lengths)
    offsets = sorted((d for d in range(-longest + 1, longest) if d != 0),
                     key=lambda d: (abs(d), d))
    pronouns, antecedents = np.asarray(pronouns), np.asarray(antecedents)
    best = max(offsets, key=lambda d: (np.mean(pronouns + d == antecedents), -offsets.index(d)))
    return PositionalBaseline(best, float(np.mean(pronouns + best == antecedents)))


@dataclasses.dataclass(frozen=True)
class HeadAgainstOffset:
    """One head against the positional baseline on the same cases: the cases only the head
    answers right, those only the offset answers right, and the exact two-sided sign test
    over these discordant cases (McNemar's exact test): the chance of a split at least
    this uneven if either were as likely to be the one right."""

    head_only: int
    offset_only: int
    p_value: float


def sign_test_p_value(wins: int, losses: int) -> float:
    """Exact two-sided sign test: 2 * P(X <= min(wins, losses)) for X ~ Binomial(wins +
    losses, 1/2), at most 1; 1.0 with no discordant case."""
    n = wins + losses
    tail = sum(math.comb(n, k) for k in range(min(wins, losses) + 1)) / 2 ** n
    return min(1.0, 2.0 * tail)


def head_against_offset(head_choices: Sequence[int], pronouns: Sequence[int],
                        antecedents: Sequence[int], offset: int) -> HeadAgainstOffset:
    """head_choices [cases], the word one head chose for each case, against the baseline
    answering pronoun + `offset`; pronouns and antecedents [cases] word indices."""
    antecedents = np.asarray(antecedents)
    head_right = np.asarray(head_choices) == antecedents
    offset_right = np.asarray(pronouns) + offset == antecedents
    head_only = int(np.sum(head_right & ~offset_right))
    offset_only = int(np.sum(offset_right & ~head_right))
    return HeadAgainstOffset(head_only, offset_only, sign_test_p_value(head_only, offset_only))
