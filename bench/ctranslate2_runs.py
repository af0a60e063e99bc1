#!/usr/bin/env python
"""Ours against CTranslate2 over repeated serving runs on one kind of CPU: for greedy and
beam 4 at each batch size, the median and the range over the runs of our SavedModel's
sentences/s over CTranslate2 float32's on the same checkpoint (each ratio paired within
one run), as one search against one translator and with each engine at its best layout,
written as a results file for docs/performance.md.

One run is noisy: on a shared 2-core machine the same ratio moves by a tenth or two from
run to run. Run the serving section several times on a quiet machine, then summarise:

    python bench/run_all.py --only matmul,serving --json --model-dir runs/multi30k_en_de/model \\
        --serving-sentences 400 --out results/raw/bench-serving-avx2-RUN1.json
    ... (again, --out results/raw/bench-serving-avx2-RUN2.json, ...)
    python bench/ctranslate2_runs.py results/raw/bench-serving-avx2-RUN*.json \\
        --out results/serving/avx2-vs-ctranslate2-repeated-runs.json

The runs must be of one kind of CPU and one machine; the machine, command and commit come
from the runs (bench/serving_runs.py, shared with bench/fast_path_runs.py).
"""
from __future__ import annotations

import collections
import pathlib
import statistics
import sys

BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import serving_runs  # noqa: E402
from comparison import OUR_VARIANTS, largest  # noqa: E402
from serving_runs import RunsError  # noqa: E402,F401  (the tool's own errors)

SEARCHES = (("greedy", "greedy"), ("beam4", "beam 4"))
BATCHES = (1, 8, 64)
# Our layouts as `comparison.compare`'s ratio_best takes the best of them: "ours" and
# "ours_<variant>" (the entries of a serving run hold all but "ours_xla").
OUR_LAYOUTS = ("ours", *(f"ours_{variant}" for variant in OUR_VARIANTS))
LAYOUT_NAMES = {"ours": "one search", "ours_xla": "XLA", "ours_unchunked": "unchunked",
                "ours_chunked_xla": "chunked XLA", "ours_lanes": "lanes"}
RATIOS = ("ratio", "ratio_best", "ratio_same_rule")


def _entry(run: dict, search: str, batch: int) -> dict | None:
    """The run's float32 serving entry for this search and batch, if it measured both
    engines."""
    entry = (run.get("benchmarks") or {}).get(f"serving_multi30k_{search}_batch{batch}")
    if not entry or entry.get("ratio") is None:
        return None
    return entry


def _best_layout(entry: dict) -> tuple[str, float]:
    """(the name of our fastest layout in `entry`, its sentences/s)."""
    key = max((k for k in OUR_LAYOUTS if entry.get(k) is not None), key=entry.get)
    name = LAYOUT_NAMES[key]
    return (f"{entry['lanes']} lanes" if name == "lanes" else name), entry[key]


def summarise(runs: dict[str, dict]) -> dict:
    """{"kind", "rows", "values"} over `runs` ({file name: run JSON}): one row per search
    and batch size with each ratio as "median (lowest-highest)", the median sentences/s of
    each engine at its best, and our layout that was best in most runs; the values
    `<search>_batch<N>_<ratio>_{median,min,max}` for RATIOS. A run that did not measure a
    cell (an engine failed) is left out of it; a row no run measured is left out."""
    kind = serving_runs.cpu_kind(runs)
    rows, values = [], {}
    for search, label in SEARCHES:
        for batch in BATCHES:
            entries = [e for e in (_entry(run, search, batch) for run in runs.values()) if e]
            if not entries:
                continue
            row = {"search": label, "batch": batch}
            for ratio in RATIOS:
                found = [e[ratio] for e in entries if e.get(ratio) is not None]
                if not found:
                    row[ratio] = ""
                    continue
                figures, row[ratio] = serving_runs.median_and_range(found)
                values.update({f"{search}_batch{batch}_{ratio}_{name}": value
                               for name, value in figures.items()})
            best = [_best_layout(e) for e in entries]
            row["ours_best"] = round(statistics.median(speed for _, speed in best), 1)
            row["peer_best"] = round(statistics.median(
                largest(e, "peer", "peer_lanes") for e in entries), 1)
            layout, times = collections.Counter(name for name, _ in best).most_common(1)[0]
            row["our_best_layout"] = f"{layout} ({times} of {len(entries)})"
            rows.append(row)
    return {"kind": kind, "rows": rows, "values": values}


def results_document(runs: dict[str, dict], commit: str | None = None,
                     machine: str | None = None, command: str | None = None,
                     conditions: str | None = None) -> dict:
    """The results file (results/README.md's fields) of ours against CTranslate2 over
    `runs`."""
    summary = summarise(runs)
    kind, count = summary["kind"], len(runs)
    headline = ("beam 4, batches of 64: ours {beam4_batch64_ratio_best_median}x "
                "CTranslate2 float32, each engine at its best layout "
                f"(median of {count} runs)")
    if "beam4_batch64_ratio_best_median" not in summary["values"]:
        headline = f"{count} runs of the serving section"
    return {
        "what": f"serving a trained Multi30k model on an {kind} CPU, text in and text out, "
                f"{serving_runs.served_sentences(runs)}: our SavedModel's sentences/s over "
                f"CTranslate2 float32's on the converted checkpoint, paired within each of "
                f"{count} runs of the serving section; median of the runs (lowest-highest). "
                f"One search / one translator: both with 2 threads; best / best: our best "
                f"exact-rule layout (one search, unchunked, chunked XLA or 2 lanes) over the "
                f"better of one translator and 2; same rule: our k_finished stopping "
                f"against CTranslate2's; sentences/s: the median of each engine's best",
        "title": f"Serving against CTranslate2 on {kind}, {count} runs",
        **serving_runs.provenance(runs, "bench/ctranslate2_runs.py", commit, machine,
                                  command, conditions),
        "headline": headline,
        "values": summary["values"],
        "units": {},
        "columns": [{"key": "search", "label": "search"},
                    {"key": "batch", "label": "batch"},
                    {"key": "ratio", "label": "one search / one translator"},
                    {"key": "ratio_best", "label": "best / best"},
                    {"key": "ratio_same_rule", "label": "same stopping rule"},
                    {"key": "ours_best", "label": "ours, best (sent/s)"},
                    {"key": "peer_best", "label": "CTranslate2, best (sent/s)"},
                    {"key": "our_best_layout", "label": "our best layout"}],
        "rows": summary["rows"],
    }


def main(argv=None) -> int:
    return serving_runs.command_line(argv, __doc__, results_document)


if __name__ == "__main__":
    sys.exit(main())
