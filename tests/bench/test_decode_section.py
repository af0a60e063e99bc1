"""bench/workloads.py's decode section with a runner that stands in for the workers: in a
full run our search also runs with the other library of TensorFlow's matrix products
(TF_ENABLE_ONEDNN_OPTS flipped from this CPU's default), and each decode entry says how
that library compares with the default, by hand-made speeds."""
from __future__ import annotations

import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import suite_runner  # noqa: E402
import workloads  # noqa: E402

# Output tokens/s by (worker, beam): the other library is slower for greedy, faster for
# beam 4.
SPEEDS = {("decode_tf", 1): 1000.0, ("decode_tf", 4): 400.0,
          ("decode_ctranslate2", 1): 800.0, ("decode_ctranslate2", 4): 500.0}
OTHER = {1: 900.0, 4: 500.0}


class FakeRunner:
    def __init__(self, failing=()):
        self.calls = {}
        self.failing = set(failing)

    def run(self, name, script, args, needs=(), env=None):
        self.calls[name] = {"script": script, "args": args, "env": env}
        if name == "decode_hf":
            return None, "not installed: transformers"
        if name in self.failing:
            return None, "exit code 1: boom"
        runs = []
        for beam in (1, 4):
            if name.startswith("decode_tf_"):
                speed = OTHER[beam]
            else:
                speed = SPEEDS[name, beam]
            fields = {"shape": "multi30k", "beam": beam, "output_tokens_per_s": speed}
            if name == "decode_ctranslate2":
                runs.append({**fields, "compute_type": "float32"})
            else:
                runs.append({**fields, "xla": False})
        return {"runs": runs}, None


@pytest.mark.parametrize("default,other,value", [("eigen", "onednn", "1"),
                                                 ("onednn", "eigen", "0")])
def test_a_full_run_times_the_other_matmul_library(monkeypatch, default, other, value):
    monkeypatch.setattr(workloads, "matmul_library", lambda: default)
    runner, benchmarks = FakeRunner(), {}
    workloads.decode(runner, suite_runner.plan(False), ["multi30k"], benchmarks, 100.0,
                     quick=False)
    call = runner.calls[f"decode_tf_{other}"]
    assert call["env"] == {"TF_ENABLE_ONEDNN_OPTS": value}
    assert call["args"][call["args"].index("--xla-modes") + 1] == "off"
    beam4 = benchmarks["decode_multi30k_beam4_vs_ctranslate2"]["matmul_library"]
    assert beam4 == {"default": default, "other": other, "ours_other": 500.0,
                     "other_over_default": 1.25, "error": None}  # 500 / 400
    greedy = benchmarks["decode_multi30k_greedy_vs_ctranslate2"]["matmul_library"]
    assert greedy["other_over_default"] == 0.9  # 900 / 1000
    assert runner.calls["decode_tf"]["env"] is None  # ours as TensorFlow sets it


def test_a_failed_run_of_the_other_library_says_why_in_each_entry(monkeypatch):
    monkeypatch.setattr(workloads, "matmul_library", lambda: "eigen")
    benchmarks = {}
    workloads.decode(FakeRunner(failing={"decode_tf_onednn"}), suite_runner.plan(False),
                     ["multi30k"], benchmarks, 100.0, quick=False)
    library = benchmarks["decode_multi30k_beam4_vs_ctranslate2"]["matmul_library"]
    assert library["ours_other"] is None and library["other_over_default"] is None
    assert library["error"] == "exit code 1: boom"
    assert benchmarks["decode_multi30k_beam4_vs_ctranslate2"]["ours"] == 400.0


def test_a_quick_run_keeps_the_default_library_only(monkeypatch):
    monkeypatch.setattr(workloads, "matmul_library", lambda: "eigen")
    runner, benchmarks = FakeRunner(), {}
    workloads.decode(runner, suite_runner.plan(True), ["multi30k"], benchmarks, 100.0,
                     quick=True)
    assert not any(name.startswith("decode_tf_") for name in runner.calls)
    assert "matmul_library" not in benchmarks["decode_multi30k_beam4_vs_ctranslate2"]


def test_the_runner_passes_the_variables_to_the_worker_only(tmp_path, monkeypatch):
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    script = tmp_path / "echo_env.py"
    script.write_text("import json, os\n"
                      "print(json.dumps({'value': os.environ.get('TF_ENABLE_ONEDNN_OPTS')}))\n")
    runner = suite_runner.Runner(timeout=60.0)
    # An absolute script path: the runner's WORKERS / path keeps it as it is.
    result, error = runner.run("echo", str(script.with_suffix("")), [],
                               env={"TF_ENABLE_ONEDNN_OPTS": "1"})
    assert error is None and result["value"] == "1"
    plain, _ = runner.run("echo_plain", str(script.with_suffix("")), [])
    assert plain["value"] is None
