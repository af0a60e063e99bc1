"""Beam size and length penalty chosen on the development set.

A small grid of search settings is tried with the chosen checkpoint; each is scored by the
cased sacreBLEU of its dev translations, and the highest wins (a tie keeps the setting
listed first: the grid lists the cheaper searches first). The dev NLL is the same for
every setting (the weights do not change), so the selection rule's NLL fallback
(selection.choose) has nothing to decide here. Greedy search (beam 1) has a single
hypothesis, whose length penalty ranks nothing, so it is tried once.

The choice is recorded in MDIR/chosen_decoding.json (`model_dir.ChosenDecoding`), which
makes it the run's search default for export and translate (`loading.run_decoding`).
"""
from __future__ import annotations

import dataclasses
import itertools

from transformer_tf.rundir import model_dir as model_dir_lib


@dataclasses.dataclass(frozen=True)
class DecodingScore:
    beam_size: int
    alpha: float
    dev_bleu: float  # cased sacreBLEU of the dev translations

    def describe(self) -> str:
        return f"beam {self.beam_size}, alpha {self.alpha:g}: dev BLEU {self.dev_bleu:.2f}"


def decoding_grid(beam_sizes, alphas, length_penalty: str = "gnmt") -> list[tuple[int, float]]:
    """(beam_size, alpha) pairs, smaller beams first, alphas in the order given. Where
    alpha changes nothing (beam 1, or the "average" length penalty, which ignores it),
    each beam size comes once, with the first alpha."""
    beam_sizes, alphas = sorted(set(beam_sizes)), list(dict.fromkeys(alphas))
    if not beam_sizes or not alphas:
        raise ValueError("a decoding grid needs at least one beam size and one alpha")
    return [(beam, alpha) for beam, alpha in itertools.product(beam_sizes, alphas)
            if (beam > 1 and length_penalty != "average") or alpha == alphas[0]]


def pick_decoding(scores: list[DecodingScore]) -> DecodingScore:
    """The highest dev BLEU of `scores`; the first of equals."""
    if not scores:
        raise ValueError("no decoding settings were scored")
    return max(scores, key=lambda score: score.dev_bleu)  # max keeps the first of equals


def choose_decoding(model_dir, scorer, checkpoint, grid,
                    known=None) -> model_dir_lib.ChosenDecoding:
    """Score every (beam_size, alpha) of `grid` on the dev set with `checkpoint`, keep the
    best (`pick_decoding`) and record it in the run directory (`write_chosen_decoding`).

    Args:
      model_dir: the run directory (hold its lock).
      scorer: a `selection.DevScorer` of the run (its `bleu_with` translates the dev set).
      checkpoint: the checkpoint prefix to search with (the dev-set choice).
      grid: (beam_size, alpha) pairs (`decoding_grid`).
      known: {(beam_size, alpha): dev BLEU} already measured with `checkpoint` on the same
        dev sentences (not translated again).
    """
    known = dict(known or {})
    scores = [DecodingScore(beam, alpha, known[(beam, alpha)] if (beam, alpha) in known
                            else scorer.bleu_with(checkpoint, beam, alpha))
              for beam, alpha in grid]
    best = pick_decoding(scores)
    others = sorted((s for s in scores if s is not best), key=lambda s: -s.dev_bleu)
    reason = (f"the highest dev BLEU of {len(scores)} search setting(s): {best.describe()}"
              + (f"; next {others[0].describe()}" if others else ""))
    chosen = model_dir_lib.ChosenDecoding(
        beam_size=best.beam_size, alpha=best.alpha, reason=reason, checkpoint=str(checkpoint),
        scores=[dataclasses.asdict(score) for score in scores])
    model_dir_lib.write_chosen_decoding(model_dir, chosen)
    return chosen
