"""The serving section of bench/run_all.py puts each worker run in the right entry.

A full serving run takes a quarter of an hour, so its wiring (which run is "ours" and
which the peer in each of some thirty entries, and which translations are compared) is
checked here with a runner that stands in for the workers: every run gets a speed of its
own per batch size, and each entry's figures must be the speeds of the runs its name
says it compares.
"""
from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BATCHES = (1, 8, 64)
SENTENCES = ["a", "b", "c", "d"]


def _load_run_all():
    spec = importlib.util.spec_from_file_location("bench_run_all", ROOT / "bench" / "run_all.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeRunner:
    """Answers each worker call as the serving worker would: one run per batch size with
    a speed unique to (name, batch), and its translations written where asked. Runs
    named in `changed` translate their first sentence differently from everyone."""

    def __init__(self, prepared: dict, changed=()):
        self.results = {"serving_prepare": prepared}
        self.temporary: list[str] = []
        self.calls: dict[str, list[str]] = {}
        self.environments: dict[str, dict] = {}
        self.changed = set(changed)

    def speed(self, name: str, batch: int) -> float:
        return 100.0 * (1 + list(self.calls).index(name)) + batch

    def run(self, name, script, args, needs=(), env=None):
        assert script == "serving" and name not in self.calls, (name, script)
        self.calls[name] = args
        self.environments[name] = env or {}
        out = pathlib.Path(args[args.index("--translations") + 1])
        out.mkdir(parents=True)
        runs = []
        for batch in BATCHES:
            lines = [f"{name} changed this"] + SENTENCES[1:] if name in self.changed \
                else SENTENCES
            (out / f"batch{batch}.txt").write_text("".join(f"{x}\n" for x in lines))
            runs.append({"batch": batch, "sentences_per_s": self.speed(name, batch),
                         "bleu": 30.0, "latency_p50_ms": 1.0, "latency_p99_ms": 2.0})
        return {"runs": runs}, None


@pytest.fixture
def serve_section(tmp_path, monkeypatch):
    section = _load_run_all().serving_section
    source = tmp_path / "test_2016.en"
    source.write_text("".join(f"{x}\n" for x in SENTENCES))
    monkeypatch.setattr(section, "_test_2016_source", lambda: source)
    monkeypatch.setattr(section, "missing_modules", lambda names: None)
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    # Not a Transformer shape bench/common can count: no GFLOP/s figures are added.
    (model_dir / "run_config.json").write_text(json.dumps(
        {"family": "convs2s", "model": {"num_heads": 1, "d_model": 8}}))
    names = ["savedmodel", "ctranslate2", "ctranslate2_greedy", "savedmodel_greedy",
             "savedmodel_greedy_lanes", "savedmodel_greedy_chunked_xla", "savedmodel_bf16",
             "savedmodel_bf16_lanes", "savedmodel_lanes_padding_flipped",
             *(f"savedmodel_{v}" for v in ("unchunked", "chunked_xla", "k_finished", "lanes",
                                           "lanes_k_finished"))]
    prepared = {**{name: f"/exports/{name}" for name in names}, "lanes": 2,
                "beam_size": 4, "ct2_compute_types": ["bfloat16", "float32", "int8"],
                "native_bfloat16": True, "cpu_kind": "avx512bf16", "matmul_library": "onednn",
                "kernel_padding_default": True}

    def run(changed=(), library="onednn"):
        runner = FakeRunner({**prepared, "matmul_library": library}, changed)
        benchmarks = {}
        fast_paths = section.serving(runner, benchmarks, model_dir, len(SENTENCES))
        return runner, benchmarks, fast_paths
    return run


def test_every_entry_compares_the_runs_its_name_says(serve_section):
    runner, benchmarks, fast_paths = serve_section()
    speed = runner.speed
    lanes_args = ["--intra-op", "1", "--inter-op", "2"]
    for name in ("serving_savedmodel_lanes", "serving_savedmodel_bf16_lanes",
                 "serving_ctranslate2_lanes", "serving_savedmodel_greedy_lanes",
                 "serving_ctranslate2_int8_lanes"):
        assert runner.calls[name][-4:] == lanes_args, name
    assert "--inter-op" not in runner.calls["serving_savedmodel_bf16"]
    for batch in BATCHES:
        beam = benchmarks[f"serving_multi30k_beam4_batch{batch}"]
        assert (beam["ours"], beam["peer"], beam["ours_lanes"], beam["peer_lanes"]) == (
            speed("serving_savedmodel", batch), speed("serving_ctranslate2", batch),
            speed("serving_savedmodel_lanes", batch), speed("serving_ctranslate2_lanes", batch))
        assert beam["ratio"] == pytest.approx(
            speed("serving_savedmodel", batch) / speed("serving_ctranslate2", batch))

        greedy = benchmarks[f"serving_multi30k_greedy_batch{batch}"]
        assert (greedy["ours"], greedy["peer"], greedy["ours_chunked_xla"]) == (
            speed("serving_savedmodel_greedy", batch), speed("serving_ctranslate2_greedy", batch),
            speed("serving_savedmodel_greedy_chunked_xla", batch))

        like = {"bf16_vs_float32": ("serving_savedmodel_bf16", "serving_savedmodel"),
                "bf16_lanes_vs_float32_lanes": ("serving_savedmodel_bf16_lanes",
                                                "serving_savedmodel_lanes")}
        for suffix, (mine, theirs) in like.items():
            entry = benchmarks[f"serving_multi30k_beam4_batch{batch}_{suffix}"]
            assert (entry["ours"], entry["peer"]) == (speed(mine, batch), speed(theirs, batch))
            assert entry["ratio"] == pytest.approx(speed(mine, batch) / speed(theirs, batch))
            assert entry["target_ratio"] == 1.3 and entry["same_outputs_as_float32"] == 1.0
        assert "lanes" in benchmarks[f"serving_multi30k_beam4_batch{batch}_bf16_lanes_vs_"
                                     "float32_lanes"]["peer_name"]

        for compute_type, ours in (("bfloat16", "serving_savedmodel_bf16"),
                                   ("int8", "serving_savedmodel")):
            entry = benchmarks[f"serving_multi30k_beam4_batch{batch}_ct2_{compute_type}"]
            peer = f"serving_ctranslate2_{compute_type}"
            assert (entry["ours"], entry["peer"]) == (speed(ours, batch), speed(peer, batch))
            assert (entry["ours_lanes"], entry["peer_lanes"]) == (
                speed(f"{ours}_lanes", batch), speed(f"{peer}_lanes", batch))
            assert entry["ratio_best"] == pytest.approx(
                max(speed(ours, batch), speed(f"{ours}_lanes", batch))
                / max(speed(peer, batch), speed(f"{peer}_lanes", batch)))
        # A compute type the CPU does not list is reported as missing, not run.
        missing = benchmarks[f"serving_multi30k_beam4_batch{batch}_ct2_int8_bfloat16"]
        assert missing["peer"] is None and "not supported" in missing["peer_missing"]
        assert missing["peer_lanes"] is None and missing["ratio_best"] is None
    assert not [name for name in runner.calls if "int8_bfloat16" in name]
    for compute_type in ("int8", "bfloat16"):
        assert runner.calls[f"serving_ctranslate2_{compute_type}_lanes"][-6:] == [
            "--compute-type", compute_type, *lanes_args]

    lanes = fast_paths["paths"]["lanes"]["on_over_off"]["batch64"]
    assert lanes == pytest.approx(speed("serving_savedmodel_lanes", 64)
                                  / speed("serving_savedmodel", 64))
    # Padding is the default here: on = the lanes export, off = the flipped one.
    padding = fast_paths["paths"]["kernel_padding"]["on_over_off"]["batch8"]
    assert padding == pytest.approx(speed("serving_savedmodel_lanes", 8)
                                    / speed("serving_savedmodel_lanes_padding_flipped", 8))


@pytest.mark.parametrize("changed, suffix", [
    ("serving_savedmodel_bf16", "bf16_vs_float32"),
    ("serving_savedmodel_bf16_lanes", "bf16_lanes_vs_float32_lanes"),
    ("serving_savedmodel_lanes", "bf16_lanes_vs_float32_lanes")])
def test_same_outputs_compares_the_paired_translations(serve_section, changed, suffix):
    _, benchmarks, _ = serve_section(changed=[changed])
    for batch in BATCHES:
        for name in ("bf16_vs_float32", "bf16_lanes_vs_float32_lanes"):
            share = benchmarks[f"serving_multi30k_beam4_batch{batch}_{name}"][
                "same_outputs_as_float32"]
            assert share == (0.75 if name == suffix else 1.0), (changed, name)


@pytest.mark.parametrize("library, other", [("onednn", "0"), ("eigen", "1")])
def test_other_matmul_library_serves_the_same_exports(serve_section, library, other):
    """The default and lanes exports are served again with TF_ENABLE_ONEDNN_OPTS flipped
    from the CPU's default, and the "onednn" paths are oneDNN's speed over Eigen's
    whichever of the two is the default."""
    runner, _, fast_paths = serve_section(library=library)
    flipped = {name: env for name, env in runner.environments.items() if env}
    assert flipped == {"serving_savedmodel_other_library": {"TF_ENABLE_ONEDNN_OPTS": other},
                       "serving_savedmodel_lanes_other_library":
                           {"TF_ENABLE_ONEDNN_OPTS": other}}
    for name, export in (("serving_savedmodel_other_library", "/exports/savedmodel"),
                         ("serving_savedmodel_lanes_other_library", "/exports/savedmodel_lanes")):
        args = runner.calls[name]
        assert args[args.index("--model") + 1] == export
    assert runner.calls["serving_savedmodel_lanes_other_library"][-4:] == [
        "--intra-op", "1", "--inter-op", "2"]
    speed = runner.speed
    for path, default_run in (("onednn", "serving_savedmodel"),
                              ("onednn_lanes", "serving_savedmodel_lanes")):
        entry = fast_paths["paths"][path]
        assert entry["default_on"] is (library == "onednn")
        other_run = default_run + "_other_library"
        onednn_run, eigen_run = ((default_run, other_run) if library == "onednn"
                                 else (other_run, default_run))
        for batch in BATCHES:
            assert entry["on_over_off"][f"batch{batch}"] == pytest.approx(
                speed(onednn_run, batch) / speed(eigen_run, batch))
