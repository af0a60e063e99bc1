"""bench/fast_path_runs.py summarises the fast paths of repeated serving runs: medians and
ranges worked out by hand from made-up runs, refusals of runs that do not belong
together, and a results file the docs' renderer accepts."""
from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest

from transformer_tf.evaluation import results_tables

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load_tool():
    spec = importlib.util.spec_from_file_location("bench_fast_path_runs",
                                                  ROOT / "bench" / "fast_path_runs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tool = _load_tool()

COMMAND = ("python bench/run_all.py --only matmul,serving --json --model-dir "
           "runs/multi30k_en_de/model --serving-sentences 400")


def _run(lanes: tuple, *, kind="AVX2", commit="abc1234", padding_default=True,
         description="AMD EPYC, 2 cores; flags: avx2, fma", out="a.json", peak=100.0,
         xla_batch64=None) -> dict:
    """A run_all JSON with a serving section: lanes' ratios at batches 1, 8, 64 as given,
    the other paths' fixed."""
    def path(default_on, ratios, what):
        return {"default_on": default_on, "compared": what,
                "on_over_off": dict(zip(("batch1", "batch8", "batch64"), ratios))}
    return {
        "commit": commit, "command": f"{COMMAND} --out {out}", "started": "2026-12-06T19:00:00",
        "machine": {"description": description},
        "matmul_peak": {"tf_gflops": peak, "tf_bf16_gflops": None},
        "benchmarks": {"serving_multi30k_beam4_batch1": {"details": {"ours": {
            "sentences": 400}}}},
        "fast_paths": {kind: {"matmul_library": "eigen", "paths": {
            "chunking": path(True, (1.1, 1.0, 0.9), "default / unchunked"),
            "lanes": path(False, lanes, "2 lanes / one search"),
            "xla": path(False, (2.0, 1.0, xla_batch64), "XLA / default"),
            "kernel_padding": path(padding_default, (1.0, 1.0, 1.2), "padded / plain"),
            "onednn": path(False, (0.8, 0.9, 0.9), "oneDNN / Eigen"),
            "onednn_lanes": path(False, (0.9, 1.0, 1.1), "lanes, oneDNN / Eigen")}}},
    }


def _three_runs() -> dict:
    return {"raw/r1.json": _run((1.5, 1.8, 1.2), commit="aaa1111", out="r1.json", peak=98.4),
            "raw/r2.json": _run((0.9, 1.6, 1.4), commit="bbb2222", out="r2.json", peak=103.0),
            "raw/r3.json": _run((1.2, 2.0, 1.3), commit="bbb2222", out="r3.json",
                                peak=101.0)}


def test_median_and_range_of_each_cell_over_the_runs():
    summary = tool.summarise(_three_runs())
    lanes = next(row for row in summary["rows"] if row["path"] == "lanes")
    # batch 1: 0.9, 1.2, 1.5 -> median 1.2; batch 8: 1.6, 1.8, 2.0; batch 64: 1.2, 1.3, 1.4
    assert lanes == {"path": "lanes", "compared": "2 lanes / one search", "default_on": "off",
                     "batch1": "1.20 (0.90-1.50)", "batch8": "1.80 (1.60-2.00)",
                     "batch64": "1.30 (1.20-1.40)"}
    assert summary["values"]["lanes_batch1_min"] == 0.9
    assert summary["values"]["lanes_batch64_max"] == 1.4
    assert summary["values"]["chunking_batch64_median"] == 0.9  # the same in every run
    assert [row["path"] for row in summary["rows"]] == list(tool.PATHS)
    assert summary["kind"] == "AVX2" and summary["libraries"] == ["eigen"]


def test_runs_from_before_a_path_was_measured_leave_its_row_out():
    runs = _three_runs()
    for run in list(runs.values())[:2]:
        del run["fast_paths"]["AVX2"]["paths"]["onednn"]
    for run in runs.values():
        del run["fast_paths"]["AVX2"]["paths"]["onednn_lanes"]
    summary = tool.summarise(runs)
    assert "onednn_lanes" not in [row["path"] for row in summary["rows"]]
    onednn = next(row for row in summary["rows"] if row["path"] == "onednn")
    assert onednn["batch1"] == "0.80"  # the one run that measured it


def test_an_even_number_of_runs_takes_the_middle_two():
    runs = {"raw/r1.json": _run((1.0, 1.0, 1.0)), "raw/r2.json": _run((2.0, 1.0, 1.5))}
    lanes = next(row for row in tool.summarise(runs)["rows"] if row["path"] == "lanes")
    assert lanes["batch1"] == "1.50 (1.00-2.00)"
    assert lanes["batch64"] == "1.25 (1.00-1.50)"


def test_a_cell_no_run_measured_stays_empty_and_has_no_values():
    summary = tool.summarise(_three_runs())  # XLA at batch 64 failed in every run
    xla = next(row for row in summary["rows"] if row["path"] == "xla")
    assert xla["batch64"] == ""
    assert "xla_batch64_median" not in summary["values"]
    runs = {"raw/r1.json": _run((1.0, 1.0, 1.0), xla_batch64=0.5), "raw/r2.json": _run(
        (1.0, 1.0, 1.0))}
    xla = next(row for row in tool.summarise(runs)["rows"] if row["path"] == "xla")
    assert xla["batch64"] == "0.50"  # one run measured it: no range


def test_runs_of_two_cpu_kinds_are_refused_naming_each():
    runs = {"raw/r1.json": _run((1, 1, 1)), "raw/r2.json": _run((1, 1, 1), kind="AMX")}
    with pytest.raises(tool.RunsError, match=r"raw/r1.json \(AVX2\), raw/r2.json \(AMX\)"):
        tool.summarise(runs)


def test_runs_with_different_export_defaults_are_refused():
    runs = {"raw/r1.json": _run((1, 1, 1)), "raw/r2.json": _run((1, 1, 1),
                                                                padding_default=False)}
    with pytest.raises(tool.RunsError, match="kernel_padding: the export default differs"):
        tool.summarise(runs)


def test_the_results_file_renders_with_the_runs_provenance():
    document = tool.results_document(_three_runs(), conditions="quiet machine")
    assert document["commit"] == "bbb2222"  # the last run's
    assert document["command"] == COMMAND  # each run's own --out left out
    assert document["machine"] == ("AMD EPYC, 2 cores; flags: avx2, fma; TensorFlow 2048x2048 "
                                   "matmul peak 98-103 GFLOP/s float32")
    assert document["conditions"] == ("quiet machine; 3 runs of the serving section, at "
                                      "aaa1111, bbb2222")
    assert "the first 400 test 2016 sentences" in document["what"]
    assert document["date"] == "2026-12-06"
    assert document["source"].startswith("raw/r1.json, raw/r2.json, raw/r3.json")
    assert results_tables.headline(document) == (
        "at batch 64, each path on over off: chunking 0.9x, lanes 1.3x, kernel_padding 1.2x, "
        "onednn 0.9x, onednn_lanes 1.1x")
    for key in results_tables.REQUIRED:
        assert key in document


def test_the_bfloat16_peak_is_named_only_where_the_cpu_has_native_bfloat16():
    runs = _three_runs()
    for run in runs.values():
        run["matmul_peak"]["tf_bf16_gflops"] = 130.0  # emulated on this AVX2 CPU
    assert tool.results_document(runs)["machine"].endswith("98-103 GFLOP/s float32")
    for run in runs.values():
        run["matmul_peak"]["cpu_bf16"] = ["avx512_bf16"]
    assert tool.results_document(runs)["machine"].endswith("float32, 130 bfloat16")


def test_runs_written_before_the_provenance_was_recorded_need_it_given():
    runs = _three_runs()
    for run in runs.values():
        del run["commit"], run["command"], run["machine"]["description"]
    with pytest.raises(tool.RunsError, match="no commit recorded.*--commit"):
        tool.results_document(runs)
    with pytest.raises(tool.RunsError, match="raw/r1.json, raw/r2.json, raw/r3.json: no "
                                             "machine recorded"):
        tool.results_document(runs, commit="ccc3333")
    document = tool.results_document(runs, commit="ccc3333", machine="AMD EPYC",
                                     command="python bench/run_all.py")
    assert (document["commit"], document["command"]) == ("ccc3333", "python bench/run_all.py")


def test_runs_on_different_machines_are_refused():
    runs = _three_runs()
    runs["raw/r2.json"]["machine"]["description"] = "Intel Xeon, 2 cores; flags: avx2, fma"
    with pytest.raises(tool.RunsError, match="different machines"):
        tool.results_document(runs)


def test_command_line_writes_the_file_and_refuses_to_replace_it(tmp_path, capsys):
    paths = []
    for name, run in _three_runs().items():
        path = tmp_path / pathlib.Path(name).name
        path.write_text(json.dumps(run))
        paths.append(str(path))
    out = tmp_path / "fast.json"
    assert tool.main([*paths, "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["values"]["lanes_batch8_median"] == 1.8
    assert "lanes 1.3x" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        tool.main([*paths, "--out", str(out)])
    assert refused.value.code == 2
    assert "--out" in capsys.readouterr().err


def test_a_run_without_a_serving_section_is_refused_naming_the_file(tmp_path, capsys):
    path = tmp_path / "train-only.json"
    path.write_text(json.dumps({"benchmarks": {}}))
    with pytest.raises(SystemExit):
        tool.main([str(path), "--out", str(tmp_path / "fast.json")])
    assert f"{path}: no serving section's fast_paths" in capsys.readouterr().err
    assert not (tmp_path / "fast.json").exists()


def test_run_all_records_what_the_summary_takes_from_each_run(tmp_path, monkeypatch):
    """bench/run_all.py's JSON (here with no section run) names its command as run, the
    commit and the machine; the summary takes them back without the run's own --out."""
    from transformer_tf.runtime.provenance import current_commit, machine_description

    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("bench_run_all", ROOT / "bench" / "run_all.py")
    run_all = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_all)
    out = tmp_path / "run.json"
    assert run_all.main(["--only", "", "--serving-sentences", "400", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["command"] == ("python bench/run_all.py --only '' --serving-sentences 400 "
                                 f"--out {out}")
    assert report["commit"] == current_commit()
    assert report["machine"]["description"] == machine_description()
    report["fast_paths"] = _run((1.0, 1.0, 1.0))["fast_paths"]
    document = tool.results_document({"raw/run.json": report})
    assert document["command"] == "python bench/run_all.py --only '' --serving-sentences 400"
    assert document["commit"] == current_commit()
    assert document["machine"] == machine_description()  # no matmul section: no peak


def test_a_damaged_run_file_is_refused_naming_its_line(tmp_path, capsys):
    path = tmp_path / "cut.json"
    path.write_text('{"fast_paths": {\n')
    with pytest.raises(SystemExit):
        tool.main([str(path), "--out", str(tmp_path / "fast.json")])
    assert f"{path}: not valid JSON" in capsys.readouterr().err
