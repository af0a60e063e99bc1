#!/usr/bin/env python
"""Runs the whole benchmark suite, ours and the peers side by side, in one run.

    python bench/run_all.py [--quick] [--json] [--out FILE] [--only train,decode,...]
                            [--shapes base,multi30k] [--rounds N] [--without torch,...]
                            [--model-dir MDIR] [--serving-sentences 1000]

Every workload runs in its own subprocess (bench/workers/*.py) with 2 threads, one
after the other, so thread settings, imports and memory peaks never mix. The result is
ONE JSON object (see bench/README.md for every field):

    {"suite": ..., "quick": ..., "seconds": ..., "machine": {...},
     "matmul_peak": {"peak_gflops": ..., "tf_gflops": ..., "numpy_gflops": ..., ...},
     "benchmarks": {NAME: {"metric": ..., "ours": ..., "ours_xla": ..., "peer": ...,
                           "peer_name": ..., "ratio": ..., "ratio_xla": ...,
                           "target_ratio": ..., "meets_target": ...,
                           "ours_gflops": ..., "ours_fraction_of_peak": ..., ...,
                           "peer_missing": null | "why", "details": {...}}},
     "workers": {NAME: {"seconds": ..., "ok": ..., "error": ...}}}

A peer that is not installed, or whose worker fails, is reported as null with the reason;
the suite never stops on one failing workload.

--quick (about 5 minutes on this 2-core machine): one timed step at the base shape, a few
capped calls elsewhere, no XLA decoding, no serving section (unless --only names it).
The full run times more repeats and also decodes with XLA. The serving section needs a
trained Transformer run (--model-dir, default runs/multi30k_en_de/model; skipped with the
reason when there is none: it trains nothing). --rounds N runs the whole sequence N times, interleaved, and keeps each figure's
best round ("all_rounds" in details shows the spread): on a shared machine that gives ours
and the peers the same chances of a quiet moment.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
WORKERS = BENCH / "workers"
sys.path.insert(0, str(BENCH))
import common  # noqa: E402

from transformer_tf.runtime.cpu import cpu_model_name  # light: no TensorFlow

SECTIONS = ("matmul", "train", "decode", "bf16", "pipeline", "families", "layers", "serving")
# Sections that --quick leaves out unless --only names them (they take minutes).
NOT_IN_QUICK = ("serving",)
DEFAULT_SERVING_MODEL = common.ROOT / "runs" / "multi30k_en_de" / "model"

# Targets of the performance issue (ratios in one run; memory has none).
TARGETS = {"train_vs_torch": 1.2, "decode_vs_ctranslate2": 0.8, "decode_vs_hf": 1.5,
           "decode_beam4_vs_ctranslate2": 1.2,  # issue 16's, above the older 0.8 for all
           "pipeline_vs_training": 20.0, "train_fraction_of_peak": 0.7,
           "serving_vs_ctranslate2_batch64": 1.0,
           "serving_greedy_vs_ctranslate2_batch64": 1.5, "bf16_vs_float32": 1.5,
           "serving_bf16_vs_float32": 1.3}

# CTranslate2's CPU compute types the serving section also times (where
# ctranslate2.get_supported_compute_types("cpu") lists them), each against our export of
# the same arithmetic, or, for the int8 types, named as the gap it is.
CT2_COMPUTE_TYPES = {
    "bfloat16": ("bfloat16", "like with like: bfloat16 products on both sides"),
    "int8": ("float32", ("int8 gap: CTranslate2's int8 weights and products against our "
                         "float32 (we have no int8 export)")),
    "int8_float32": ("float32", ("int8 gap: CTranslate2's int8 weights and products "
                                 "(float32 elsewhere) against our float32")),
    "int8_bfloat16": ("bfloat16", ("int8 gap: CTranslate2's int8 weights and products "
                                   "(bfloat16 elsewhere) against our bfloat16")),
}

PEER_MODULES = {"torch": ["torch"], "ctranslate2": ["ctranslate2", "transformers", "torch"],
                "hf": ["transformers", "torch"]}


def log(message: str) -> None:
    print(f"[run_all {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def missing_modules(names) -> str | None:
    """None when every module can be imported, else why not (without importing it)."""
    missing = [n for n in names if importlib.util.find_spec(n) is None]
    if missing:
        return (f"not installed: {', '.join(missing)} "
                "(pip install -e '.[bench]'; first, for torch's CPU build: pip install "
                "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu)")
    return None


class Runner:
    """Starts workers one at a time and keeps what each one said."""

    def __init__(self, timeout: float, without=()):
        self.timeout = timeout
        self.without = set(without)
        self.workers: dict[str, dict] = {}
        self.results: dict[str, dict] = {}  # best result so far per worker (--rounds)
        self.temporary: list[str] = []  # directories removed when the suite ends

    def run(self, name: str, script: str, args: list[str], needs=()) -> tuple[dict | None, str | None]:
        """(result, None) or (None, reason); with several rounds, the best result so far."""
        result, reason = self._run_once(name, script, args, needs)
        previous = self.results.get(name)
        if result is None:
            return (previous, None) if previous is not None else (None, reason)
        self.results[name] = result if previous is None else merge_results(previous, result)
        return self.results[name], None

    def _run_once(self, name, script, args, needs):
        reason = missing_modules(needs)
        disabled = sorted(self.without & set(needs))
        if disabled:
            reason = f"disabled with --without {','.join(disabled)}"
        if reason is not None:
            self.workers[name] = {"ok": False, "seconds": 0.0, "rounds": 0, "error": reason}
            log(f"{name}: skipped, {reason}")
            return None, reason
        path = WORKERS / f"{script}.py"
        if not path.exists():  # a script of bench/ itself (e.g. layer_scaling)
            path = BENCH / f"{script}.py"
        command = [sys.executable, str(path), *args]
        log(f"{name}: {' '.join(command[1:])}")
        start = time.perf_counter()
        try:
            proc = subprocess.run(command, capture_output=True, text=True,
                                  timeout=self.timeout, cwd=str(common.ROOT))
        except subprocess.TimeoutExpired:
            seconds = time.perf_counter() - start
            reason = f"timed out after {seconds:.0f} s"
            self._record(name, False, seconds, reason)
            log(f"{name}: {reason}")
            return None, reason
        seconds = time.perf_counter() - start
        result = None
        for line in reversed(proc.stdout.strip().splitlines()):
            try:
                result = json.loads(line)
                break
            except json.JSONDecodeError:
                continue
        if proc.returncode != 0 or not isinstance(result, dict):
            tail = [line for line in (proc.stderr or proc.stdout).strip().splitlines()
                    if line.strip()][-6:]
            reason = f"exit code {proc.returncode}: " + " | ".join(tail)[-1200:]
            self._record(name, False, seconds, reason)
            log(f"{name}: FAILED {reason}")
            return None, reason
        self._record(name, True, seconds)
        log(f"{name}: done in {seconds:.0f} s")
        return result, None

    def _record(self, name, ok, seconds, error=None):
        entry = self.workers.setdefault(name, {"ok": False, "seconds": 0.0, "rounds": 0})
        entry["seconds"] = round(entry["seconds"] + seconds, 1)
        entry["rounds"] += 1
        entry["ok"] = entry["ok"] or ok
        if error is not None:
            entry.setdefault("errors", []).append(error)
            if not entry["ok"]:
                entry["error"] = error


# The figure that decides which of two results of the same worker is kept (--rounds).
_PRIMARY = ("target_tokens_per_s", "output_tokens_per_s", "peak_gflops",
            "padded_target_positions_per_s")


def _primary(result: dict):
    for key in _PRIMARY:
        if result.get(key) is not None:
            return key, result[key]
    return None, None


def merge_results(a: dict, b: dict) -> dict:
    """The better of two results of one worker (decode workers: per configuration).

    Every round's primary figure is kept in "all_rounds", so the spread stays visible.
    """
    if "runs" in a and "runs" in b:
        def key(run):
            return (run.get("shape"), run.get("beam"), run.get("xla"), run.get("batch"))

        merged = dict(b)
        by_key = {key(r): r for r in a["runs"]}
        runs = []
        for run in b["runs"]:
            old = by_key.pop(key(run), None)
            runs.append(run if old is None else merge_results(old, run))
        merged["runs"] = runs + list(by_key.values())
        return merged
    name, value_a = _primary(a)
    _, value_b = _primary(b)
    if name is None:
        return b
    best = dict(b if (value_b or 0) >= (value_a or 0) else a)
    best["all_rounds"] = a.get("all_rounds", [value_a]) + [value_b]
    return best


def _ratio(a, b):
    if a is None or b is None or not b:
        return None
    return a / b


def _diff(a, b):
    return None if a is None or b is None else a - b


def _fraction(gflops, peak):
    if gflops is None or not peak:
        return None
    return gflops / peak


def _best(entry: dict, *keys):
    """The largest of entry[key] for `keys`, ignoring missing and None; None if none."""
    return max([entry[k] for k in keys if entry.get(k) is not None], default=None)


def _run_where(result, **fields):
    """The first of a worker's `runs` whose fields equal `fields` (None values match
    anything), or None."""
    wanted = {k: v for k, v in fields.items() if v is not None}
    return next((run for run in (result or {}).get("runs", [])
                 if all(run.get(k) == v for k, v in wanted.items())), None)


def _meets(value, target):
    return None if value is None else value >= target


OUR_VARIANTS = ("xla", "unchunked", "chunked_xla", "lanes")


def compare(entry: dict) -> dict:
    """Adds the comparison of ours with the peer to a benchmark entry (in place; returned).

    `entry` holds "ours", "peer" and optionally "ours_xla", "ours_unchunked" or
    "ours_chunked_xla" (our other variants), in one metric and unit; what else it holds decides what is added (a None
    input gives a None result):

      always                      "ratio" = ours / peer
      "ours_<variant>"            "ratio_<variant>" = ours_<variant> / peer
      "<who>_gflops" (GFLOP/s)    "<who>_fraction_of_peak" = <who>_gflops / peak_gflops,
        and "peak_gflops"           for each <who> present
      "peer_lanes" (the peer in     "ratio_best" = the best of ours and ours_<variant> /
        its own lanes)              the better of peer and peer_lanes
      "ours_k_finished" or          "ratio_same_rule" = the better of them / the better
        "ours_lanes_k_finished"       of peer and peer_lanes: CTranslate2's own stopping
        (and "peer_lanes")            rule (a sentence ends once beam-size hypotheses
                                      have finished, with a length penalty)
      "target_ratio"              "meets_target": ratio_best if present, else the best of
                                    ratio and ratio_<variant>, >= it; with ratio_same_rule
                                    also "meets_target_same_rule"; with the peer's
                                    fraction of peak also
                                    "target_implies_fraction_of_peak" = target_ratio x
                                    the better of peer's and peer_lanes' fractions (what
                                    meeting the target would take of the machine)
      "target_fraction_of_peak"   "meets_peak_target": the better of ours' and ours_xla's
                                    fraction of peak >= it
    """
    entry["ratio"] = _ratio(entry["ours"], entry["peer"])
    for variant in OUR_VARIANTS:
        if f"ours_{variant}" in entry:
            entry[f"ratio_{variant}"] = _ratio(entry[f"ours_{variant}"], entry["peer"])
    for key in [k for k in entry if k.endswith("_gflops") and k != "peak_gflops"]:
        entry[key.replace("_gflops", "_fraction_of_peak")] = _fraction(
            entry[key], entry.get("peak_gflops"))
    best_ratio = _best(entry, "ratio", *(f"ratio_{v}" for v in OUR_VARIANTS))
    if "peer_lanes" in entry:
        best_ratio = entry["ratio_best"] = _ratio(
            _best(entry, "ours", *(f"ours_{v}" for v in OUR_VARIANTS)),
            _best(entry, "peer", "peer_lanes"))
    if "ours_k_finished" in entry or "ours_lanes_k_finished" in entry:
        entry["ratio_same_rule"] = _ratio(
            _best(entry, "ours_k_finished", "ours_lanes_k_finished"),
            _best(entry, "peer", "peer_lanes"))
    if "target_ratio" in entry:
        entry["meets_target"] = _meets(best_ratio, entry["target_ratio"])
        better_peer = _best(entry, "peer_fraction_of_peak", "peer_lanes_fraction_of_peak")
        if better_peer is not None:
            entry["target_implies_fraction_of_peak"] = entry["target_ratio"] * better_peer
        if "ratio_same_rule" in entry:
            entry["meets_target_same_rule"] = _meets(entry["ratio_same_rule"],
                                                     entry["target_ratio"])
    if "target_fraction_of_peak" in entry:
        entry["meets_peak_target"] = _meets(
            _best(entry, "ours_fraction_of_peak", "ours_xla_fraction_of_peak"),
            entry["target_fraction_of_peak"])
    return entry


def _get(result, key):
    return None if result is None else result.get(key)


def _round(value, digits=4):
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: _round(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [_round(v, digits) for v in value]
    return value


def plan(quick: bool) -> dict:
    """Repeats per workload: (warm-up calls, timed calls, seconds cap on timed calls)."""
    if quick:
        return {"train_big": (1, 1, None), "train_small": (1, 5, 8.0),
                "decode": (1, 3, 4.0), "decode_xla": (), "pipeline_epochs": 1,
                "timeout": 600.0, "matmul_repeats": 10}
    return {"train_big": (2, 5, 60.0), "train_small": (2, 20, 30.0),
            "decode": (1, 5, 30.0), "decode_xla": ("on",), "pipeline_epochs": 2,
            "timeout": 2400.0, "matmul_repeats": 30}


def _repeat_args(spec) -> list[str]:
    warmup, repeats, cap = spec
    args = ["--warmup", str(warmup), "--repeats", str(repeats)]
    if cap is not None:
        args += ["--max-seconds", str(cap)]
    return args


def run_suite(quick: bool, sections, shapes, without=(), rounds: int = 1,
              serving_model: str | None = None, serving_sentences: int = 1000) -> dict:
    """Runs every worker `rounds` times, interleaved (ours, peers, ours, peers, ...), and
    reports each figure's best round: ours and the peers then had the same chances to
    meet a quiet moment of the machine."""
    started = time.perf_counter()
    load_start = common.load_average()
    runner = Runner(plan(quick)["timeout"], without)
    for round_index in range(rounds):
        if rounds > 1:
            log(f"round {round_index + 1} of {rounds}")
        report = _suite_pass(runner, quick, sections, shapes, without, serving_model,
                             serving_sentences)
    for path in runner.temporary:
        shutil.rmtree(path, ignore_errors=True)
    report["rounds"] = rounds
    report["machine"]["load_average_start"] = load_start
    report["seconds"] = round(time.perf_counter() - started, 1)
    return _round(report)


def _suite_pass(runner, quick, sections, shapes, without, serving_model=None,
                serving_sentences=1000) -> dict:
    settings = plan(quick)
    report: dict = {
        "suite": "transformer_tf bench/run_all.py",
        "quick": quick,
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                    "processor": cpu_model_name(), "python": platform.python_version(),
                    "threads_per_engine": common.THREADS,
                    "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
                    "load_average_start": common.load_average(),
                    "note": "shared machine: other jobs run at the same time; figures are "
                            "best-of-N and noisy, compare ratios within one run"},
        "shapes": {name: common.SHAPES[name].to_dict() for name in shapes},
        "workload": {"batch": 32, "source_len": 32, "target_len": 32, "output_len": 32},
        "matmul_peak": None,
        "benchmarks": {},
    }
    benchmarks = report["benchmarks"]

    # ---------------------------------------------------------------- matmul peak
    peak = None
    engines = "tf,numpy" if "torch" in without else "tf,numpy,torch"
    matmul_args = ["--repeats", str(settings["matmul_repeats"]), "--engines", engines]
    if "matmul" in sections:
        result, error = runner.run("matmul", "matmul", matmul_args)
        report["matmul_peak"] = result if result is not None else {"error": error}
        peak = _get(result, "peak_gflops")

    # ---------------------------------------------------------------- training
    train_results = {}
    if "train" in sections:
        for shape in shapes:
            spec = settings["train_big"] if shape == "base" else settings["train_small"]
            common_args = ["--shape", shape, *_repeat_args(spec)]
            ours, ours_error = runner.run(f"train_tf_{shape}", "train_tf", common_args)
            ours_xla, xla_error = runner.run(f"train_tf_{shape}_xla", "train_tf",
                                             common_args + ["--xla"])
            peer, peer_error = runner.run(f"train_torch_{shape}", "train_torch", common_args,
                                          needs=PEER_MODULES["torch"])
            train_results[shape] = (ours, ours_xla, peer)
            entry = {
                "metric": "target_tokens_per_s", "higher_is_better": True,
                "ours": _get(ours, "target_tokens_per_s"),
                "ours_xla": _get(ours_xla, "target_tokens_per_s"),
                "peer": _get(peer, "target_tokens_per_s"), "peer_name": "torch.nn.Transformer",
                "peer_missing": peer_error,
                "ours_error": ours_error, "ours_xla_error": xla_error,
                "ours_gflops": _get(ours, "achieved_gflops"),
                "ours_xla_gflops": _get(ours_xla, "achieved_gflops"),
                "peer_gflops": _get(peer, "achieved_gflops"),
                "gflop_per_step": _get(ours or ours_xla or peer, "gflop_per_step"),
                "peak_gflops": peak,
                "target_ratio": TARGETS["train_vs_torch"],
                "target_fraction_of_peak": TARGETS["train_fraction_of_peak"],
                "details": {"ours": ours, "ours_xla": ours_xla, "peer": peer},
            }
            benchmarks[f"train_{shape}"] = compare(entry)

        # Peak memory of a training step: each worker above ran alone in its process.
        memory_shape = "base" if "base" in train_results else shapes[0]
        ours, ours_xla, peer = train_results[memory_shape]
        entry = {
            "metric": "peak_rss_mb", "higher_is_better": False,
            "ours": _get(ours, "peak_rss_mb"), "ours_xla": _get(ours_xla, "peak_rss_mb"),
            "peer": _get(peer, "peak_rss_mb"), "peer_name": "torch.nn.Transformer",
            "peer_missing": (None if peer is not None else
                             runner.workers.get(f"train_torch_{memory_shape}", {}).get("error")),
            "shape": memory_shape,
            "details": {
                "what": "peak RSS of the whole training-benchmark process (runtime, model, "
                        "optimizer state, warm-up and timed steps); *_built_mb is the RSS "
                        "after building the model and optimizer, before the first step",
                "ours_rss_start_mb": _get(ours, "rss_start_mb"),
                "ours_built_mb": _get(ours, "rss_built_mb"),
                "ours_peak_minus_start_mb": _diff(_get(ours, "peak_rss_mb"),
                                                  _get(ours, "rss_start_mb")),
                "ours_xla_peak_minus_start_mb": _diff(_get(ours_xla, "peak_rss_mb"),
                                                      _get(ours_xla, "rss_start_mb")),
                "peer_peak_minus_start_mb": _diff(_get(peer, "peak_rss_mb"),
                                                  _get(peer, "rss_start_mb")),
                "ours_xla_built_mb": _get(ours_xla, "rss_built_mb"),
                "peer_rss_start_mb": _get(peer, "rss_start_mb"),
                "peer_built_mb": _get(peer, "rss_built_mb"),
            },
        }
        benchmarks[f"memory_train_{memory_shape}"] = compare(entry)

    # ---------------------------------------------------------------- decoding
    if "decode" in sections:
        shape_list = ",".join(shapes)
        repeat_args = _repeat_args(settings["decode"])
        modes = ",".join(("off",) + tuple(settings["decode_xla"]))
        ours, ours_error = runner.run(
            "decode_tf", "decode_tf",
            ["--shapes", shape_list, "--beams", "1,4", "--xla-modes", modes, *repeat_args])
        peers = {}
        for engine in ("ctranslate2", "hf"):
            types = ["--compute-types", ",".join(("float32", *CT2_COMPUTE_TYPES))] \
                if engine == "ctranslate2" else []
            peers[engine] = runner.run(
                f"decode_{engine}", "decode_peer",
                ["--engine", engine, "--shapes", shape_list, "--beams", "1,4", *repeat_args,
                 *types], needs=PEER_MODULES[engine])

        for shape in shapes:
            for beam in (1, 4):
                mine = _run_where(ours, shape=shape, beam=beam, xla=False)
                mine_xla = _run_where(ours, shape=shape, beam=beam, xla=True)
                for engine, (peer_result, peer_error) in peers.items():
                    theirs = _run_where(peer_result, shape=shape, beam=beam,
                                        compute_type="float32")
                    if peer_error is None and theirs is None:
                        peer_error = "no run for this configuration"
                    entry = {
                        "metric": "output_tokens_per_s", "higher_is_better": True,
                        "ours": _get(mine, "output_tokens_per_s"),
                        "ours_xla": _get(mine_xla, "output_tokens_per_s"),
                        "peer": _get(theirs, "output_tokens_per_s"),
                        "peer_name": {"ctranslate2": "CTranslate2 (float32, Marian)",
                                      "hf": "transformers MarianMTModel.generate"}[engine],
                        "peer_missing": peer_error, "ours_error": ours_error,
                        "ours_xla_missing": (None if mine_xla is not None else
                                             "XLA decoding not run with --quick"
                                             if quick else ours_error),
                        "ours_sentences_per_s": _get(mine, "sentences_per_s"),
                        "peer_sentences_per_s": _get(theirs, "sentences_per_s"),
                        "ours_gflops": _get(mine, "achieved_gflops"),
                        "ours_xla_gflops": _get(mine_xla, "achieved_gflops"),
                        "peer_gflops": _get(theirs, "achieved_gflops"),
                        "peak_gflops": peak,
                        "details": {"ours": mine, "ours_xla": mine_xla, "peer": theirs},
                    }
                    name = "greedy" if beam == 1 else f"beam{beam}"
                    entry["target_ratio"] = TARGETS.get(f"decode_{name}_vs_{engine}",
                                                        TARGETS[f"decode_vs_{engine}"])
                    benchmarks[f"decode_{shape}_{name}_vs_{engine}"] = compare(entry)
        _decode_compute_types(runner, settings, benchmarks, shapes, ours, ours_error,
                              peers["ctranslate2"])

    # ---------------------------------------------------------------- bfloat16
    if "bf16" in sections:
        _bfloat16(runner, settings, benchmarks, shapes, train_results)

    # ---------------------------------------------------------------- input pipeline
    if "pipeline" in sections:
        args = ["--epochs", str(settings["pipeline_epochs"])] + (["--quick"] if quick else [])
        result, error = runner.run("pipeline", "pipeline", args)
        # The "peer" here is our own consumer: target positions/s the multi30k training
        # step eats (the faster of XLA on / off; 32 x 32 batches, no padding).
        consumer = None
        if "multi30k" in train_results:
            ours, ours_xla, _ = train_results["multi30k"]
            rates = [r for r in (_get(ours, "target_tokens_per_s"),
                                 _get(ours_xla, "target_tokens_per_s")) if r]
            consumer = max(rates, default=None)
        entry = {
            "metric": "padded_target_positions_per_s", "higher_is_better": True,
            "ours": _get(result, "padded_target_positions_per_s"), "ours_error": error,
            "peer": consumer,
            "peer_name": "our multi30k training step (target positions/s it consumes)",
            "peer_missing": None if consumer else
            "needs the multi30k training benchmark in the same run (--shapes ...,multi30k)",
            "pairs_per_s": _get(result, "pairs_per_second"),
            "real_tokens_per_s": _get(result, "tokens_per_second"),
            "padding_efficiency": _get(result, "padding_efficiency"),
            "target_ratio": TARGETS["pipeline_vs_training"],
            "details": {"pipeline": result},
        }
        benchmarks["input_pipeline_multi30k"] = compare(entry)

    # ---------------------------------------------------------------- model families
    if "families" in sections:
        _families(runner, settings, benchmarks, peak)

    # ---------------------------------------------------------------- Table 1 (full run)
    if "layers" in sections and not quick:
        result, error = runner.run("layer_scaling", "layer_scaling", [])
        report["layer_scaling"] = result if result is not None else {"error": error}

    # ---------------------------------------------------------------- serving (real model)
    if "serving" in sections:
        fast_paths = _serving(runner, benchmarks, serving_model, serving_sentences, peak)
        if fast_paths is not None:
            report["fast_paths"] = {fast_paths.pop("cpu_kind"): fast_paths}

    if "matmul" in sections and set(sections) - {"matmul"}:
        # The machine is shared: a second peak at the end shows how far its speed moved
        # during the run (fractions of peak divide by the first).
        result, error = runner.run("matmul_end", "matmul", matmul_args)
        report["matmul_peak_end"] = result if result is not None else {"error": error}
    report["machine"]["load_average_end"] = common.load_average()
    report["workers"] = runner.workers
    return report


def _add_latencies(entry: dict, **results) -> None:
    """entry["<who>_latency_{p50,p99}_ms"] from each serving worker's batch-1 result."""
    for who, result in results.items():
        for q in ("p50", "p99"):
            entry[f"{who}_latency_{q}_ms"] = _get(result, f"latency_{q}_ms")


