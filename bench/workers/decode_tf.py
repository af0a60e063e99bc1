"""Worker: our fixed-length decoding (transformer_tf greedy / beam search), per shape.

    python bench/workers/decode_tf.py --shapes base,multi30k --beams 1,4 --xla-modes off,on
        [--batch 32 --source-len 32 --output-len 32 --warmup 1 --repeats 3]

A random-weight `Transformer` encodes `batch` random source sentences of `source_len`
tokens (the last one EOS) and decodes exactly `output_len` tokens each: the search is
`transformer_tf.decoding.model_driver.search_model`'s (cached `decode_step`, encoder
keys/values computed once, one row per sentence, PAD and BOS forbidden) with EOS
forbidden as well, so random weights never stop early, and `max_lengths = output_len`.
XLA off: the served graph path, caches growing step by step; XLA on: caches of a static
`output_len` positions, so that XLA compiles the search once (bench/fixed_length.py).
Beam search uses alpha 0.6. Every (shape, XLA mode, beam) runs in this one process.
Prints one JSON object whose "runs" hold, per configuration: decode times, output tokens/s
(batch x output_len / time, best hypothesis only), sentences/s and GFLOP/s
(common.decoding_flops, common.decoding_figures).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

common.set_thread_env()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="base", help="comma-separated: base,multi30k,tiny")
    parser.add_argument("--beams", default="1,4", help="comma-separated beam sizes; 1 = greedy")
    parser.add_argument("--xla-modes", default="off", help="comma-separated: off,on")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--source-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=None,
                        help="per configuration: stop timing after this many seconds")
    parser.add_argument("--inter-op", type=int, default=1)
    parser.add_argument("--precision", default="float32",
                        choices=["float32", "mixed_bfloat16"],
                        help="Keras dtype policy of the model (default float32)")
    args = parser.parse_args(argv)
    load_start = common.load_average()
    # TF is imported after argument parsing and the load sample, and Keras and the library
    # only once TF's thread pools are configured: they are fixed when TF's runtime starts.
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(common.THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)
    import keras

    from fixed_length import decode_model, fixed_length_search
    from transformer_tf.config import EOS_ID

    report = {"benchmark": "decode", "engine": "transformer_tf", "load_average_start": load_start,
              "versions": {"tensorflow": tf.__version__, "keras": keras.__version__},
              "threads": {"intra_op": common.THREADS, "inter_op": args.inter_op},
              "precision": args.precision, "runs": []}
    keras.mixed_precision.set_global_policy(args.precision)
    b, length = args.batch, args.output_len
    for shape_name in common.csv_list(args.shapes):
        shape = common.SHAPES[shape_name]
        model = decode_model(shape)
        model.keep_inference_weights()  # as a Translator does: laid out once
        rng = np.random.default_rng(0)
        source = common.random_ids(rng, b, args.source_len, shape.vocab_size)
        source[:, -1] = EOS_ID
        source = tf.constant(source)

        for xla in common.csv_list(args.xla_modes):
            for beam in common.csv_list(args.beams, int):
                # The library's decode path; EOS forbidden: exactly `length` tokens.
                @tf.function(jit_compile=(xla == "on"))
                def decode(source_ids, beam=beam, xla=xla):
                    return fixed_length_search(model, source_ids, beam, 0.6, length,
                                               static_cache=(xla == "on"))

                outputs = []

                def run():
                    out = decode(source)
                    outputs.append((int(out.num_steps), out.lengths.numpy()))

                result = {"shape": shape.name, "beam": beam, "xla": xla == "on", "batch": b,
                          "source_len": args.source_len, "output_len": length,
                          "model_params": int(sum(np.prod(v.shape) for v in model.weights)),
                          "load_average_start": common.load_average()}
                timing = common.time_calls(run, args.repeats, warmup=args.warmup,
                                           max_seconds=args.max_seconds)
                num_steps, lengths = outputs[-1]
                if num_steps != length or not (lengths[:, 0] == length).all():
                    raise SystemExit(
                        f"expected {length} steps and tokens, got {num_steps} steps, "
                        f"lengths {sorted(set(lengths[:, 0].tolist()))}")
                result.update(timing)
                result.update(common.decoding_figures(
                    timing, shape, b, args.source_len, length, beam))
                report["runs"].append(result)
    common.emit(report)


if __name__ == "__main__":
    main()
