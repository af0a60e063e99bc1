"""Repeated runs of the serving section, summarised into one results file: what the
summaries share (bench/fast_path_runs.py: each fast path on over off;
bench/ctranslate2_runs.py: ours over CTranslate2).

One run's ratio moves with a shared machine by a tenth or two, so a table in the docs rests
on several runs of `bench/run_all.py --only matmul,serving --json --out FILE` on a quiet
machine. The runs must be of one kind of CPU and one machine; the machine and the command
(without each run's --out) come from the runs, where they must agree, the commit is the
last run's, and files written before run_all recorded them need --commit, --machine and
--command.
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import shlex
import statistics
from typing import Callable

import common

ROOT = pathlib.Path(__file__).resolve().parent.parent


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


def cpu_kind(runs: dict[str, dict]) -> str:
    """The one CPU kind of `runs` ({file name: run JSON}, each from `load_run`)."""
    kinds = {name: next(iter(run["fast_paths"])) for name, run in runs.items()}
    if len(set(kinds.values())) != 1:
        raise RunsError("runs of several CPU kinds: " + ", ".join(
            f"{name} ({kind})" for name, kind in kinds.items()))
    return next(iter(kinds.values()))


def median_and_range(ratios: list[float]) -> tuple[dict, str]:
    """({"median", "min", "max"} rounded to 2 places, "median (lowest-highest)", or the
    one value alone) of a non-empty list."""
    ordered = sorted(ratios)
    median, low, high = statistics.median(ordered), ordered[0], ordered[-1]
    text = f"{median:.2f}" if len(ordered) == 1 else f"{median:.2f} ({low:.2f}-{high:.2f})"
    return {"median": round(median, 2), "min": round(low, 2), "max": round(high, 2)}, text


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


def served_sentences(runs: dict[str, dict]) -> str:
    """"the first 400 test 2016 sentences" when every run served the same number."""
    def count(run):
        entry = (run.get("benchmarks") or {}).get("serving_multi30k_beam4_batch1") or {}
        return ((entry.get("details") or {}).get("ours") or {}).get("sentences")
    counts = {count(run) for run in runs.values()} - {None}
    return (f"the first {counts.pop():,} test 2016 sentences" if len(counts) == 1
            else "test 2016 sentences")


def provenance(runs: dict[str, dict], tool: str, commit: str | None = None,
               machine: str | None = None, command: str | None = None,
               conditions: str | None = None) -> dict:
    """The results-file fields (results/README.md) that come from the runs themselves:
    command, short_command, commit, commit_role, machine (with the matmul peaks), date
    (the last run's day), conditions (`conditions`, then how many runs at which
    commits) and source (the run files, then `tool`, the summarising script)."""
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
    noted = [f"{len(runs)} runs of the serving section"
             + (f", at {', '.join(dict.fromkeys(commits))}" if all(commits) else "")]
    if conditions:
        noted.insert(0, conditions)
    return {
        "command": command,
        "short_command": "python bench/run_all.py --only matmul,serving --json",
        "commit": commit,
        "commit_role": "measured",
        "machine": machine + (f"; {peaks}" if peaks else ""),
        "date": (list(runs.values())[-1].get("started") or
                 datetime.date.today().isoformat())[:10],
        "conditions": "; ".join(noted),
        "source": ", ".join(runs) + f"; summarised by {tool}",
    }


def _relative_name(path: pathlib.Path) -> str:
    """The run's file as results files name a source (raw/NAME.json), else as given."""
    try:
        return str(path.resolve().relative_to(ROOT / "results"))
    except ValueError:
        return str(path)


def command_line(argv, doc: str, build: Callable[..., dict]) -> int:
    """The tools' shared command line: RUN.json... --out FILE [--commit --machine
    --command --conditions]; `build(runs, commit, machine, command, conditions)` makes
    the results file, written once (an existing --out is refused)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=doc.split("\n\n", 1)[1])
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
        document = build(runs, args.commit, args.machine, args.command, args.conditions)
    except RunsError as error:
        parser.error(str(error))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"{args.out}: {document['headline'].format(**document['values'])}")
    return 0