def _test_2016_source() -> Path | None:
    path = common.multi30k_test_2016("en")
    return path if path.exists() else None


def _serving_gflops(entry: dict, runs: dict, shape, beam: int, peak) -> None:
    """entry["<who>_gflops"]: each serving run's useful forward GFLOP/s
    (`common.translation_flops` of its source and output tokens / its seconds), and
    entry["peak_gflops"] = peak; nothing when the model's shape is not known."""
    if shape is None:
        return
    for who, run in runs.items():
        entry[f"{who}_gflops"] = None if run is None else common.translation_flops(
            shape, run["source_tokens"], run["target_tokens"], beam) / run["seconds"] / 1e9
    entry["peak_gflops"] = peak


def _serving(runner, benchmarks, model_dir, sentences: int, peak=None) -> None:
    """A trained model served end to end, text in and text out, on real sentences: our
    SavedModel's serving_default vs CTranslate2 on the converted checkpoint (beam 4, alpha
    0.6, 2 threads each), batches of 1, 8 and 64 test 2016 sentences in file order. The
    artefacts are written once per run (serving_prepare) into a temporary directory.
    With the matmul peak of the run (`peak`, GFLOP/s), each figure is also given as
    GFLOP/s and as a fraction of it."""
    import tempfile

    model_dir = Path(model_dir) if model_dir else DEFAULT_SERVING_MODEL
    source = _test_2016_source()
    reason = None
    if not (model_dir / "run_config.json").exists():
        reason = (f"no trained model at {model_dir} (give --model-dir MDIR of a trained "
                  "Transformer run; the benchmark does not train one)")
    elif source is None:
        reason = "Multi30k test 2016 not found (set TRANSFORMER_TF_DATA)"
    else:
        reason = missing_modules(["ctranslate2"])
    if reason is not None:
        log(f"serving: skipped, {reason}")
        benchmarks["serving_multi30k_beam4"] = {"metric": "sentences_per_s", "ours": None,
                                                "peer": None, "skipped": reason}
        return None
    prepared = runner.results.get("serving_prepare")
    if prepared is None:
        out = tempfile.mkdtemp(prefix="transformer_tf_serving_")
        runner.temporary.append(out)
        prepared, error = runner.run("serving_prepare", "serving_prepare",
                                     ["--model-dir", str(model_dir), "--out", out])
        if prepared is None:
            benchmarks["serving_multi30k_beam4"] = {"metric": "sentences_per_s", "ours": None,
                                                    "peer": None, "skipped": error}
            return None
    shape = common.shape_of_model(json.loads((model_dir / "run_config.json").read_text()))
    args = ["--source", str(source), "--sentences", str(sentences)]
    reference = common.multi30k_test_2016("de")
    if reference.exists():
        args += ["--reference", str(reference)]
    # Lanes: both engines with one thread per operation and `lanes` parts of a call at once.
    in_lanes = ["--intra-op", "1", "--inter-op", str(prepared["lanes"])]

    translations = Path(tempfile.mkdtemp(prefix="transformer_tf_translations_"))
    runner.temporary.append(str(translations))

    def serve(name, engine, model, *extra):
        return runner.run(name, "serving", ["--engine", engine, "--model", model, *args,
                                            "--translations", str(translations / name), *extra],
                          needs=["ctranslate2"] if engine == "ctranslate2" else ())

    def same_outputs(name, other, batch):
        return _identical_share(translations / name, translations / other, batch)

    ours, ours_error = serve("serving_savedmodel", "savedmodel", prepared["savedmodel"])
    variants = {}
    for variant in ("unchunked", "chunked_xla", "k_finished", "lanes", "lanes_k_finished"):
        variants[variant] = serve(
            f"serving_savedmodel_{variant}", "savedmodel", prepared[f"savedmodel_{variant}"],
            *(["--warm-up-buckets"] if variant.endswith("xla") else []),
            *(in_lanes if variant.startswith("lanes") else []))
    peer, peer_error = serve("serving_ctranslate2", "ctranslate2", prepared["ctranslate2"])
    peer_lanes, _ = serve("serving_ctranslate2_lanes", "ctranslate2", prepared["ctranslate2"],
                          *in_lanes)

    greedy, greedy_error = serve("serving_savedmodel_greedy", "savedmodel",
                                 prepared["savedmodel_greedy"])
    greedy_lanes, _ = serve("serving_savedmodel_greedy_lanes", "savedmodel",
                            prepared["savedmodel_greedy_lanes"], *in_lanes)
    greedy_xla, greedy_xla_error = serve("serving_savedmodel_greedy_chunked_xla", "savedmodel",
                                         prepared["savedmodel_greedy_chunked_xla"],
                                         "--warm-up-buckets")
    peer_greedy, peer_greedy_error = serve("serving_ctranslate2_greedy", "ctranslate2",
                                           prepared["ctranslate2_greedy"])
    peer_greedy_lanes, _ = serve("serving_ctranslate2_greedy_lanes", "ctranslate2",
                                 prepared["ctranslate2_greedy"], *in_lanes)


    for batch in (1, 8, 64):
        mine, theirs = _run_where(greedy, batch=batch), _run_where(peer_greedy, batch=batch)
        mine_lanes = _run_where(greedy_lanes, batch=batch)
        mine_xla = _run_where(greedy_xla, batch=batch)
        theirs_lanes = _run_where(peer_greedy_lanes, batch=batch)
        entry = {
            "metric": "sentences_per_s", "higher_is_better": True,
            "ours": _get(mine, "sentences_per_s"), "peer": _get(theirs, "sentences_per_s"),
            "ours_lanes": _get(mine_lanes, "sentences_per_s"),
            "ours_chunked_xla": _get(mine_xla, "sentences_per_s"),
            "peer_lanes": _get(theirs_lanes, "sentences_per_s"), "lanes": prepared["lanes"],
            "chunk_size": prepared.get("chunk_size"),
            "xla_chunk_size": prepared.get("xla_chunk_size"),
            "peer_name": "CTranslate2 float32, greedy, on the converted checkpoint",
            "ours_error": greedy_error, "ours_chunked_xla_error": greedy_xla_error,
            "peer_missing": peer_greedy_error,
            "ours_bleu": _get(mine, "bleu"), "peer_bleu": _get(theirs, "bleu"),
            "model_dir": str(model_dir), "checkpoint": prepared.get("checkpoint"),
            "details": {"ours": mine, "peer": theirs, "ours_lanes": mine_lanes,
                        "ours_chunked_xla": mine_xla, "peer_lanes": theirs_lanes},
        }
        _serving_gflops(entry, {"ours": mine, "ours_lanes": mine_lanes,
                                "ours_chunked_xla": mine_xla, "peer": theirs,
                                "peer_lanes": theirs_lanes}, shape, 1, peak)
        if batch == 1:
            _add_latencies(entry, ours=mine, ours_chunked_xla=mine_xla, peer=theirs)
        if batch == 64:
            entry["target_ratio"] = TARGETS["serving_greedy_vs_ctranslate2_batch64"]
        benchmarks[f"serving_multi30k_greedy_batch{batch}"] = compare(entry)

    for batch in (1, 8, 64):
        mine, theirs = _run_where(ours, batch=batch), _run_where(peer, batch=batch)
        variant_runs = {v: _run_where(result, batch=batch)
                        for v, (result, _) in variants.items()}
        theirs_lanes = _run_where(peer_lanes, batch=batch)
        entry = {
            "metric": "sentences_per_s", "higher_is_better": True,
            "ours": _get(mine, "sentences_per_s"), "peer": _get(theirs, "sentences_per_s"),
            **{f"ours_{v}": _get(r, "sentences_per_s") for v, r in variant_runs.items()},
            "peer_lanes": _get(theirs_lanes, "sentences_per_s"),
            "lanes": prepared["lanes"],
            **{f"ours_{v}_error": error for v, (_, error) in variants.items()},
            "chunk_size": prepared.get("chunk_size"),
            "xla_chunk_size": prepared.get("xla_chunk_size"),
            "peer_name": "CTranslate2 float32 on the converted checkpoint (+ sentencepiece)",
            "ours_error": ours_error, "peer_missing": peer_error,
            "ours_target_tokens_per_s": _get(mine, "target_tokens_per_s"),
            "peer_target_tokens_per_s": _get(theirs, "target_tokens_per_s"),
            "ours_bleu": _get(mine, "bleu"), "peer_bleu": _get(theirs, "bleu"),
            "model_dir": str(model_dir), "checkpoint": prepared.get("checkpoint"),
            "details": {"ours": mine, **{f"ours_{v}": r for v, r in variant_runs.items()},
                        "peer": theirs, "peer_lanes": theirs_lanes,
                        "ours_decoding": _get(ours, "decoding"),
                        "peer_decoding": _get(peer, "decoding")},
        }
        _serving_gflops(entry, {"ours": mine, **{f"ours_{v}": r for v, r in variant_runs.items()},
                                "peer": theirs, "peer_lanes": theirs_lanes},
                        shape, prepared["beam_size"], peak)
        if batch == 1:
            _add_latencies(entry, ours=mine, peer=theirs)
        if batch == 64:
            entry["target_ratio"] = TARGETS["serving_vs_ctranslate2_batch64"]
        benchmarks[f"serving_multi30k_beam4_batch{batch}"] = compare(entry)

    bf16 = serve("serving_savedmodel_bf16", "savedmodel", prepared["savedmodel_bf16"])
    bf16_lanes = serve("serving_savedmodel_bf16_lanes", "savedmodel",
                       prepared["savedmodel_bf16_lanes"], *in_lanes)
    # Per precision of ours: (one search, 2 lanes), each a (result, error) pair.
    ours_by_precision = {"float32": ((ours, ours_error), variants["lanes"]),
                         "bfloat16": (bf16, bf16_lanes)}
    peers = {}  # compute type -> (one translator, 2 in lanes), each a (result, error) pair
    for compute_type in CT2_COMPUTE_TYPES:
        if compute_type in prepared["ct2_compute_types"]:
            name, model = f"serving_ctranslate2_{compute_type}", prepared["ctranslate2"]
            peers[compute_type] = (
                serve(name, "ctranslate2", model, "--compute-type", compute_type),
                serve(f"{name}_lanes", "ctranslate2", model, "--compute-type", compute_type,
                      *in_lanes))
    for batch in (1, 8, 64):
        for compute_type, (ours_precision, comparison) in CT2_COMPUTE_TYPES.items():
            (mine, mine_error), (mine_lanes, _) = ours_by_precision[ours_precision]
            unsupported = (None, f"CTranslate2 compute_type {compute_type} not supported on "
                                 f"this CPU (it lists {', '.join(prepared['ct2_compute_types'])})")
            (theirs, theirs_error), (theirs_lanes, _) = peers.get(compute_type,
                                                                  (unsupported, unsupported))
            entry = _precision_entry(_run_where(mine, batch=batch), mine_error,
                                     _run_where(theirs, batch=batch), theirs_error,
                                     f"CTranslate2 {compute_type} on the converted checkpoint",
                                     comparison, ours_precision, prepared,
                                     lanes=(_run_where(mine_lanes, batch=batch),
                                            _run_where(theirs_lanes, batch=batch)))
            entry["peer_same_outputs_as_its_float32"] = same_outputs(
                f"serving_ctranslate2_{compute_type}", "serving_ctranslate2", batch)
            benchmarks[f"serving_multi30k_beam4_batch{batch}_ct2_{compute_type}"] = entry
    # Our two precisions like with like: one search each, and both in lanes of one thread
    # (one thread's bfloat16 products gain more over float32 than two threads' do).
    for layout, pair in (("", 0), ("_lanes", 1)):
        (mine, mine_error), (theirs, theirs_error) = (ours_by_precision["bfloat16"][pair],
                                                      ours_by_precision["float32"][pair])
        in_same_lanes = ("", "") if not layout else (" in the same lanes", ", both in lanes")
        for batch in (1, 8, 64):
            entry = _precision_entry(_run_where(mine, batch=batch), mine_error,
                                     _run_where(theirs, batch=batch), theirs_error,
                                     f"our float32 export{in_same_lanes[0]}",
                                     f"like with like: our two precisions{in_same_lanes[1]}",
                                     "bfloat16", prepared, TARGETS["serving_bf16_vs_float32"])
            entry["same_outputs_as_float32"] = same_outputs(
                f"serving_savedmodel_bf16{layout}", f"serving_savedmodel{layout}", batch)
            name = f"serving_multi30k_beam4_batch{batch}_bf16{layout}_vs_float32{layout}"
            benchmarks[name] = entry
    flipped, _ = serve("serving_savedmodel_lanes_padding_flipped", "savedmodel",
                       prepared["savedmodel_lanes_padding_flipped"], *in_lanes)
    return _fast_paths(prepared, ours, {v: result for v, (result, _) in variants.items()},
                       flipped)


