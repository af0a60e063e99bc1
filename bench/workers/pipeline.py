"""Worker: the input pipeline (bench/input_pipeline.py, by the data work) in its own process.

    python bench/workers/pipeline.py [--quick] [--prepared DIR]

Calls `input_pipeline.run(...)` with 2 TF threads (intra-op 2, inter-op 1, like the other
workers) on Multi30k en-de from $TRANSFORMER_TF_DATA (default ../shared/data), at the
multi30k preset's batching (4096 tokens per side, max length 128, BPE 8000), and adds
the padded target positions per second it delivers, which run_all.py compares with
the target positions per second the multi30k training step consumes.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
from transformer_tf.presets import get_preset

common.set_thread_env()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--prepared", default=None)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args(argv)
    os.environ.setdefault("TRANSFORMER_TF_DATA", str(common.ROOT.parent / "shared" / "data"))
    load_start = common.load_average()
    # TF is imported after the load sample, and the library (input_pipeline) only once TF's
    # thread pools are configured: they are fixed when TF's runtime starts.
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(common.THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import input_pipeline

    preset = get_preset("multi30k")
    result = input_pipeline.run(
        prepared_dir=args.prepared, vocab_size=preset.model.vocab_size,
        tokens_per_batch=preset.training.tokens_per_batch,
        max_length=preset.training.max_length, epochs=args.epochs, quick=args.quick)
    result["load_average_start"] = load_start
    # Padded positions per side per second: what the training step has to chew through.
    result["padded_target_positions_per_s"] = (
        result["batches_per_second"] * result["budget_use"] * result["tokens_per_batch"])
    common.emit(result)


if __name__ == "__main__":
    main()
