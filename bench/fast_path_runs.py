#!/usr/bin/env python
"""The inference fast paths over repeated serving runs on one kind of CPU: for each path
(chunking, lanes, XLA, kernel padding) and batch size, the median and the range over the
runs of its sentences/s with the path on over off (`fast_paths` in bench/run_all.py's
JSON, each ratio paired within one run), written as a results file for the docs'
table of fast paths by kind of CPU (docs/performance.md).

One run is noisy: a ratio of 0.9 or 1.1 may be the machine, not the path. Run the
serving section several times on a quiet machine, then summarise:

    python bench/run_all.py --only matmul,serving --json --model-dir runs/multi30k_en_de/model \\
        --serving-sentences 400 --out results/raw/bench-serving-avx2-RUN1.json
    ... (again, --out results/raw/bench-serving-avx2-RUN2.json, ...)
    python bench/fast_path_runs.py results/raw/bench-serving-avx2-RUN*.json \\
        --out results/serving/avx2-fast-paths-repeated-runs.json

The runs must be of one kind of CPU and one export default per path. The machine and the
command (without --out) come from the runs, where they must agree, and the commit is the
last run's; files written before run_all recorded them need --commit, --machine and
--command.
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import shlex
import statistics
import sys

BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import common  # noqa: E402

ROOT = BENCH.parent
PATHS = ("chunking", "lanes", "xla", "kernel_padding")
BATCHES = (1, 8, 64)
PRODUCTS = {"eigen": "Eigen", "onednn": "oneDNN"}


class RunsError(ValueError):
    """A run file that cannot be summarised with the others (named in the message)."""


def load_run(path: pathlib.Path) -> dict:
    """One run_all JSON with a serving section's `fast_paths` of exactly one CPU kind."""
    from transformer_tf.runtime.json_file import JsonFileError, read_json_file

    try:
        run = read_json_file(path)
    except JsonFileError as error:
        raise RunsError(str(error)) from None
    except OSError as error:
        raise RunsError(f"{path}: {error.strerror}") from None
    kinds = list((run.get("fast_paths") or {}))
    if len(kinds) != 1:
        raise RunsError(f"{path}: no serving section's fast_paths (run bench/run_all.py "
                        f"with --only matmul,serving and a --model-dir)" if not kinds
                        else f"{path}: fast_paths of several CPU kinds {kinds}")
    return run


def _kind_of(run: dict) -> str:
    return next(iter(run["fast_paths"]))


def summarise(runs: dict[str, dict]) -> dict:
    """{"kind", "library", "rows", "values"} over `runs` ({file name: run JSON}): per path
    a row of "median (lowest-highest)" per batch size, and the values
    `<path>_batch<N>_{median,min,max}`. A path a run did not measure (its ratio None) is
    left out of that cell's figures; a cell no run measured is empty."""
    kinds = {name: _kind_of(run) for name, run in runs.items()}
    if len(set(kinds.values())) != 1:
        raise RunsError("runs of several CPU kinds: " + ", ".join(
            f"{name} ({kind})" for name, kind in kinds.items()))
    kind = next(iter(kinds.values()))
    sections = {name: run["fast_paths"][kind] for name, run in runs.items()}
    libraries = {section.get("matmul_library") for section in sections.values()}
    rows, values = [], {}
    for path in PATHS:
        measured = {name: section["paths"][path] for name, section in sections.items()
                    if path in section.get("paths", {})}
        if not measured:
            continue
        defaults = {name: entry["default_on"] for name, entry in measured.items()}
        if len(set(defaults.values())) != 1:
            raise RunsError(f"{path}: the export default differs between the runs "
                            f"{defaults}; summarise runs of the same default")
        row = {"path": path, "compared": next(iter(measured.values()))["compared"],
               "default_on": "on" if next(iter(defaults.values())) else "off"}
        for batch in BATCHES:
            key = f"batch{batch}"
            ratios = sorted(entry["on_over_off"].get(key) for entry in measured.values()
                            if entry["on_over_off"].get(key) is not None)
            if not ratios:
                row[key] = ""
                continue
            median, low, high = statistics.median(ratios), ratios[0], ratios[-1]
            values.update({f"{path}_{key}_median": round(median, 2),
                           f"{path}_{key}_min": round(low, 2),
                           f"{path}_{key}_max": round(high, 2)})
            row[key] = (f"{median:.2f}" if len(ratios) == 1
                        else f"{median:.2f} ({low:.2f}-{high:.2f})")
        rows.append(row)
    return {"kind": kind, "libraries": sorted(filter(None, libraries)) or ["unknown"],
            "rows": rows, "values": values}


def _agreed(found: dict[str, str | None], given: str | None, what: str) -> str:
    """`given`, else the one value every run recorded (`found`: {file name: value})."""
    if given is not None:
        return given
    missing = [name for name, value in found.items() if not value]
    if missing:
        raise RunsError(f"{', '.join(missing)}: no {what} recorded (written before "
                        f"bench/run_all.py recorded it): give it with --{what}")
    if len(set(found.values())) != 1:
        raise RunsError(f"the runs record different {what}s: " + "; ".join(
            f"{name}: {value}" for name, value in found.items()) + f"; give one with --{what}")
    return next(iter(found.values()))


