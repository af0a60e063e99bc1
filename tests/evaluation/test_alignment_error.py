"""AER (`evaluation.alignment_error`) worked by hand, Pharaoh parsing, and the committed
hand-aligned sample that bench/alignment_error_rate.py measures against."""
import json
from pathlib import Path

import pytest

from transformer_tf.evaluation.alignment_error import alignment_error_rate, parse_pharaoh

SAMPLE = Path(__file__).resolve().parents[2] / "results" / "raw" / \
    "multi30k-test2016-hand-aligned.json"


def test_pharaoh_pairs_parse_and_bad_ones_are_named():
    assert parse_pharaoh("0-0 2-1  1-3\n") == {(0, 0), (2, 1), (1, 3)}
    assert parse_pharaoh("") == set()
    with pytest.raises(ValueError, match="'1:2'"):
        parse_pharaoh("0-0 1:2")


def test_aer_by_hand():
    sure, possible = [{(0, 0), (1, 1)}], [{(2, 1)}]
    assert alignment_error_rate([{(0, 0), (1, 1)}], sure, possible) == 0.0
    # A = {(0,0), (2,1), (2,2)}: |A&S| = 1, |A&P| = 2 (P includes S), |A| = 3, |S| = 2.
    assert alignment_error_rate([{(0, 0), (2, 1), (2, 2)}], sure, possible) == \
        pytest.approx(1 - 3 / 5)
    # Summed over sentences, not averaged: a second, perfect sentence of 2 links.
    assert alignment_error_rate([{(0, 0), (2, 1), (2, 2)}, {(0, 0), (1, 1)}],
                                sure * 2, possible + [set()]) == pytest.approx(1 - 7 / 9)
    with pytest.raises(ValueError, match="one each per sentence"):
        alignment_error_rate([set()], sure, [])


def test_the_hand_aligned_sample_is_well_formed():
    pairs = json.loads(SAMPLE.read_text(encoding="utf-8"))["pairs"]
    assert len(pairs) == 20
    for pair in pairs:
        sure, possible = parse_pharaoh(pair["sure"]), parse_pharaoh(pair["possible"])
        assert sure and not sure & possible
        words = len(pair["source"].split()), len(pair["target"].split())
        assert all(i < words[0] and j < words[1] for i, j in sure | possible)
