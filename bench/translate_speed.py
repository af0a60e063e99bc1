"""Text-to-text speed of `Translator.translate` on real sentences, for paired comparisons of
two checkouts (each run uses the transformer_tf of the checkout this file is in).

    python bench/translate_speed.py --model-dir MDIR [--beam 4] [--batch 64]
        [--sentences 256] [--threads 1]

Loads the trained run, translates the first --sentences Multi30k test 2016 sentences in
file order, --batch at a time, with the run's search defaults and --beam (alpha 0.6,
max_extra_length 50), once untimed (tracing), then four timed passes; prints one JSON
object: sentences/s of the best pass, and a digest of the translations so that two
checkouts can be shown to give the same outputs. Compare checkouts in alternating runs
on one pinned core (`taskset -c 0`), A B A B:

    for r in 1 2; do for tree in /work/main /work/wt/change; do
        taskset -c 0 python $tree/bench/translate_speed.py --model-dir MDIR --beam 1; done; done
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    common.set_thread_env(args.threads)
    import tensorflow as tf

    from transformer_tf.inference.loading import load_trained, source_decoding
    from transformer_tf.inference.translator import Translator

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    lines = common.first_lines(common.multi30k_test_2016("en"), args.sentences)
    decoding = source_decoding(model_dir=args.model_dir).replace(
        beam_size=args.beam, alpha=0.6, max_extra_length=50)
    model, tokenizer, run, checkpoint = load_trained(args.model_dir, decoding=decoding)
    translator = Translator(model, tokenizer, run.decoding)
    batches = [tf.constant(lines[i:i + args.batch]) for i in range(0, len(lines), args.batch)]
    outputs = [translator.translate(batch)["translation"].numpy() for batch in batches]
    best = common.best_translate_seconds(translator, batches, passes=4)
    digest = hashlib.sha256(b"\n".join(t for out in outputs for t in out)).hexdigest()[:12]
    common.emit({"benchmark": "translate_speed", "checkout": str(common.ROOT),
                 "checkpoint": str(checkpoint), "beam": args.beam, "batch": args.batch,
                 "threads": args.threads, "chunk_size": run.decoding.chunk_size,
                 "sentences": len(lines), "sentences_per_s": round(len(lines) / best, 2),
                 "translations_sha256": digest, "load_average": common.load_average()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
