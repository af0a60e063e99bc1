#!/usr/bin/env python
"""The inference fast paths over repeated serving runs on one kind of CPU: for each path
(chunking, lanes, XLA, kernel padding, oneDNN's matrix products over Eigen's) and batch
size, the median and the range over the runs of its sentences/s with the path on over
off (`fast_paths` in bench/run_all.py's JSON, each ratio paired within one run), written
as a results file for the docs' table of fast paths by kind of CPU (docs/performance.md).

One run is noisy: a ratio of 0.9 or 1.1 may be the machine, not the path. Run the
serving section several times on a quiet machine, then summarise:

    python bench/run_all.py --only matmul,serving --json --model-dir runs/multi30k_en_de/model \\
        --serving-sentences 400 --out results/raw/bench-serving-avx2-RUN1.json
    ... (again, --out results/raw/bench-serving-avx2-RUN2.json, ...)
    python bench/fast_path_runs.py results/raw/bench-serving-avx2-RUN*.json \\
        --out results/serving/avx2-fast-paths-repeated-runs.json

The runs must be of one kind of CPU and one export default per path; the machine, command
and commit come from the runs (bench/serving_runs.py, shared with bench/ctranslate2_runs.py).
"""
from __future__ import annotations

import pathlib
import sys

BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import serving_runs  # noqa: E402
from serving_runs import RunsError  # noqa: E402,F401  (the tool's own errors)

PATHS = ("chunking", "lanes", "xla", "kernel_padding", "onednn", "onednn_lanes")
BATCHES = (1, 8, 64)
PRODUCTS = {"eigen": "Eigen", "onednn": "oneDNN"}


def summarise(runs: dict[str, dict]) -> dict:
    """{"kind", "libraries", "rows", "values"} over `runs` ({file name: run JSON}): per path
    a row of "median (lowest-highest)" per batch size, and the values
    `<path>_batch<N>_{median,min,max}`. A path a run did not measure (its ratio None) is
    left out of that cell's figures; a cell no run measured is empty."""
    kind = serving_runs.cpu_kind(runs)
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
            ratios = [entry["on_over_off"].get(key) for entry in measured.values()
                      if entry["on_over_off"].get(key) is not None]
            if not ratios:
                row[key] = ""
                continue
            figures, row[key] = serving_runs.median_and_range(ratios)
            values.update({f"{path}_{key}_{name}": value for name, value in figures.items()})
        rows.append(row)
    return {"kind": kind, "libraries": sorted(filter(None, libraries)) or ["unknown"],
            "rows": rows, "values": values}


def results_document(runs: dict[str, dict], commit: str | None = None,
                     machine: str | None = None, command: str | None = None,
                     conditions: str | None = None) -> dict:
    """The results file (results/README.md's fields) of the fast paths over `runs`."""
    summary = summarise(runs)
    kind, count = summary["kind"], len(runs)
    library = " and ".join(PRODUCTS.get(name, name) for name in summary["libraries"])
    batch64 = {path: summary["values"].get(f"{path}_batch64_median") for path in PATHS}
    return {
        "what": f"inference fast paths on an {kind} CPU ({library} products): sentences/s "
                f"with each path on over off, beam 4, serving "
                f"{serving_runs.served_sentences(runs)} through the "
                f"SavedModel, paired within each of {count} runs of the serving section; "
                f"median of the {count} runs (lowest-highest)",
        "title": f"Fast paths on {kind}, {count} runs",
        **serving_runs.provenance(runs, "bench/fast_path_runs.py", commit, machine, command,
                                  conditions),
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
    return serving_runs.command_line(argv, __doc__, results_document)


if __name__ == "__main__":
    sys.exit(main())
