"""Worker: our training step (transformer_tf, Keras `train_on_batch`), one shape, XLA on or off.

    python bench/workers/train_tf.py --shape base [--xla] [--batch 32 --source-len 32
        --target-len 32 --warmup 1 --repeats 3 --precision float32]

The model and optimizer come from `transformer_tf.training.fit.build_model_and_optimizer`
(the paper's Adam and schedule, the built-in label-smoothed loss over real target tokens,
dropout 0.1 as in training). A batch is `batch` random sentence pairs of `source_len`
source and `target_len` target tokens (no padding). Prints one JSON object: step times,
target tokens/s, achieved GFLOP/s (6 x parameters x tokens, see common.training_flops)
and peak RSS of this process.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
from transformer_tf.config import BOS_ID, EOS_ID, ModelConfig
from transformer_tf.presets import PRESET_NAMES, get_preset
from transformer_tf.runtime.cpu import ONEDNN_VARIABLE  # noqa: E402
from transformer_tf.runtime.training_process import prepare_for_training  # noqa: E402

common.set_thread_env()
prepare_for_training()  # as scripts/train.py does: what a user's training gets


def model_config_for(shape: common.Shape):
    if shape.name in PRESET_NAMES and shape.name != "tiny":
        config = get_preset(shape.name).model
    else:
        config = ModelConfig(vocab_size=shape.vocab_size, num_layers=shape.num_layers,
                             d_model=shape.d_model, d_ff=shape.d_ff, num_heads=shape.num_heads,
                             dropout=0.1)
    got = (config.vocab_size, config.num_layers, config.d_model, config.d_ff, config.num_heads)
    want = (shape.vocab_size, shape.num_layers, shape.d_model, shape.d_ff, shape.num_heads)
    if got != want:
        raise SystemExit(f"preset {shape.name} has shape {got}, the bench expects {want}")
    return config


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="base", choices=sorted(common.SHAPES))
    parser.add_argument("--xla", action="store_true", help="jit_compile=True")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--source-len", type=int, default=32)
    parser.add_argument("--target-len", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=None,
                        help="stop timing after this many seconds of steps")
    parser.add_argument("--inter-op", type=int, default=1)
    parser.add_argument("--precision", default="float32",
                        choices=["float32", "mixed_bfloat16"],
                        help="Keras dtype policy of the model (default float32)")
    args = parser.parse_args(argv)
    shape = common.SHAPES[args.shape]
    result = {"benchmark": "train_step", "engine": "transformer_tf", "shape": shape.name,
              "xla": args.xla, "batch": args.batch, "source_len": args.source_len,
              "target_len": args.target_len, "precision": args.precision,
              "onednn": os.environ.get(ONEDNN_VARIABLE, "tensorflow's default"),
              "load_average_start": common.load_average()}

    # TF is imported after argument parsing and the load sample, and Keras and the library
    # only once TF's thread pools are configured: they are fixed when TF's runtime starts.
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(common.THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)
    import keras

    from transformer_tf.training.fit import build_model_and_optimizer

    keras.utils.set_random_seed(0)
    keras.mixed_precision.set_global_policy(args.precision)
    result["versions"] = {"tensorflow": tf.__version__, "keras": keras.__version__}
    result["threads"] = {"intra_op": common.THREADS, "inter_op": args.inter_op}
    rss_start = common.current_rss_mb()
    model = build_model_and_optimizer(model_config_for(shape), get_preset("base").training,
                                      jit_compile=args.xla)
    result["model_params"] = int(sum(np.prod(v.shape) for v in model.trainable_variables))

    rng = np.random.default_rng(0)
    b, s, t = args.batch, args.source_len, args.target_len
    source = tf.constant(common.random_ids(rng, b, s, shape.vocab_size))
    target = common.random_ids(rng, b, t + 1, shape.vocab_size)
    target[:, 0] = BOS_ID
    target[:, -1] = EOS_ID
    target_in, labels = tf.constant(target[:, :-1]), tf.constant(target[:, 1:])
    rss_built = common.current_rss_mb()

    losses = []

    def step():
        logs = model.train_on_batch((source, target_in), labels, return_dict=True)
        losses.append(float(logs["loss"]))

    result.update(common.time_training_step(step, args, shape, b, s, t, losses))
    result.update({"rss_start_mb": round(rss_start, 1), "rss_built_mb": round(rss_built, 1)})
    common.emit(result)


if __name__ == "__main__":
    main()
