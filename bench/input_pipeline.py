#!/usr/bin/env python
"""Input-pipeline benchmark: throughput and padding efficiency on Multi30k.

Measures the training pipeline of `transformer_tf.data.datasets.make_training_dataset`
(read text -> shuffle -> tokenize in the graph -> filter -> bucket by length -> pad ->
prefetch) over whole epochs of Multi30k train:

- sentence pairs / s, real tokens / s (non-pad positions of source_ids + labels), and
  batches / s, measured over steady-state epochs (the first epoch, which includes the
  shuffle-buffer fill and function instantiation, is reported apart);
- padding efficiency = real tokens / padded positions (both sides together, and per side);
- budget use = padded positions per batch / tokens_per_batch (per side).

`run(...)` returns a dict (for bench/run_all.py); as a script it prints that dict as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from transformer_tf.config import PAD_ID  # noqa: E402
from transformer_tf.data import bpe, multi30k, prepared_writer  # noqa: E402
from transformer_tf.data.bucketing import BucketSpec  # noqa: E402
from transformer_tf.data.datasets import make_training_dataset  # noqa: E402
from transformer_tf.data.prepared_reader import load_prepared  # noqa: E402


def _epoch_stats(dataset) -> dict:
    """One pass computing per-batch shapes and real-token counts (in the graph)."""
    def stats(batch):
        return {
            "batch": tf.shape(batch["source"])[0],
            "length": tf.shape(batch["source"])[1],
            "real_source": tf.math.count_nonzero(batch["source"] != PAD_ID, dtype=tf.int64),
            "real_target": tf.math.count_nonzero(batch["labels"] != PAD_ID, dtype=tf.int64),
        }

    rows = list(dataset.map(stats).as_numpy_iterator())
    return {key: np.array([row[key] for row in rows], np.int64) for key in rows[0]}


def _time_epochs(dataset, epochs: int) -> tuple[float, list[float], list[float]]:
    """Wall seconds of the first (warm-up) epoch, then wall and CPU seconds (this
    process, all threads) of each following epoch."""
    wall, cpu = [], []
    for _ in range(epochs + 1):
        start, start_cpu = time.perf_counter(), time.process_time()
        for _ in dataset:
            pass
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return wall[0], wall[1:], cpu[1:]


def run(
    data_dir=None,
    prepared_dir=None,
    source_language: str = "en",
    target_language: str = "de",
    vocab_size: int = 8000,
    tokens_per_batch: int = 4096,
    max_length: int = 128,
    epochs: int = 2,
    quick: bool = False,
    seed: int = 0,
    bucket_growth: float = 1.1,
) -> dict:
    """Benchmarks the training input pipeline on Multi30k train.

    Args:
      data_dir: where Multi30k is (default $TRANSFORMER_TF_DATA); ignored with prepared_dir.
      prepared_dir: an existing prepared directory to use instead of preparing one.
      vocab_size: BPE vocabulary when preparing (its training time is reported).
      tokens_per_batch: global budget per side (padding counted).
      max_length: longest side kept (tokens, specials included).
      epochs: timed steady-state epochs (after one warm-up epoch); quick mode uses 1.
      bucket_growth: ratio between consecutive bucket boundaries.

    Returns:
      A flat dict of settings and measurements (JSON-serialisable).
    """
    epochs = 1 if quick else epochs
    result = {"benchmark": "input_pipeline", "dataset": "multi30k",
              "pair": f"{source_language}-{target_language}", "tokens_per_batch": tokens_per_batch,
              "max_length": max_length, "bucket_growth": bucket_growth,
              "cpu_count": os.cpu_count(), "load_average_1min": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as scratch:
        if prepared_dir is None:
            corpus = multi30k.multi30k_corpus(source_language, target_language, data_dir=data_dir)
            start = time.perf_counter()
            prepared = prepared_writer.prepare_corpus(corpus, Path(scratch) / "prepared",
                                                      bpe.BpeOptions(vocab_size=vocab_size),
                                                      max_length=max_length)
            result["prepare_seconds"] = round(time.perf_counter() - start, 3)
        else:
            prepared = load_prepared(prepared_dir)
        result["vocab_size"] = prepared.vocab_size
        result["train_pairs"] = prepared.num_examples("train")

        def dataset(return_dict):
            return make_training_dataset(
                prepared, "train", tokens_per_batch=tokens_per_batch, max_length=max_length,
                seed=seed, bucket_growth=bucket_growth, return_dict=return_dict)

        stats = _epoch_stats(dataset(True))
        warmup, times, cpu_times = _time_epochs(dataset(False), epochs)

    pairs = int(stats["batch"].sum())
    real_source, real_target = int(stats["real_source"].sum()), int(stats["real_target"].sum())
    padded = int((stats["batch"] * stats["length"]).sum())  # per side
    seconds = float(np.mean(times))
    cpu_seconds = float(np.mean(cpu_times))
    spec = BucketSpec.create(tokens_per_batch, max_length, growth=bucket_growth)
    result.update({
        "pairs_per_epoch": pairs,
        "batches_per_epoch": int(len(stats["batch"])),
        "distinct_batch_shapes": int(len(set(zip(stats["batch"], stats["length"])))),
        "buckets": len(spec.boundaries),
        "mean_batch_size": round(pairs / len(stats["batch"]), 2),
        "padding_efficiency": round((real_source + real_target) / (2 * padded), 4),
        "padding_efficiency_source": round(real_source / padded, 4),
        "padding_efficiency_target": round(real_target / padded, 4),
        "budget_use": round(padded / (len(stats["batch"]) * tokens_per_batch), 4),
        "max_padded_positions_per_batch": int((stats["batch"] * stats["length"]).max()),
        "warmup_epoch_seconds": round(warmup, 3),
        "epoch_seconds": round(seconds, 3),
        "pairs_per_second": round(pairs / seconds, 1),
        "tokens_per_second": round((real_source + real_target) / seconds, 1),
        "batches_per_second": round(len(stats["batch"]) / seconds, 2),
        # Load-independent: CPU time the pipeline burns (2 cores can give 2 s per second).
        "epoch_cpu_seconds": round(cpu_seconds, 3),
        "pairs_per_cpu_second": round(pairs / cpu_seconds, 1),
        "batches_per_cpu_second": round(len(stats["batch"]) / cpu_seconds, 2),
    })
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=None,
                        help="directory holding multi30k/ (default: $TRANSFORMER_TF_DATA)")
    parser.add_argument("--prepared", default=None,
                        help="use this prepared directory instead of preparing Multi30k")
    parser.add_argument("--src", default="en", help="source language (default: en)")
    parser.add_argument("--tgt", default="de", help="target language (default: de)")
    parser.add_argument("--vocab-size", type=int, default=8000,
                        help="BPE vocabulary size when preparing (default: 8000)")
    parser.add_argument("--tokens-per-batch", type=int, default=4096,
                        help="global token budget per side, padding counted (default: 4096)")
    parser.add_argument("--max-length", type=int, default=128,
                        help="longest side kept, in tokens (default: 128)")
    parser.add_argument("--epochs", type=int, default=2,
                        help="timed epochs after one warm-up epoch (default: 2)")
    parser.add_argument("--bucket-growth", type=float, default=1.1,
                        help="ratio between consecutive bucket boundaries (default: 1.1)")
    parser.add_argument("--quick", action="store_true", help="one timed epoch")
    args = parser.parse_args(argv)
    result = run(args.data_dir, args.prepared, args.src, args.tgt, args.vocab_size,
                 args.tokens_per_batch, args.max_length, args.epochs, args.quick,
                 bucket_growth=args.bucket_growth)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
