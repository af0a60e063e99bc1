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
import json
import os
import platform
import shlex
import shutil
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import common  # noqa: E402
import serving_section  # noqa: E402
import workloads  # noqa: E402
from comparison import largest, rounded, value_of  # noqa: E402
from suite_runner import Runner, log, plan  # noqa: E402

from transformer_tf.runtime.cpu import cpu_model_name  # light: no TensorFlow
from transformer_tf.runtime.provenance import current_commit, machine_description

SECTIONS = ("matmul", "train", "decode", "bf16", "pipeline", "families", "layers", "serving")
# Sections that --quick leaves out unless --only names them (they take minutes).
NOT_IN_QUICK = ("serving",)


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
    return rounded(report)


def _suite_pass(runner, quick, sections, shapes, without, serving_model=None,
                serving_sentences=1000) -> dict:
    settings = plan(quick)
    report: dict = {
        "suite": "transformer_tf bench/run_all.py",
        "quick": quick,
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "commit": current_commit(),
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                    "processor": cpu_model_name(), "description": machine_description(),
                    "python": platform.python_version(),
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
        peak = value_of(result, "peak_gflops")

    # ---------------------------------------------------------------- random weights
    train_results = {}
    if "train" in sections:
        train_results = workloads.train(runner, settings, shapes, benchmarks, peak)
    if "decode" in sections:
        workloads.decode(runner, settings, shapes, benchmarks, peak, quick)
    if "bf16" in sections:
        workloads.bfloat16(runner, settings, benchmarks, shapes, train_results)
    if "pipeline" in sections:
        workloads.pipeline(runner, settings, quick, train_results, benchmarks)
    if "families" in sections:
        workloads.families(runner, settings, benchmarks, peak)

    # ---------------------------------------------------------------- Table 1 (full run)
    if "layers" in sections and not quick:
        result, error = runner.run("layer_scaling", "layer_scaling", [])
        report["layer_scaling"] = result if result is not None else {"error": error}

    # ---------------------------------------------------------------- serving (real model)
    if "serving" in sections:
        fast_paths = serving_section.serving(runner, benchmarks, serving_model,
                                             serving_sentences, peak)
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
        best_fraction = largest(e, "ours_fraction_of_peak", "ours_xla_fraction_of_peak")
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
    parser.add_argument("--out", default=None,
                        help="also write the JSON object to this file (must not exist yet)")
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
    common.refuse_existing_outputs(parser, [args.out])
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
    report["command"] = shlex.join(["python", "bench/run_all.py",
                                    *(sys.argv[1:] if argv is None else argv)])
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    if args.json:
        print(json.dumps(report))
    else:
        print_table(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
