"""Beam size and alpha chosen on the dev set: the grid's argmax is recorded in the run
directory, export and translate use it as the run's default, an explicit setting wins."""
import argparse
import random
import shutil

import pytest

from transformer_tf.cli.flags import search_settings
from transformer_tf.export.saved_model import export_model_dir
from transformer_tf.inference.decoding_choice import (
    DecodingScore,
    choose_decoding,
    decoding_grid,
    pick_decoding,
)
from transformer_tf.inference.loading import (
    load_trained,
    read_export_info,
    source_decoding,
)
from transformer_tf.rundir import checkpoints
from transformer_tf.rundir.model_dir import (
    DECODING_FILE,
    read_chosen_decoding,
    read_run_config,
)


class _TableScorer:
    """A dev scorer whose BLEU for each search setting comes from a known table."""

    def __init__(self, table):
        self.table = table
        self.asked = []

    def bleu_with(self, checkpoint, beam_size, alpha):
        self.asked.append((beam_size, alpha))
        return self.table[(beam_size, alpha)]


def test_the_grid_tries_greedy_once_and_cheaper_searches_first():
    assert decoding_grid((6, 1, 4), (0.6, 1.0)) == [(1, 0.6), (4, 0.6), (4, 1.0), (6, 0.6),
                                                    (6, 1.0)]
    assert decoding_grid((4,), (1.0, 0.6, 1.0)) == [(4, 1.0), (4, 0.6)]
    assert decoding_grid((1,), (0.6, 1.0)) == [(1, 0.6)]
    # ConvS2S's per-token ranking ignores alpha: each beam size once.
    assert decoding_grid((1, 4), (0.6, 1.0), "average") == [(1, 0.6), (4, 0.6)]
    for beams, alphas in (((), (0.6,)), ((4,), ())):
        with pytest.raises(ValueError, match="at least one beam size and one alpha"):
            decoding_grid(beams, alphas)
    with pytest.raises(ValueError, match="no decoding settings"):
        pick_decoding([])


def test_the_pick_is_the_highest_bleu_and_the_first_listed_of_equals():
    rng = random.Random(0)
    grid = decoding_grid((1, 4, 6), (0.6, 1.0))
    for _ in range(200):
        scores = [DecodingScore(beam, alpha, rng.choice([20.0, 21.0, 22.0]))
                  for beam, alpha in grid]
        top = max(score.dev_bleu for score in scores)
        first_top = next(score for score in scores if score.dev_bleu == top)
        assert pick_decoding(scores) is first_top


def test_the_argmax_of_a_known_table_is_recorded_and_export_uses_it(tiny_run, tmp_path,
                                                                    caplog):
    run = tmp_path / "model"
    shutil.copytree(tiny_run, run)
    checkpoint = checkpoints.newest_readable(run)
    table = {(1, 0.6): 20.0, (4, 0.6): 21.5, (4, 1.0): 22.25, (6, 0.6): 21.0, (6, 1.0): 22.25}
    scorer = _TableScorer(table)
    chosen = choose_decoding(run, scorer, checkpoint, decoding_grid((1, 4, 6), (0.6, 1.0)),
                             known={(4, 0.6): 21.5})
    # The argmax; beam 6 with alpha 1.0 ties it, but costs more and is listed later.
    assert (chosen.beam_size, chosen.alpha) == (4, 1.0)
    assert sorted(scorer.asked) == [(1, 0.6), (4, 1.0), (6, 0.6), (6, 1.0)]  # 4, 0.6 known
    assert {(row["beam_size"], row["alpha"]): row["dev_bleu"] for row in chosen.scores} == table
    assert "beam 4, alpha 1: dev BLEU 22.25; next beam 6, alpha 1: dev BLEU 22.25" \
        in chosen.reason
    recorded = read_chosen_decoding(run)
    assert (recorded.beam_size, recorded.alpha, recorded.checkpoint) == (4, 1.0, checkpoint)
    assert '"checkpoint": "checkpoints/ckpt-1"' in (run / DECODING_FILE).read_text()

    # The run's default from now on (its run config says beam 2, alpha 0.6) ...
    configured = read_run_config(run).decoding
    assert (configured.beam_size, configured.alpha) == (2, 0.6)
    out = export_model_dir(run, tmp_path / "saved" / "1", warmup=False)
    exported = read_export_info(out)["decoding"]
    assert (exported["beam_size"], exported["alpha"]) == (4, 1.0)
    # ... but an explicit setting wins, field by field.
    decoding = search_settings(argparse.Namespace(beam_size=3), source_decoding(model_dir=run))
    assert (decoding.beam_size, decoding.alpha) == (3, 1.0)

    # A damaged record is ignored, with a warning naming it.
    (run / DECODING_FILE).write_text('{"beam_size": 0, "alpha": 1.0}')
    decoding = load_trained(run)[2].decoding
    assert (decoding.beam_size, decoding.alpha) == (2, 0.6)
    assert f"{run / DECODING_FILE}: unreadable" in caplog.text