def _identical_share(a: Path, b: Path, batch: int) -> float | None:
    """The share of sentences two serving runs translated identically at batch size
    `batch`, from the files the worker wrote with --translations; None if either is
    missing (a run that failed or was skipped)."""
    paths = [directory / f"batch{batch}.txt" for directory in (a, b)]
    if not all(path.exists() for path in paths):
        return None
    first, second = (path.read_text(encoding="utf-8").splitlines() for path in paths)
    count = min(len(first), len(second))
    return round(sum(x == y for x, y in zip(first, second)) / count, 4) if count else None


def _precision_entry(mine, mine_error, theirs, theirs_error, peer_name: str,
                     comparison: str, ours_precision: str, prepared: dict,
                     target=None, lanes=None) -> dict:
    """A serving entry of one of our runs against a run in another arithmetic (worker
    runs of one batch size), with both BLEU scores and what kind of comparison it is.
    `lanes`: (ours, theirs) in 2 lanes each, giving "ours_lanes", "peer_lanes" and so
    `compare`'s "ratio_best" (each engine at its better layout)."""
    entry = {"metric": "sentences_per_s", "higher_is_better": True,
             "ours": _get(mine, "sentences_per_s"), "peer": _get(theirs, "sentences_per_s"),
             "ours_precision": ours_precision, "comparison": comparison,
             "ours_bleu": _get(mine, "bleu"), "peer_bleu": _get(theirs, "bleu"),
             "peer_name": peer_name, "ours_error": mine_error, "peer_missing": theirs_error,
             "native_bfloat16": prepared.get("native_bfloat16"),
             "details": {"ours": mine, "peer": theirs}}
    if lanes is not None:
        entry["ours_lanes"], entry["peer_lanes"] = (_get(run, "sentences_per_s")
                                                    for run in lanes)
        entry["details"].update(ours_lanes=lanes[0], peer_lanes=lanes[1])
    if ours_precision == "bfloat16" and not prepared.get("native_bfloat16"):
        entry["note"] = ("this CPU has no native bfloat16: our bfloat16 export ran "
                         "TensorFlow's emulation (forced)")
    if target is not None:
        entry["target_ratio"] = target
    return compare(entry)


