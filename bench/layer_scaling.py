"""The paper's Table 1, measured: forward + backward time of one layer of each type as the
sequence length n grows, at d = 512 on this CPU, with the fitted exponent of each curve.

    .venv/bin/python bench/layer_scaling.py [--lengths 16,32,...,1024] [--batch 4]
        [--out runs/bench/layer_scaling]      # writes OUT.json and OUT.png

Layers (one each, d = 512, random inputs of `batch` x n x d, float32, 2 threads):
  self-attention      our MultiHeadAttention (8 heads), full n x n      paper O(n^2 d)
  restricted (r)      the same with ModelConfig.attention_window's mask  paper O(r n d)
  convolution (k=3)   our ConvS2S block (weight-normalised conv + GLU)   paper O(k n d^2)
  recurrent           keras.layers.LSTM(512)                             paper O(n d^2)
The restricted row uses the mask our models use: it removes keys, not work, so it keeps
self-attention's n^2 cost; a banded kernel would be needed for the paper's O(r n d).

The exponent is the slope of log(time) against log(n) over the longer half of the
lengths, where per-call overheads no longer dominate. Prints one JSON object.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.set_thread_env()

PAPER = {"self_attention": "O(n^2 d)", "restricted_self_attention": "O(r n d)",
         "convolution_k3": "O(k n d^2)", "recurrent_lstm": "O(n d^2)"}
PAPER_EXPONENT = {"self_attention": 2, "restricted_self_attention": 1, "convolution_k3": 1,
                  "recurrent_lstm": 1}


def fitted_exponent(lengths, seconds) -> float:
    """Least-squares slope of log(seconds) on log(n) over the longer half of the points."""
    points = sorted(zip(lengths, seconds))[len(lengths) // 2:]
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(s) for _, s in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def _layers(d: int, window: int):
    """name -> function(x [batch, n, d]) -> output, each a freshly built layer."""
    import keras
    import tensorflow as tf

    from transformer_tf.layers.attention import CachedMultiHeadAttention
    from transformer_tf.layers.glu_block import ConvGLUBlock
    from transformer_tf.layers.masks import attention_mask

    attention = CachedMultiHeadAttention(num_heads=8, key_dim=d // 8)
    block = ConvGLUBlock(d, 3)
    lstm = keras.layers.LSTM(d, return_sequences=True)

    def self_attention(x, window=None):
        valid = tf.ones(tf.shape(x)[:2], tf.bool)
        return attention(x, x, attention_mask=attention_mask(valid, valid, window=window))

    return {
        "self_attention": self_attention,
        "restricted_self_attention": lambda x: self_attention(x, window),
        "convolution_k3": block,
        "recurrent_lstm": lstm,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="16,32,64,128,256,512,1024")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--d", type=int, default=512)
    parser.add_argument("--window", type=int, default=16, help="restricted attention's r/2")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=10.0)
    parser.add_argument("--out", help="write OUT.json and OUT.png (the log-log plot); neither "
                                      "may exist yet")
    args = parser.parse_args(argv)
    if args.out:
        common.refuse_existing_outputs(parser, [args.out + ".json", args.out + ".png"])
    lengths = common.csv_list(args.lengths, int)
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(common.THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras

    keras.utils.set_random_seed(0)
    report = {"benchmark": "layer_scaling", "d": args.d, "batch": args.batch,
              "window": args.window, "lengths": lengths,
              "load_average_start": common.load_average(), "layers": {}}
    rng = np.random.default_rng(0)
    for name, layer in _layers(args.d, args.window).items():
        seconds = []
        for n in lengths:
            x = tf.constant(rng.normal(size=(args.batch, n, args.d)).astype(np.float32))

            @tf.function
            def forward_backward(x):
                with tf.GradientTape() as tape:
                    tape.watch(x)
                    loss = tf.reduce_sum(tf.square(layer(x)))
                return tape.gradient(loss, x)

            timing = common.time_calls(lambda: forward_backward(x).numpy(), args.repeats,
                                       warmup=args.warmup, max_seconds=args.max_seconds)
            seconds.append(timing["best_s"])
            print(f"{name:28} n={n:5d} {timing['best_s'] * 1e3:9.2f} ms", file=sys.stderr)
        report["layers"][name] = {
            "seconds": seconds, "fitted_exponent": round(fitted_exponent(lengths, seconds), 2),
            "paper_complexity": PAPER[name], "paper_exponent_in_n": PAPER_EXPONENT[name]}
    times = {name: dict(zip(lengths, r["seconds"])) for name, r in report["layers"].items()}
    faster = [n for n in lengths
              if times["self_attention"][n] <= times["convolution_k3"][n]]
    report["self_attention_faster_than_convolution_up_to_n"] = max(faster, default=None)
    report["load_average_end"] = common.load_average()
    if args.out:
        Path(args.out + ".json").write_text(json.dumps(report, indent=1) + "\n")
        _plot(report, args.out + ".png")
    common.emit(report)
    return 0


def _plot(report: dict, path: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install -e .[viz]): no plot", file=sys.stderr)
        return
    figure, axes = plt.subplots(figsize=(6.4, 4.4), dpi=110)
    for name, row in report["layers"].items():
        axes.loglog(report["lengths"], [s * 1e3 for s in row["seconds"]], marker="o",
                    label=f"{name} (slope {row['fitted_exponent']}, paper {row['paper_complexity']})")
    axes.set_xlabel("sequence length n")
    axes.set_ylabel("forward + backward, ms (best of runs)")
    axes.set_title(f"One layer at d = {report['d']}, batch {report['batch']}, 2 CPU threads")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path)


if __name__ == "__main__":
    raise SystemExit(main())
