"""Worker: the machine's fp32 matmul peak in this run (GFLOP/s), TF and numpy, 2 threads.

    python bench/workers/matmul.py [--size 2048] [--repeats 10]

A [n, n] x [n, n] float32 product is 2 n^3 FLOPs; the best of `repeats` timed products
(after warm-up) is reported for each engine (TensorFlow, numpy's BLAS, PyTorch when
installed), and `peak_gflops` is the largest: the machine's peak as far as this run can
reach it, which our fractions of peak are measured against.

`tf_bf16_gflops` is TensorFlow's bfloat16 product of the same size (what mixed_bfloat16
training and decoding multiply with), beside `cpu_bf16` (the CPU's native bfloat16 flags,
AVX512-BF16 / AMX-BF16, from /proc/cpuinfo): on CPUs without them bfloat16 is emulated.
It is not part of the fp32 peak.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

common.set_thread_env()


def best_gflops(fn, n, repeats):
    fn()
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n ** 3 / best / 1e9


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--engines", default="tf,numpy,torch")
    args = parser.parse_args(argv)
    n = args.size
    result = {"benchmark": "matmul_peak", "size": n, "dtype": "float32",
              "threads": common.THREADS, "load_average_start": common.load_average()}
    engines = args.engines.split(",")
    # Imported here, after argument parsing and the load sample; tf and torch only when
    # measured (--engines), and torch may be missing.
    import numpy as np
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    if "numpy" in engines:
        result["numpy_gflops"] = round(best_gflops(lambda: a @ b, n, args.repeats), 1)
    if "tf" in engines:
        import tensorflow as tf
        tf.config.threading.set_intra_op_parallelism_threads(common.THREADS)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        ta, tb = tf.constant(a), tf.constant(b)
        matmul = tf.function(lambda x, y: tf.matmul(x, y))
        result["tf_gflops"] = round(
            best_gflops(lambda: matmul(ta, tb).numpy(), n, args.repeats), 1)
        from transformer_tf.runtime.cpu import BF16_CPU_FLAGS, read_cpu_flags

        ha, hb = tf.cast(ta, tf.bfloat16), tf.cast(tb, tf.bfloat16)
        result["tf_bf16_gflops"] = round(
            best_gflops(lambda: matmul(ha, hb).numpy(), n, args.repeats), 1)
        result["cpu_bf16"] = sorted(read_cpu_flags() & set(BF16_CPU_FLAGS))
    if "torch" in engines:
        try:
            import torch
        except ImportError as error:
            result["torch_gflops"] = None
            result["torch_missing"] = f"{type(error).__name__}: {error}"
        else:
            torch.set_num_threads(common.THREADS)
            pa, pb = torch.from_numpy(a), torch.from_numpy(b)
            result["torch_gflops"] = round(best_gflops(lambda: pa @ pb, n, args.repeats), 1)
    figures = [v for k, v in result.items()
               if k.endswith("_gflops") and not k.endswith("bf16_gflops") and v]
    result["peak_gflops"] = max(figures)
    common.emit(result)


if __name__ == "__main__":
    main()