def _without_out(command: str | None) -> str | None:
    """A run_all command without its --out FILE, which names each run's own file."""
    if not command:
        return command
    words, kept = shlex.split(command), []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word == "--out":
            skip = True
        elif not word.startswith("--out="):
            kept.append(word)
    return shlex.join(kept)


def _peaks(runs: dict[str, dict]) -> str:
    """"TensorFlow 2048x2048 matmul peak 208-216 GFLOP/s float32" over the runs (with
    bfloat16's where the CPU multiplies bfloat16 natively: an emulated peak is not the
    machine's), or "" when none measured the peak."""
    def span(key):
        found = sorted(v for v in ((run.get("matmul_peak") or {}).get(key)
                                   for run in runs.values()) if v is not None)
        if not found:
            return None
        return (f"{found[0]:.0f}" if round(found[0]) == round(found[-1])
                else f"{found[0]:.0f}-{found[-1]:.0f}")
    native = any((run.get("matmul_peak") or {}).get("cpu_bf16") for run in runs.values())
    float32, bfloat16 = span("tf_gflops"), span("tf_bf16_gflops") if native else None
    if float32 is None:
        return ""
    text = f"TensorFlow 2048x2048 matmul peak {float32} GFLOP/s float32"
    return text + (f", {bfloat16} bfloat16" if bfloat16 else "")


def _serving_sentences(run: dict) -> int | None:
    entry = (run.get("benchmarks") or {}).get("serving_multi30k_beam4_batch1") or {}
    return ((entry.get("details") or {}).get("ours") or {}).get("sentences")


def results_document(runs: dict[str, dict], commit: str | None = None,
                     machine: str | None = None, command: str | None = None,
                     conditions: str | None = None) -> dict:
    """The results file (results/README.md's fields) of the fast paths over `runs`."""
    summary = summarise(runs)
    kind, count = summary["kind"], len(runs)
    commits = [run.get("commit") for run in runs.values()]
    if commit is None:
        if not commits[-1]:
            raise RunsError(f"{list(runs)[-1]}: no commit recorded (written before "
                            f"bench/run_all.py recorded it): give it with --commit")
        commit = commits[-1]
    machine = _agreed({name: (run.get("machine") or {}).get("description")
                       for name, run in runs.items()}, machine, "machine")
    command = _agreed({name: _without_out(run.get("command")) for name, run in runs.items()},
                      command, "command")
    peaks = _peaks(runs)
    sentences = {_serving_sentences(run) for run in runs.values()} - {None}
    served = (f"the first {sentences.pop():,} test 2016 sentences" if len(sentences) == 1
              else "test 2016 sentences")
    library = " and ".join(PRODUCTS.get(name, name) for name in summary["libraries"])
    noted = [f"{count} runs of the serving section"
             + (f", at {', '.join(dict.fromkeys(commits))}" if all(commits) else "")]
    if conditions:
        noted.insert(0, conditions)
    batch64 = {path: summary["values"].get(f"{path}_batch64_median") for path in PATHS}
    return {
        "what": f"inference fast paths on an {kind} CPU ({library} products): sentences/s "
                f"with each path on over off, beam 4, serving {served} through the "
                f"SavedModel, paired within each of {count} runs of the serving section; "
                f"median of the {count} runs (lowest-highest)",
        "title": f"Fast paths on {kind}, {count} runs",
        "command": command,
        "short_command": "python bench/run_all.py --only matmul,serving --json",
        "commit": commit,
        "commit_role": "measured",
        "machine": machine + (f"; {peaks}" if peaks else ""),
        "date": (list(runs.values())[-1].get("started") or
                 datetime.date.today().isoformat())[:10],  # the last run's day
        "conditions": "; ".join(noted),
        "source": ", ".join(runs) + "; summarised by bench/fast_path_runs.py",
        "headline": "at batch 64, each path on over off: " + ", ".join(
            f"{path} {{{path}_batch64_median}}x" for path, value in batch64.items()
            if value is not None),
        "values": summary["values"],
        "units": {},
        "columns": [{"key": "path", "label": "path"},
                    {"key": "compared", "label": "compared"},
                    *({"key": f"batch{b}", "label": f"batch {b}"} for b in BATCHES),
                    {"key": "default_on", "label": "export default here"}],
        "rows": summary["rows"],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("runs", nargs="+", type=pathlib.Path,
                        help="bench/run_all.py JSON files of the serving section, "
                             "results/raw/... (one kind of CPU)")
    parser.add_argument("--out", required=True, type=pathlib.Path,
                        help="the results file to write, results/serving/NAME.json")
    parser.add_argument("--commit", help="the commit measured (default: the last run's)")
    parser.add_argument("--machine", help="default: the runs' machine description")
    parser.add_argument("--command", help="default: the runs' bench/run_all.py command")
    parser.add_argument("--conditions", help="what else is worth saying: the model, the "
                                             "machine's load")
    args = parser.parse_args(argv)
    common.refuse_existing_outputs(parser, [args.out])
    try:
        runs = {_relative_name(path): load_run(path) for path in args.runs}
        document = results_document(runs, args.commit, args.machine, args.command,
                                    args.conditions)
    except RunsError as error:
        parser.error(str(error))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"{args.out}: {document['headline'].format(**document['values'])}")
    return 0


def _relative_name(path: pathlib.Path) -> str:
    """The run's file as results files name a source (raw/NAME.json), else as given."""
    try:
        return str(path.resolve().relative_to(ROOT / "results"))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    sys.exit(main())