def _fast_paths(prepared: dict, ours, variants: dict, flipped) -> dict:
    """Which inference fast paths paid on this CPU, from serving runs paired in this run:
    per path its sentences/s with it on over off at each batch size ("on_over_off"),
    whether the export turns it on by default here ("default_on"), and what was compared.
    `variants` are the serving section's SavedModel variant results, `flipped` the lanes
    export with the kernel padding the other way round from the default."""
    padded = prepared["kernel_padding_default"]
    pairs = {  # path -> (on, off, default_on, what)
        "chunking": (ours, variants.get("unchunked"), True,
                     "default export (chunks sorted by length) / unchunked"),
        "lanes": (variants.get("lanes"), ours, False,
                  f"{prepared['lanes']} lanes (intra-op 1) / one search"),
        "xla": (variants.get("chunked_xla"), ours, False,
                "chunked XLA export / default export"),
        "kernel_padding": ((variants.get("lanes"), flipped) if padded
                           else (flipped, variants.get("lanes"))) + (
            padded, "lanes export with padded / plain kernels"),
    }
    paths = {}
    for path, (on, off, default_on, what) in pairs.items():
        paths[path] = {"default_on": default_on, "compared": what, "on_over_off": {
            f"batch{batch}": _ratio(_get(_run_where(on, batch=batch), "sentences_per_s"),
                                    _get(_run_where(off, batch=batch), "sentences_per_s"))
            for batch in (1, 8, 64)}}
    return {"cpu_kind": prepared["cpu_kind"], "matmul_library": prepared["matmul_library"],
            "paths": paths}


