"""bench/ctranslate2_runs.py summarises ours against CTranslate2 over repeated serving runs:
medians, ranges and best layouts worked out by hand from made-up runs, a cell an engine
failed in, and a results file the docs' renderer accepts."""
from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest

from transformer_tf.evaluation import results_tables

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load_tool():
    spec = importlib.util.spec_from_file_location("bench_ctranslate2_runs",
                                                  ROOT / "bench" / "ctranslate2_runs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tool = _load_tool()

COMMAND = ("python bench/run_all.py --only matmul,serving --json --model-dir "
           "runs/multi30k_en_de/model --serving-sentences 400")


def _entry(ours, peer, lanes, peer_lanes, xla=None, k_finished=None) -> dict:
    """A serving entry as bench/comparison.compare leaves it (its ratios worked here)."""
    best_ours = max(v for v in (ours, lanes, xla) if v is not None)
    entry = {"ours": ours, "peer": peer, "ours_lanes": lanes, "peer_lanes": peer_lanes,
             "lanes": 2, "ours_chunked_xla": xla, "ratio": ours / peer,
             "ratio_best": best_ours / max(peer, peer_lanes)}
    if k_finished is not None:
        entry["ours_k_finished"] = k_finished
        entry["ratio_same_rule"] = k_finished / max(peer, peer_lanes)
    return entry


def _run(beam64: dict, *, commit="abc1234", out="a.json", kind="AVX2") -> dict:
    """A run_all JSON whose serving section measured beam 4 at batch 64 (as given) and
    greedy at batch 1; greedy at batch 8 failed on CTranslate2's side (ratio None)."""
    return {
        "commit": commit, "command": f"{COMMAND} --out {out}", "started": "2026-12-06T19:00:00",
        "machine": {"description": "AMD EPYC, 2 cores; flags: avx2, fma"},
        "matmul_peak": {"tf_gflops": 100.0},
        "fast_paths": {kind: {"paths": {}}},
        "benchmarks": {
            "serving_multi30k_beam4_batch1": {"details": {"ours": {"sentences": 400}}},
            "serving_multi30k_beam4_batch64": beam64,
            "serving_multi30k_greedy_batch1": _entry(20.0, 10.0, 15.0, 40.0, xla=30.0),
            "serving_multi30k_greedy_batch8": {"ours": 50.0, "peer": None, "ratio": None},
        },
    }


def _three_runs() -> dict:
    # beam 4, batch 64 (ours, CTranslate2, ours in lanes, CTranslate2 in lanes):
    # ratio 100/80 = 1.25, 90/100 = 0.90, 120/100 = 1.20 -> median 1.20 (0.90-1.25);
    # best/best 150/100 = 1.50, 90/120 = 0.75, 160/125 = 1.28 -> 1.28 (0.75-1.50);
    # our best layout: lanes, one search, lanes.
    return {"raw/r1.json": _run(_entry(100.0, 80.0, 150.0, 100.0, k_finished=110.0),
                                commit="aaa1111", out="r1.json"),
            "raw/r2.json": _run(_entry(90.0, 100.0, 85.0, 120.0, k_finished=96.0),
                                commit="bbb2222", out="r2.json"),
            "raw/r3.json": _run(_entry(120.0, 100.0, 160.0, 125.0, k_finished=150.0),
                                commit="bbb2222", out="r3.json")}


def _row(summary, search, batch):
    return next(row for row in summary["rows"]
                if (row["search"], row["batch"]) == (search, batch))


def test_median_range_sentences_and_best_layout_of_a_cell():
    summary = tool.summarise(_three_runs())
    row = _row(summary, "beam 4", 64)
    assert row["ratio"] == "1.20 (0.90-1.25)"
    assert row["ratio_best"] == "1.28 (0.75-1.50)"
    # same rule: 110/100, 96/120, 150/125 = 1.10, 0.80, 1.20
    assert row["ratio_same_rule"] == "1.10 (0.80-1.20)"
    assert (row["ours_best"], row["peer_best"]) == (150.0, 120.0)  # medians of the bests
    assert row["our_best_layout"] == "2 lanes (2 of 3)"
    assert summary["values"]["beam4_batch64_ratio_best_median"] == 1.28
    assert summary["values"]["beam4_batch64_ratio_min"] == 0.9
    assert summary["kind"] == "AVX2"


def test_greedy_has_no_same_rule_cell_and_a_failed_cell_no_row():
    summary = tool.summarise(_three_runs())
    greedy = _row(summary, "greedy", 1)
    assert greedy["ratio"] == "2.00 (2.00-2.00)"  # the same in every run
    assert greedy["ratio_best"] == "0.75 (0.75-0.75)"  # chunked XLA 30 / CT2 lanes 40
    assert greedy["ratio_same_rule"] == ""
    assert greedy["our_best_layout"] == "chunked XLA (3 of 3)"
    assert [(row["search"], row["batch"]) for row in summary["rows"]] == [
        ("greedy", 1), ("beam 4", 64)]  # greedy batch 8 failed in every run
    assert "greedy_batch8_ratio_median" not in summary["values"]


def test_runs_of_two_cpu_kinds_are_refused_naming_each():
    runs = _three_runs()
    runs["raw/r2.json"]["fast_paths"] = {"AMX": {"paths": {}}}
    with pytest.raises(tool.RunsError, match=r"raw/r1.json \(AVX2\), raw/r2.json \(AMX\)"):
        tool.summarise(runs)


def test_the_results_file_renders_with_the_runs_provenance(tmp_path):
    document = tool.results_document(_three_runs(), conditions="quiet machine")
    assert document["commit"] == "bbb2222"
    assert document["command"] == COMMAND
    assert document["machine"] == ("AMD EPYC, 2 cores; flags: avx2, fma; TensorFlow 2048x2048 "
                                   "matmul peak 100 GFLOP/s float32")
    assert document["conditions"] == ("quiet machine; 3 runs of the serving section, at "
                                      "aaa1111, bbb2222")
    assert "the first 400 test 2016 sentences" in document["what"]
    assert document["source"].endswith("; summarised by bench/ctranslate2_runs.py")
    assert results_tables.headline(document) == (
        "beam 4, batches of 64: ours 1.28x CTranslate2 float32, each engine at its best "
        "layout (median of 3 runs)")
    for key in results_tables.REQUIRED:
        assert key in document
    (tmp_path / "serving").mkdir()
    (tmp_path / "serving" / "ct2.json").write_text(json.dumps(document))
    table = "\n".join(results_tables.render_table(tmp_path, "serving/ct2"))
    assert "| beam 4 | 64 | 1.20 (0.90-1.25) | 1.28 (0.75-1.50) | 1.10 (0.80-1.20) |" in table


def test_command_line_writes_the_file_and_refuses_to_replace_it(tmp_path, capsys):
    paths = []
    for name, run in _three_runs().items():
        path = tmp_path / pathlib.Path(name).name
        path.write_text(json.dumps(run))
        paths.append(str(path))
    out = tmp_path / "ct2.json"
    assert tool.main([*paths, "--out", str(out)]) == 0
    assert json.loads(out.read_text())["values"]["beam4_batch64_ratio_median"] == 1.2
    assert "ours 1.28x" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        tool.main([*paths, "--out", str(out)])
    assert refused.value.code == 2
