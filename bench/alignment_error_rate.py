"""Alignment error rate of `translate --alignments` on a hand-aligned sample: a sanity
figure (does the attention point at the right words at all?), not a claim of quality.

The sample is results/raw/multi30k-test2016-hand-aligned.json: 20 Multi30k test 2016
en-de pairs aligned by hand (sure and possible links on space-separated words). Each
pair's German reference is teacher-forced through the model (`inference.alignment`), and
the links are scored with AER (`evaluation.alignment_error`) for every layer of the
encoder-decoder attention, beside a diagonal baseline (target word j linked to source
word round(j * (S - 1) / (T - 1))). Prints one JSON object; with --out, also writes it as a
results/ file (results/README.md's fields), for the docs to quote.

    .venv/bin/python bench/alignment_error_rate.py --model-dir runs/multi30k_en_de/model
    .venv/bin/python bench/alignment_error_rate.py --model saved_models/en_de/1
    .venv/bin/python bench/alignment_error_rate.py --model-dir RUN --out results/alignment/NAME.json
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import sys

import common  # puts the repository on sys.path

SAMPLE = common.ROOT / "results" / "raw" / "multi30k-test2016-hand-aligned.json"


def diagonal(source_words: int, target_words: int) -> set:
    if target_words == 1:
        return {(0, 0)}
    return {(round(j * (source_words - 1) / (target_words - 1)), j)
            for j in range(target_words)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="SavedModel directory written by transformer_tf")
    source.add_argument("--model-dir", help="training run directory")
    parser.add_argument("--checkpoint", help="with --model-dir: checkpoint prefix")
    parser.add_argument("--sample", default=str(SAMPLE), help="hand-aligned sample (JSON)")
    parser.add_argument("--out", type=pathlib.Path,
                        help="also write a results file, results/alignment/NAME.json")
    args = parser.parse_args(argv)
    common.refuse_existing_outputs(parser, [args.out])

    from transformer_tf.evaluation.alignment_error import alignment_error_rate, parse_pharaoh
    from transformer_tf.inference.alignment import default_alignment_layer, load_aligner

    pairs = json.loads(pathlib.Path(args.sample).read_text(encoding="utf-8"))["pairs"]
    sources, targets = [p["source"] for p in pairs], [p["target"] for p in pairs]
    sure = [parse_pharaoh(p["sure"]) for p in pairs]
    possible = [parse_pharaoh(p["possible"]) for p in pairs]
    aligner = load_aligner(args.model, args.model_dir, args.checkpoint)
    num_layers = aligner.num_layers
    by_layer = {}
    for layer in range(1, num_layers + 1):
        aligner.layer = layer
        links = [set(a.links) for a in aligner.align(sources, targets)]
        by_layer[layer] = round(alignment_error_rate(links, sure, possible), 4)
    baseline = [diagonal(len(s.split()), len(t.split())) for s, t in zip(sources, targets)]
    measured = {
        "what": f"AER of translate --alignments on {len(pairs)} hand-aligned Multi30k "
                "test 2016 en-de pairs (references teacher-forced), per attention layer",
        "model": describe_model(args.model, args.model_dir, args.checkpoint, num_layers),
        "aer_by_layer": by_layer,
        "default_layer": default_alignment_layer(num_layers),
        "aer_diagonal_baseline": round(alignment_error_rate(baseline, sure, possible), 4),
    }
    print(json.dumps(measured, indent=2))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results_file(measured, argv), indent=1) + "\n")
    return 0


def describe_model(model, model_dir, checkpoint, num_layers: int) -> str:
    """What was measured: the SavedModel, or the run with its preset and checkpoint."""
    if model:
        return f"SavedModel {model}, {num_layers} layers"
    from transformer_tf.inference.loading import default_checkpoint
    from transformer_tf.rundir import checkpoints
    from transformer_tf.rundir.model_dir import read_run_config

    checkpoint = checkpoint or default_checkpoint(model_dir)[0]
    preset = read_run_config(model_dir).preset
    steps = checkpoints.checkpoint_step(checkpoints.newest_readable(model_dir))
    return (f"run {model_dir} (preset {preset}, {num_layers} layers, {steps:,} steps), "
            f"checkpoint {checkpoint}")


def results_file(measured: dict, argv) -> dict:
    """`measured` as a results/ file: the default layer's AER against the diagonal
    baseline as the headline, one row per layer."""
    from transformer_tf.runtime.provenance import current_commit, machine_description

    default = measured["default_layer"]
    return {
        "what": measured["what"] + f"; model {measured['model']}",
        "title": "Alignment error rate, hand-aligned sample",
        "command": "python bench/alignment_error_rate.py " + " ".join(
            argv if argv is not None else sys.argv[1:]),
        "commit": current_commit(), "commit_role": "measured",
        "machine": machine_description(), "date": datetime.date.today().isoformat(),
        "source": "written by bench/alignment_error_rate.py",
        "headline": "AER {aer_default_layer:.3f} at layer {default_layer} against "
                    "{aer_diagonal_baseline:.3f} for the diagonal",
        "values": {"aer_default_layer": measured["aer_by_layer"][default],
                   "default_layer": default,
                   "aer_best_layer": min(measured["aer_by_layer"].values()),
                   "aer_diagonal_baseline": measured["aer_diagonal_baseline"]},
        "units": {"aer_default_layer": "AER (0 best)", "aer_best_layer": "AER (0 best)",
                  "aer_diagonal_baseline": "AER (0 best)"},
        "columns": [{"key": "layer", "label": "layer"},
                    {"key": "aer", "label": "AER", "format": "{:.3f}"}],
        "rows": [{"layer": f"{layer} (default)" if layer == default else layer, "aer": aer}
                 for layer, aer in sorted(measured["aer_by_layer"].items())]
                + [{"layer": "diagonal baseline", "aer": measured["aer_diagonal_baseline"]}],
    }


if __name__ == "__main__":
    raise SystemExit(main())