def _decode_args(settings, shapes) -> list[str]:
    """decode_tf's arguments of the bf16 section (XLA off) and of `_decode_compute_types`."""
    return ["--shapes", ",".join(shapes), "--beams", "1,4", "--xla-modes", "off",
            *_repeat_args(settings["decode"])]


def _decode_compute_types(runner, settings, benchmarks, shapes, ours, ours_error,
                          ct2) -> None:
    """decode_<shape>_<search>_vs_ctranslate2_<type>: CTranslate2 in each of
    CT2_COMPUTE_TYPES that the CPU runs against our search in the same arithmetic
    (mixed_bfloat16 for the bfloat16 types, run here when one of them ran) or, for the
    int8 types, named as the gap."""
    ct2_result, ct2_error = ct2
    ran = {run.get("compute_type") for run in (ct2_result or {}).get("runs", [])}
    bf16 = (None, "no CTranslate2 bfloat16 type ran")
    if ran & {t for t, (ours_precision, _) in CT2_COMPUTE_TYPES.items()
              if ours_precision == "bfloat16"}:
        bf16 = runner.run("decode_tf_mixed_bfloat16", "decode_tf",
                          [*_decode_args(settings, shapes), "--precision", "mixed_bfloat16"])
    for shape in shapes:
        for beam, name in ((1, "greedy"), (4, "beam4")):
            for compute_type, (ours_precision, comparison) in CT2_COMPUTE_TYPES.items():
                mine, mine_error = bf16 if ours_precision == "bfloat16" else (ours, ours_error)
                theirs = _run_where(ct2_result, shape=shape, beam=beam,
                                    compute_type=compute_type)
                missing = ct2_error or (None if theirs is not None else
                                        f"CTranslate2 compute_type {compute_type} not "
                                        "supported on this CPU")
                mine = _run_where(mine, shape=shape, beam=beam, xla=False)
                benchmarks[f"decode_{shape}_{name}_vs_ctranslate2_{compute_type}"] = compare({
                    "metric": "output_tokens_per_s", "higher_is_better": True,
                    "ours": _get(mine, "output_tokens_per_s"),
                    "peer": _get(theirs, "output_tokens_per_s"),
                    "ours_precision": ours_precision, "comparison": comparison,
                    "peer_name": f"CTranslate2 {compute_type} (Marian, random weights)",
                    "ours_error": mine_error, "peer_missing": missing,
                    "details": {"ours": mine, "peer": theirs}})


