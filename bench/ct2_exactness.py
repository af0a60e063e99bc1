#!/usr/bin/env python
"""Exactness of the CTranslate2 export on a trained model: test 2016 translated by our
model and by its CTranslate2 conversion, same beam and alpha; BLEU of both and how many
outputs are identical, for several CT2 length penalties (CT2 divides by length^lp where we
divide by GNMT's ((5 + length) / 6)^alpha; see transformer_tf/export/ctranslate2.py).

    python bench/ct2_exactness.py --model-dir runs/multi30k_en_de/model \
        [--ct2 DIR] [--beam-size 4 --alpha 0.6] [--out runs/bench/ct2_exactness.json]

--ct2 defaults to a fresh conversion in a temporary directory. The test set is Multi30k
test 2016 from $TRANSFORMER_TF_DATA (or --source/--reference files). Writes one JSON object.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# CTranslate2's OpenMP threads otherwise spin while idle (see bench/README.md).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OMP_NUM_THREADS", "2")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def log(message: str) -> None:
    print(f"[ct2_exactness {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def read_lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--ct2", help="converted model directory (default: convert now)")
    parser.add_argument("--source", help="source sentences (default: test 2016 en)")
    parser.add_argument("--reference", help="references (default: test 2016 de)")
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--length-penalties", default="auto,0.6",
                        help="CT2 length_penalty values to try; auto = ct2_length_penalty(alpha)")
    parser.add_argument("--ours", help="our translations, one per line: read if the file "
                                       "exists, else written after decoding")
    parser.add_argument("--out", help="JSON file to write (also printed; must not exist yet)")
    args = parser.parse_args(argv)
    common.refuse_existing_outputs(parser, [args.out])  # --ours is read when it exists

    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    from transformer_tf.evaluation.scoring import sacrebleu_bleu
    from transformer_tf.export import ctranslate2 as ct2_export
    from transformer_tf.inference.batch import load_translator, translate_lines
    from transformer_tf.inference.loading import source_decoding

    sources = read_lines(Path(args.source or common.multi30k_test_2016("en")))
    references = read_lines(Path(args.reference or common.multi30k_test_2016("de")))

    with tempfile.TemporaryDirectory() as tmp:
        ct2_dir = args.ct2 or ct2_export.export_model_dir_ctranslate2(
            args.model_dir, Path(tmp) / "ct2" / "1")
        started = time.perf_counter()
        if args.ours and Path(args.ours).exists():
            ours = read_lines(Path(args.ours))
            log(f"our translations read from {args.ours}")
        else:
            log("translating with our model")
            decoding = source_decoding(model_dir=args.model_dir).with_overrides(
                beam_size=args.beam_size, alpha=args.alpha)
            ours_translator = load_translator(model_dir=args.model_dir, decoding=decoding)
            ours = [row[0] for row in translate_lines(ours_translator, sources, 64, False)[0]]
            if args.ours:
                Path(args.ours).write_text("".join(line + "\n" for line in ours),
                                           encoding="utf-8")
        ours_seconds = time.perf_counter() - started
        runner = ct2_export.CTranslate2Translator(ct2_dir, intra_threads=args.threads)
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        report = {"sentences": len(sources), "beam_size": args.beam_size, "alpha": args.alpha,
                  "ours": {"sacrebleu": sacrebleu_bleu(ours, references).value,
                           "seconds": round(ours_seconds, 1)},
                  "ctranslate2": []}
        for value in args.length_penalties.split(","):
            penalty = (ct2_export.ct2_length_penalty(args.alpha) if value == "auto"
                       else float(value))
            log(f"CTranslate2, length_penalty {penalty:.3f}")
            started = time.perf_counter()
            theirs = [""] * len(sources)
            for start in range(0, len(order), 64):
                chunk = order[start:start + 64]
                for i, text in zip(chunk, runner.translate(
                        [sources[i] for i in chunk], beam_size=args.beam_size,
                        length_penalty=penalty)):
                    theirs[i] = text
            bleu = sacrebleu_bleu(theirs, references).value
            report["ctranslate2"].append({
                "length_penalty": round(penalty, 4), "sacrebleu": bleu,
                "bleu_difference": round(bleu - report["ours"]["sacrebleu"], 3),
                "identical": sum(a == b for a, b in zip(ours, theirs)),
                "seconds": round(time.perf_counter() - started, 1)})
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
