"""Serving-path variants on real sentences, in one process: how the search is organised
changes the batch-64 throughput of the graph that `serving_default` runs.

    .venv/bin/python bench/serving_variants.py --model-dir MDIR [--sentences 512]
        [--batch-size 64]
        [--variants fixed_cache,growing,chunk8,chunk16,chunk32,chunk16_xla,chunk16_k_finished]

Times `Translator.translate` (text in, text out: tokenisation, search, detokenisation) on
the first --sentences Multi30k test 2016 sentences in file order, in batches of
--batch-size, beam 4, alpha 0.6, max_extra_length 50, after one untimed pass (which also
compiles every XLA shape); best of two timed passes. Variants:

  fixed_cache   the whole batch at once, decoder caches of max output length (before)
  growing       the whole batch at once, caches that grow by one position per step (and,
                as every graph-mode search since the compacting beam search, sentences
                leave the batch when they are done)
  chunkN        growing caches, the batch sorted by source length, N rows at a time
  chunk16_xla   chunks of 16 compiled by XLA (fixed caches of bucket + 50 positions)
  chunk16_k_finished  chunk16 with the "k_finished" stopping rule (a sentence stops once
                beam_size hypotheses have finished, as CTranslate2 does) instead of "exact"

Prints one JSON object (sentences/s per variant and the machine's load).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.set_thread_env()

VARIANTS = ("fixed_cache", "growing", "chunk8", "chunk16", "chunk32", "chunk16_xla",
            "chunk16_k_finished")


def _fixed_cache_search(model, source_ids, decoding, n_best=1, forbidden_ids=()):
    """search_model as it was: decoder caches sized for the longest output allowed."""
    import tensorflow as tf

    from transformer_tf.config import BOS_ID, PAD_ID
    from transformer_tf.decoding.model_driver import search_with_lengths, source_lengths

    source_ids = tf.cast(source_ids, tf.int32)
    max_lengths = tf.minimum(source_lengths(source_ids) + decoding.max_extra_length,
                             model.max_target_length)
    return search_with_lengths(
        model, source_ids, beam_size=decoding.beam_size, alpha=decoding.alpha, n_best=n_best,
        max_lengths=max_lengths, cache_length=tf.maximum(tf.reduce_max(max_lengths), 1),
        forbidden_ids=sorted({PAD_ID, BOS_ID, *forbidden_ids}))


def _translator(variant, model, tokenizer):
    from transformer_tf.config import DecodingConfig
    from transformer_tf.inference import translator as translator_lib

    base = dict(beam_size=4, alpha=0.6, max_extra_length=50)
    if variant in ("fixed_cache", "growing"):
        decoding = DecodingConfig(**base, chunk_size=0)
    elif variant == "chunk16_xla":
        decoding = DecodingConfig(**base, chunk_size=16, xla=True)
    elif variant == "chunk16_k_finished":
        decoding = DecodingConfig(**base, chunk_size=16, stopping="k_finished")
    else:
        decoding = DecodingConfig(**base, chunk_size=int(variant[len("chunk"):]))
    translator = translator_lib.Translator(model, tokenizer, decoding)
    if variant == "fixed_cache":
        translator._search = lambda ids, n_best: _fixed_cache_search(
            model, ids, decoding, n_best, translator.forbidden_ids)
    return translator


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args(argv)
    import tensorflow as tf

    from transformer_tf.inference.loading import load_trained

    tf.config.threading.set_intra_op_parallelism_threads(common.THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    lines = common.first_lines(common.multi30k_test_2016("en"), args.sentences)
    model, tokenizer, _, checkpoint = load_trained(args.model_dir)
    batches = [tf.constant(lines[i:i + args.batch_size])
               for i in range(0, len(lines), args.batch_size)]
    report = {"benchmark": "serving_variants", "model_dir": args.model_dir,
              "checkpoint": str(checkpoint), "sentences": len(lines),
              "batch_size": args.batch_size, "load_average_start": common.load_average(),
              "sentences_per_s": {}}
    for variant in common.csv_list(args.variants, str):
        translator = _translator(variant, model, tokenizer)
        for batch in batches:  # untimed: traces, and compiles every XLA shape
            translator.translate(batch)
        best = common.best_translate_seconds(translator, batches, passes=2)
        report["sentences_per_s"][variant] = round(len(lines) / best, 2)
    report["load_average_end"] = common.load_average()
    common.emit(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