def _bfloat16(runner, settings, benchmarks, shapes, train_results) -> None:
    """Our training step and greedy / beam-4 decoding in mixed_bfloat16 against float32
    (each shape, XLA off): the same workers with `--precision`. The float32 training
    figure is the train section's when it ran."""
    for shape in shapes:
        spec = settings["train_big"] if shape == "base" else settings["train_small"]
        train_args = ["--shape", shape, *_repeat_args(spec)]
        float32 = (train_results.get(shape) or (None,))[0]
        float32_error = None
        if float32 is None:
            float32, float32_error = runner.run(f"train_tf_{shape}", "train_tf", train_args)
        bf16, bf16_error = runner.run(f"train_tf_{shape}_bf16", "train_tf",
                                      [*train_args, "--precision", "mixed_bfloat16"])
        benchmarks[f"train_{shape}_bf16_vs_float32"] = _versus_float32(
            "target_tokens_per_s", "our training step", (bf16, bf16_error),
            (float32, float32_error))
    by_precision = {precision: runner.run(f"decode_tf_{precision}", "decode_tf",
                                          [*_decode_args(settings, shapes), "--precision",
                                           precision])
                    for precision in ("float32", "mixed_bfloat16")}

    (float32, float32_error), (bf16, bf16_error) = (by_precision["float32"],
                                                    by_precision["mixed_bfloat16"])
    for shape in shapes:
        for beam, name in ((1, "greedy"), (4, "beam4")):
            benchmarks[f"decode_{shape}_{name}_bf16_vs_float32"] = _versus_float32(
                "output_tokens_per_s", "our search",
                (_run_where(bf16, shape=shape, beam=beam), bf16_error),
                (_run_where(float32, shape=shape, beam=beam), float32_error))


