"""Ensemble gain: the test (or dev) BLEU of each training run alone and of the runs decoded
together (`translate --ensemble`: the mean of their log-probabilities at every step), with
sacreBLEU's paired bootstrap of the ensemble against its best member. Writes one
results/ file (results/README.md's fields: what, command, commit, machine, values, rows).

The runs must share one tokenizer: train them on the same prepared data, e.g. two seeds of
the Multi30k preset (about an hour each on a 2-core CPU):

    transformer-tf-prepare --dataset multi30k --src en --tgt de --vocab-size 8000 --out runs/m30k/data
    transformer-tf-train --data runs/m30k/data --preset multi30k --model-dir runs/m30k/seed1 \\
        --max-minutes 60 --seed 1
    transformer-tf-train --data runs/m30k/data --preset multi30k --model-dir runs/m30k/seed2 \\
        --max-minutes 60 --seed 2
    .venv/bin/python bench/ensemble_gain.py runs/m30k/seed1 runs/m30k/seed2 \\
        --out results/ensemble/multi30k-two-seeds.json

Each run is decoded at its default checkpoint (`inference.loading.default_checkpoint`),
with the first run's search settings unless --beam-size / --alpha say otherwise; the
sentences are the split of the first run's prepared data (test: Multi30k test 2016).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import sys
import time

import common  # puts the repository on sys.path


def measure(model_dirs: list[str], split: str, limit: int | None, beam_size: int | None,
            alpha: float | None, batch_size: int) -> dict:
    """Rows (one per run, then the ensemble) of BLEU, chrF and decoding seconds, and the
    paired bootstrap of the ensemble against the member with the highest BLEU."""
    from transformer_tf.data.prepared_reader import load_prepared
    from transformer_tf.evaluation.hypothesis_files import read_lines
    from transformer_tf.evaluation.paired_bootstrap import bleu_paired_bootstrap
    from transformer_tf.evaluation.scoring import evaluate
    from transformer_tf.inference.batch import load_translator, translate_lines
    from transformer_tf.inference.loading import (
        check_ensemble_runs,
        default_checkpoint,
        source_decoding,
    )
    from transformer_tf.rundir.model_dir import read_run_config

    check_ensemble_runs(model_dirs)  # in seconds, not after decoding the members
    first = read_run_config(model_dirs[0])
    prepared = load_prepared(first.data_dir)
    files = prepared.files(split)
    sources, references = read_lines(files.source), read_lines(files.target)
    if limit:
        sources, references = sources[:limit], references[:limit]
    systems = [(str(d), {"model_dir": str(d)}) for d in model_dirs]
    systems.append(("ensemble", {"ensemble": [str(d) for d in model_dirs]}))
    rows, hypotheses = [], {}
    for name, source in systems:
        started = time.perf_counter()
        decoding = source_decoding(**source).with_overrides(beam_size=beam_size, alpha=alpha)
        translator = load_translator(**source, decoding=decoding)
        outputs, _ = translate_lines(translator, sources, batch_size, progress=True)
        seconds = time.perf_counter() - started
        hypotheses[name] = [row[0] for row in outputs]
        scores = evaluate(hypotheses[name], references, lang=prepared.target_language).to_dict()
        rows.append({"system": name,
                     "checkpoint": ("each run's default" if name == "ensemble"
                                    else default_checkpoint(name)[0]),
                     "bleu": round(scores["bleu"], 2), "chrf": round(scores["chrf"], 2),
                     "seconds": round(seconds, 1)})
        print(f"{name}: BLEU {scores['bleu']:.2f}, chrF {scores['chrf']:.2f} "
              f"({seconds:.0f} s)", file=sys.stderr)
    best = max(rows[:-1], key=lambda row: row["bleu"])
    bootstrap = bleu_paired_bootstrap(hypotheses["ensemble"], hypotheses[best["system"]],
                                      references)
    return {"rows": rows, "best_member": best, "bootstrap": bootstrap,
            "sentences": len(sources), "beam_size": decoding.beam_size,
            "alpha": decoding.alpha, "pair": f"{prepared.source_language}-"
                                             f"{prepared.target_language}"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dirs", nargs="+", metavar="MDIR",
                        help="training run directories (at least two), sharing a tokenizer")
    parser.add_argument("--split", choices=("test", "valid"), default="test",
                        help="split of the first run's prepared data (default test)")
    parser.add_argument("--limit", type=int, help="only the first N sentences")
    parser.add_argument("--beam-size", type=int, help="default: the first run's")
    parser.add_argument("--alpha", type=float, help="default: the first run's")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per batch")
    parser.add_argument("--out", required=True, type=pathlib.Path,
                        help="the results file to write, results/ensemble/NAME.json")
    args = parser.parse_args(argv)
    if len(args.model_dirs) < 2:
        parser.error("give at least two run directories")
    common.refuse_existing_outputs(parser, [args.out])

    from transformer_tf.runtime.provenance import current_commit, machine_description

    load_start = os.getloadavg()[0]
    measured = measure(args.model_dirs, args.split, args.limit, args.beam_size, args.alpha,
                       args.batch_size)
    rows, best, bootstrap = measured["rows"], measured["best_member"], measured["bootstrap"]
    ensemble = rows[-1]
    split_name = "test 2016" if args.split == "test" else "dev"
    result = {
        "what": f"{len(args.model_dirs)} runs decoded together (mean log-probabilities) "
                f"against each alone: {measured['pair']}, {split_name} "
                f"({measured['sentences']:,} sentences), beam {measured['beam_size']}, "
                f"alpha {measured['alpha']}",
        "title": f"Ensemble of {len(args.model_dirs)} runs, {measured['pair']} {split_name}",
        "command": "python bench/ensemble_gain.py " + " ".join(
            argv if argv is not None else sys.argv[1:]),
        "commit": current_commit(),
        "commit_role": "measured",
        "machine": machine_description(),
        "date": datetime.date.today().isoformat(),
        "source": "written by bench/ensemble_gain.py",
        "conditions": f"load average {load_start:.1f} at the start, "
                      f"{os.getloadavg()[0]:.1f} at the end",
        "headline": "{ensemble_bleu:.2f} BLEU ensembled against {best_member_bleu:.2f} for "
                    "the best run alone ({gain:+.2f})",
        "values": {"ensemble_bleu": ensemble["bleu"], "best_member_bleu": best["bleu"],
                   "gain": round(ensemble["bleu"] - best["bleu"], 2),
                   "ensemble_better_in_bootstrap": round(bootstrap.a_better, 3),
                   "bootstrap_samples": bootstrap.samples,
                   "sentences": measured["sentences"]},
        "units": {"ensemble_bleu": "sacreBLEU", "best_member_bleu": "sacreBLEU",
                  "gain": "BLEU", "ensemble_better_in_bootstrap": "fraction of samples"},
        "columns": [{"key": "system", "label": "system"},
                    {"key": "checkpoint", "label": "checkpoint"},
                    {"key": "bleu", "label": "sacreBLEU", "format": "{:.2f}"},
                    {"key": "chrf", "label": "chrF", "format": "{:.2f}"},
                    {"key": "seconds", "label": "decode s", "format": "{:.0f}"}],
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(bootstrap.format_text("ensemble", best["system"]))
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
