"""Alignment error rate (Och & Ney 2003) of word alignments against hand alignments.

A hand alignment has sure links S and possible links P (S is a subset of P: a sure link
is also possible); for predicted links A,

    AER = 1 - (|A & S| + |A & P|) / (|A| + |S|)

(0 is perfect). Links are (source index, target index) pairs of words, written in
Pharaoh format, "i-j" separated by spaces, as fast_align and `translate --alignments`
write them.
"""
from __future__ import annotations

from typing import Iterable, Sequence


def parse_pharaoh(text: str) -> set[tuple[int, int]]:
    """"0-0 1-2" -> {(0, 0), (1, 2)}; ValueError naming the malformed pair."""
    links = set()
    for pair in text.split():
        source, sep, target = pair.partition("-")
        if not (sep and source.isdigit() and target.isdigit()):
            raise ValueError(f"alignment pair {pair!r}: expected 'i-j' with word indices")
        links.add((int(source), int(target)))
    return links


def alignment_error_rate(predicted: Sequence[Iterable[tuple[int, int]]],
                         sure: Sequence[Iterable[tuple[int, int]]],
                         possible: Sequence[Iterable[tuple[int, int]]]) -> float:
    """AER over a corpus (counts summed over sentences, then the formula); `possible`
    per sentence need not repeat the sure links (they are added). ValueError when the
    three differ in sentences or nothing is aligned at all."""
    if not len(predicted) == len(sure) == len(possible):
        raise ValueError(f"{len(predicted)} predicted, {len(sure)} sure and "
                         f"{len(possible)} possible alignments: one each per sentence")
    hits_sure = hits_possible = size_a = size_s = 0
    for a, s, p in zip(predicted, sure, possible):
        a, s = set(a), set(s)
        p = set(p) | s
        hits_sure += len(a & s)
        hits_possible += len(a & p)
        size_a += len(a)
        size_s += len(s)
    if size_a + size_s == 0:
        raise ValueError("no links at all, predicted or sure")
    return 1.0 - (hits_sure + hits_possible) / (size_a + size_s)