def _versus_float32(metric: str, what: str, bf16, float32) -> dict:
    """A benchmark entry of a mixed_bfloat16 figure (ours) against the same workload in
    float32 (peer); `bf16` and `float32` are (worker result or run, error) pairs."""
    (mine, mine_error), (reference, reference_error) = bf16, float32
    return compare({
        "metric": metric, "higher_is_better": True,
        "ours": _get(mine, metric), "peer": _get(reference, metric),
        "peer_name": f"{what} in float32", "ours_error": mine_error,
        "peer_missing": reference_error, "target_ratio": TARGETS["bf16_vs_float32"],
        "details": {"ours": mine, "peer": reference}})


def _families(runner, settings, benchmarks, peak) -> None:
    """ConvS2S (convs2s_multi30k) vs the Transformer of the same parameter count (the
    multi30k preset with d_ff matched), training and beam-4 decoding, one worker each."""
    args = _repeat_args(settings["train_small"])
    convs2s, convs2s_error = runner.run("family_convs2s", "family_tf",
                                        ["--preset", "convs2s_multi30k", *args])
    transformer, transformer_error = runner.run(
        "family_transformer", "family_tf",
        ["--preset", "multi30k", "--match-params", "convs2s_multi30k", *args])

    def part(result, name, key):
        return _get(_get(result, name), key)

    common_fields = {
        "higher_is_better": True, "ours_error": convs2s_error, "peer_missing": transformer_error,
        "peer_name": "our Transformer (multi30k preset, d_ff matched to ConvS2S's parameters)",
        "ours_parameters": _get(convs2s, "parameters"),
        "peer_parameters": _get(transformer, "parameters"),
        "details": {"ours": convs2s, "peer": transformer},
    }
    benchmarks["train_convs2s_vs_transformer_multi30k"] = compare({
        "metric": "target_tokens_per_s", **common_fields,
        "ours": part(convs2s, "train", "target_tokens_per_s"),
        "peer": part(transformer, "train", "target_tokens_per_s"),
        "ours_gflops": part(convs2s, "train", "achieved_gflops"),
        "peer_gflops": part(transformer, "train", "achieved_gflops"),
        "ours_flops_per_target_token": _get(convs2s, "training_flops_per_target_token"),
        "peer_flops_per_target_token": _get(transformer, "training_flops_per_target_token"),
        "peak_gflops": peak,
    })
    benchmarks["decode_convs2s_vs_transformer_multi30k_beam4"] = compare({
        "metric": "sentences_per_s", **common_fields,
        "ours": part(convs2s, "decode", "sentences_per_s"),
        "peer": part(transformer, "decode", "sentences_per_s"),
    })




