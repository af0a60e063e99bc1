"""One worker, two source trees, the same run: did a change slow a path down?

Runs `bench/workers/<worker>.py ARGS` from the tree under test (this repository) and from
a BEFORE tree (e.g. `git archive <base commit> | tar -x -C /tmp/before`), alternating
before, after, before, after ... for `--rounds` rounds, so both meet the same machine
load. Each worker run imports transformer_tf from its own tree (bench/common.py puts the
tree first on sys.path). For every run configuration of the worker's report (same keys
except the figures), reports the best `--metric` of each tree, after / before, and
every round's figure (to judge the noise).

    python bench/compare_trees.py --before /tmp/before [--rounds 2] [--metric output_tokens_per_s]
        -- decode_tf --shapes multi30k --beams 1,4 --warmup 1 --repeats 3 --max-seconds 4
"""
from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parents[1]
KEYS = ("shape", "beam", "xla", "batch", "source_len", "output_len")


def run_worker(tree: pathlib.Path, worker: str, args: list) -> dict:
    command = [sys.executable, str(tree / "bench" / "workers" / f"{worker}.py"), *args]
    done = subprocess.run(command, capture_output=True, text=True, cwd=str(tree))
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def by_config(reports: list, metric: str) -> dict:
    """{configuration: [metric of each round]}."""
    found: dict = {}
    for report in reports:
        for run in report.get("runs", [report]):
            key = tuple((k, run[k]) for k in KEYS if k in run)
            if metric in run:
                found.setdefault(key, []).append(run[metric])
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the other source tree")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--metric", default="output_tokens_per_s",
                        help="a figure of the worker's runs; higher is better")
    parser.add_argument("worker", help="a bench/workers script name, e.g. decode_tf")
    parser.add_argument("worker_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    worker_args = [a for a in args.worker_args if a != "--"]
    trees = {"before": pathlib.Path(args.before).resolve(), "after": HERE}
    reports: dict = {"before": [], "after": []}
    for round_index in range(args.rounds):
        for name, tree in trees.items():
            print(f"round {round_index + 1}: {name} ({tree})", file=sys.stderr, flush=True)
            reports[name].append(run_worker(tree, args.worker, worker_args))
    before = by_config(reports["before"], args.metric)
    after = by_config(reports["after"], args.metric)
    rows = [{**dict(key), f"before_{args.metric}": max(before[key]),
             f"after_{args.metric}": max(after[key]),
             "after_over_before": max(after[key]) / max(before[key]),
             "before_rounds": before[key], "after_rounds": after[key]}
            for key in before if key in after]
    print(json.dumps({"worker": args.worker, "args": worker_args, "rounds": args.rounds,
                      "before": str(trees["before"]), "after": str(trees["after"]),
                      "results": rows}, indent=1))


if __name__ == "__main__":
    main()
