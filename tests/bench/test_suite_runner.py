"""bench/suite_runner.py's --rounds: of two results of one worker, each configuration keeps
its better figure and the figures of every round."""
from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import suite_runner  # noqa: E402


def _decode_run(compute_type, tokens_per_s, beam=4):
    return {"shape": "multi30k", "beam": beam, "batch": 32, "compute_type": compute_type,
            "output_tokens_per_s": tokens_per_s}


def test_each_compute_type_of_a_configuration_keeps_its_own_best():
    first = {"runs": [_decode_run("float32", 1500.0), _decode_run("int8", 3000.0),
                      _decode_run("float32", 4000.0, beam=1)]}
    second = {"runs": [_decode_run("float32", 1600.0), _decode_run("int8", 2900.0),
                       _decode_run("float32", 3900.0, beam=1)]}
    merged = suite_runner.merge_results(first, second)
    found = {(run["compute_type"], run["beam"]): run for run in merged["runs"]}
    assert len(merged["runs"]) == 3
    assert found["float32", 4]["output_tokens_per_s"] == 1600.0
    assert found["float32", 4]["all_rounds"] == [1500.0, 1600.0]
    assert found["int8", 4]["output_tokens_per_s"] == 3000.0
    assert found["int8", 4]["all_rounds"] == [3000.0, 2900.0]
    assert found["float32", 1]["all_rounds"] == [4000.0, 3900.0]


def test_a_configuration_only_one_round_ran_is_kept():
    merged = suite_runner.merge_results({"runs": [_decode_run("float32", 10.0)]},
                                        {"runs": [_decode_run("int8", 20.0)]})
    assert sorted(run["compute_type"] for run in merged["runs"]) == ["float32", "int8"]


def test_a_single_figure_keeps_the_better_round():
    merged = suite_runner.merge_results({"target_tokens_per_s": 300.0, "note": "a"},
                                        {"target_tokens_per_s": 280.0, "note": "b"})
    assert merged["note"] == "a" and merged["all_rounds"] == [300.0, 280.0]