def _fmt(value, digits=1):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def print_table(report: dict) -> None:
    peak = (report.get("matmul_peak") or {}).get("peak_gflops")
    print(f"matmul peak (fp32, 2 threads): {_fmt(peak)} GFLOP/s  "
          f"{json.dumps({k: v for k, v in (report.get('matmul_peak') or {}).items() if k.endswith('_gflops')})}")
    if report.get("matmul_peak_end"):
        print(f"  again at the end of the run: "
              f"{_fmt(report['matmul_peak_end'].get('peak_gflops'))} GFLOP/s")
    header = (f"{'benchmark':38} {'metric':30} {'ours':>9} {'ours_xla':>9} {'peer':>9} "
              f"{'ratio':>6} {'r_xla':>6} {'target':>6} {'%peak':>6}")
    print(header)
    for name, e in report["benchmarks"].items():
        best_fraction = _best(e, "ours_fraction_of_peak", "ours_xla_fraction_of_peak")
        print(f"{name:38} {e['metric']:30} {_fmt(e.get('ours')):>9} {_fmt(e.get('ours_xla')):>9} "
              f"{_fmt(e.get('peer')):>9} {_fmt(e.get('ratio'), 2):>6} "
              f"{_fmt(e.get('ratio_xla'), 2):>6} {_fmt(e.get('target_ratio'), 2):>6} "
              f"{_fmt(None if best_fraction is None else 100 * best_fraction):>6}")
        if "ratio_best" in e:
            print(f"    each engine at its best (our variants; the peer with and without "
                  f"lanes): ratio {_fmt(e['ratio_best'], 2)}")
        if "ratio_same_rule" in e:
            print(f"    both stopping once beam-size hypotheses have finished (our k_finished "
                  f"exports): ratio {_fmt(e['ratio_same_rule'], 2)}")
        if e.get("target_implies_fraction_of_peak") is not None:
            print(f"    the target would take {100 * e['target_implies_fraction_of_peak']:.0f}% "
                  f"of the peak in useful products (the peer's best: "
                  f"{100 * e['target_implies_fraction_of_peak'] / e['target_ratio']:.0f}%)")
        if e.get("peer_missing"):
            print(f"    peer missing: {e['peer_missing']}")
        if e.get("skipped"):
            print(f"    skipped: {e['skipped']}")
    failed = {k: v["error"] for k, v in report.get("workers", {}).items() if not v["ok"]}
    for name, error in failed.items():
        print(f"worker {name} failed: {error}")
    print(f"total {report['seconds']} s; load average {report['machine']['load_average_start']}"
          f" -> {report['machine']['load_average_end']}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--quick", action="store_true",
                        help="about 5 minutes: fewer repeats, no XLA decoding")
    parser.add_argument("--json", action="store_true", help="print the one JSON object")
    parser.add_argument("--out", default=None, help="also write the JSON object to this file")
    parser.add_argument("--only", default=None,
                        help=f"comma-separated subset of {','.join(SECTIONS)} (default: all; "
                             f"with --quick all but {','.join(NOT_IN_QUICK)})")
    parser.add_argument("--without", default="",
                        help="comma-separated peer modules to treat as missing "
                             "(torch, ctranslate2, transformers)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every worker this many times, interleaved, keep the best "
                             "(evens out a noisy machine; multiplies the time)")
    parser.add_argument("--model-dir", default=None,
                        help="trained Transformer run for the serving section (default: "
                             "runs/multi30k_en_de/model; skipped if absent, nothing is trained)")
    parser.add_argument("--serving-sentences", type=int, default=1000,
                        help="test 2016 sentences the serving section translates")
    parser.add_argument("--shapes", default="base,multi30k",
                        help="model shapes (base, multi30k; tiny to develop the bench)")
    args = parser.parse_args(argv)
    if args.only is None:
        sections = [s for s in SECTIONS if not (args.quick and s in NOT_IN_QUICK)]
    else:
        sections = [s for s in args.only.split(",") if s]
    unknown = sorted(set(sections) - set(SECTIONS))
    shapes = [s for s in args.shapes.split(",") if s]
    if unknown or not set(shapes) <= set(common.SHAPES):
        parser.error(f"unknown section(s) {unknown} or shape(s) in {shapes}")
    report = run_suite(args.quick, sections, shapes,
                       [m for m in args.without.split(",") if m], max(1, args.rounds),
                       args.model_dir, args.serving_sentences)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    if args.json:
        print(json.dumps(report))
    else:
        print_table(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
