"""Alignment error rate of `translate --alignments` on a hand-aligned sample: a sanity
figure (does the attention point at the right words at all?), not a claim of quality.

The sample is results/raw/multi30k-test2016-hand-aligned.json: 20 Multi30k test 2016
en-de pairs aligned by hand (sure and possible links on space-separated words). Each
pair's German reference is teacher-forced through the model (`inference.alignment`), and
the links are scored with AER (`evaluation.alignment_error`) for every layer of the
encoder-decoder attention, beside a diagonal baseline (target word j linked to source
word round(j * (S - 1) / (T - 1))). Prints one JSON object.

    .venv/bin/python bench/alignment_error_rate.py --model-dir runs/multi30k_en_de/model
    .venv/bin/python bench/alignment_error_rate.py --model saved_models/en_de/1
"""
from __future__ import annotations

import argparse
import json
import pathlib

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
    args = parser.parse_args(argv)

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
    print(json.dumps({
        "what": f"AER of translate --alignments on {len(pairs)} hand-aligned Multi30k "
                "test 2016 en-de pairs (references teacher-forced), per attention layer",
        "model": args.model or args.model_dir,
        "aer_by_layer": by_layer,
        "default_layer": default_alignment_layer(num_layers),
        "aer_diagonal_baseline": round(alignment_error_rate(baseline, sure, possible), 4),
    }, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
