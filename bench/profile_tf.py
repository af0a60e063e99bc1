#!/usr/bin/env python
"""Where our time goes: tf.profiler over a training step or a decode, summed by op type.

    python bench/profile_tf.py --what train --shape base [--xla] [--steps 2] [--json]
        [--precision mixed_bfloat16]
    python bench/profile_tf.py --what decode --shape base --beam 4 [--steps 1]
    python bench/profile_tf.py --what serving --saved-model DIR --sentences FILE [--batch 64]

Builds the same model and inputs as bench/workers/train_tf.py / decode_tf.py, runs one
untimed call (tracing, compiling), then `--steps` calls under `tf.profiler.experimental`
and converts the trace with TensorFlow's own profiler plugin ("framework_op_stats", the
table behind TensorBoard's profile tab). Prints the self-time per op type (MatMul,
BatchMatMul, Softmax, ...), the share of the total, and the top ops by name; where XLA
ran (`--xla`, an XLA export), also the time inside its compiled clusters by HLO
instruction kind (dot, gather fusion, copy...), which XLA's CPU runtime records when
`--xla_cpu_enable_xprof_traceme=true` is in XLA_FLAGS (set here). `serving`
profiles an exported SavedModel's `serving_default` (text in, text out) on the first
`--batch` lines of a real text file, one call per step, as bench/workers/serving.py times it. The trace
stays in --logdir for TensorBoard's trace viewer (`tensorboard --logdir DIR`, Profile tab).
Not part of run_all.py: profiling slows the run down and is for humans.
"""
from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH / "workers"))
import common  # noqa: E402

common.set_thread_env()


def op_stats(xplane_path: str) -> list[dict]:
    """Rows of the framework_op_stats tool: type, name, occurrences, self time (us)."""
    # TF's private profiler plugin, imported on use: TF itself is loaded by main() first.
    from tensorflow.python.profiler.internal import _pywrap_profiler_plugin as plugin

    data, ok = plugin.xspace_to_tools_data([xplane_path], "framework_op_stats", {})
    if not ok:
        raise RuntimeError(f"the profiler plugin could not read {xplane_path}")
    table = json.loads(data)[0]
    columns = [c["id"] for c in table["cols"]]
    rows = []
    for row in table["rows"]:
        values = dict(zip(columns, (cell.get("v") for cell in row["c"])))
        rows.append({"type": values["type"], "name": values["operation"],
                     "occurrences": values["occurrences"],
                     "self_us": values["total_self_time"], "host_or_device": values["host_or_device"]})
    return rows


# XLA's CPU runtime marks each thunk it executes (a fusion, a product, a copy...) with a
# trace event when this flag is on; without it a compiled cluster is one opaque op.
XLA_TRACE_FLAG = "--xla_cpu_enable_xprof_traceme=true"
_THUNK_EXECUTOR = "ThunkExecutor::Execute"


def _kind(hlo_name: str) -> str:
    """An HLO instruction's kind from its name: "MatMul_1.88" -> "MatMul",
    "gather_bitcast_fusion.3" -> "gather_bitcast_fusion"."""
    return re.sub(r"(_\d+)?(\.\d+)?$", "", hlo_name)


def xla_thunk_stats(xplane_path: str) -> dict:
    """Time inside XLA clusters by HLO instruction kind, in us: the trace events whose
    innermost enclosing event is a thunk executor's (the thunks themselves; a while
    loop's body runs in a nested executor, so its thunks count once)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(xplane_path).read_bytes())
    by_kind = collections.Counter()
    for plane in space.planes:
        names = {key: meta.name for key, meta in plane.event_metadata.items()}
        for line in plane.lines:
            enclosing = []  # (end_ps, name) of the events around the current one
            for event in sorted(line.events, key=lambda e: (e.offset_ps, -e.duration_ps)):
                while enclosing and enclosing[-1][0] <= event.offset_ps:
                    enclosing.pop()
                name = names.get(event.metadata_id, "?")
                if enclosing and enclosing[-1][1] == _THUNK_EXECUTOR and name != _THUNK_EXECUTOR:
                    by_kind[_kind(name)] += event.duration_ps / 1e6
                enclosing.append((event.offset_ps + event.duration_ps, name))
    return dict(by_kind)


def summarise(rows: list[dict], steps: int, top: int = 15) -> dict:
    rows = [r for r in rows if r["type"] != "IDLE"]
    total = sum(r["self_us"] for r in rows) or 1.0
    by_type = collections.Counter()
    for r in rows:
        by_type[r["type"]] += r["self_us"]
    return {
        "busy_ms_per_step": total / 1e3 / steps,
        "by_type": [{"type": t, "ms_per_step": us / 1e3 / steps, "share": us / total}
                    for t, us in by_type.most_common(top)],
        "top_ops": [{"name": r["name"], "type": r["type"], "occurrences": r["occurrences"],
                     "ms_per_step": r["self_us"] / 1e3 / steps, "share": r["self_us"] / total}
                    for r in sorted(rows, key=lambda r: -r["self_us"])[:top]],
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--what", choices=["train", "decode", "serving"], default="train")
    parser.add_argument("--shape", default="multi30k", choices=sorted(common.SHAPES))
    parser.add_argument("--xla", action="store_true")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--saved-model", help="serving: an exported SavedModel directory")
    parser.add_argument("--sentences", help="serving: a text file, one sentence per line")
    parser.add_argument("--batch", type=int, default=64, help="serving: sentences per call")
    parser.add_argument("--logdir", default=None, help="keep the trace here (default: temp)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--precision", default="float32", choices=["float32", "mixed_bfloat16"],
                        help="train and decode: Keras dtype policy of the model (default "
                             "float32)")
    parser.add_argument("--intra-op", type=int, default=common.THREADS,
                        help=f"threads per operation (default {common.THREADS})")
    parser.add_argument("--inter-op", type=int, default=1,
                        help="operations run at once (default 1; an export with lanes "
                             "wants intra-op 1 and inter-op = lanes)")
    args = parser.parse_args(argv)
    if args.what == "serving" and not (args.saved_model and args.sentences):
        parser.error("--what serving needs --saved-model and --sentences")
    if args.what == "serving" and args.precision != "float32":
        parser.error("--precision is for train and decode: an export runs in the precision "
                     "it was exported with")
    shape = common.SHAPES[args.shape]

    # TF is imported after argument parsing, and Keras and the library only once TF's
    # thread pools are configured: they are fixed when TF's runtime starts.
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {XLA_TRACE_FLAG}".strip()
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.intra_op)
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)
    import keras

    keras.mixed_precision.set_global_policy(args.precision)
    from train_tf import model_config_for
    from transformer_tf.config import BOS_ID, EOS_ID
    from transformer_tf.presets import get_preset

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    source = common.random_ids(rng, 32, 32, shape.vocab_size)
    if args.what == "train":
        from transformer_tf.training.fit import build_model_and_optimizer

        model = build_model_and_optimizer(model_config_for(shape), get_preset("base").training,
                                          jit_compile=args.xla)
        target = common.random_ids(rng, 32, 33, shape.vocab_size)
        target[:, 0], target[:, -1] = BOS_ID, EOS_ID
        batch = ((tf.constant(source), tf.constant(target[:, :-1])), tf.constant(target[:, 1:]))

        def call():
            model.train_on_batch(*batch)
    elif args.what == "serving":
        import tensorflow_text  # noqa: F401  (registers the SentencepieceOp kernels)

        with open(args.sentences, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for _, line in zip(range(args.batch), f)]
        serving = tf.saved_model.load(args.saved_model).signatures["serving_default"]
        text = tf.constant(lines)

        def call():
            serving(text=text)["translation"].numpy()
    else:
        from fixed_length import fixed_length_search
        from transformer_tf.models.transformer import Transformer

        model = Transformer(model_config_for(shape))
        model.build()
        model.keep_inference_weights()  # as a Translator does: laid out once
        source[:, -1] = EOS_ID
        source = tf.constant(source)
        # The library's search, as bench/workers/decode_tf.py times it: 32 tokens exactly.
        @tf.function(jit_compile=args.xla)
        def decode(source_ids):
            return fixed_length_search(model, source_ids, args.beam, 0.6, 32)

        def call():
            decode(source).ids.numpy()

    call()  # trace / compile outside the profile
    logdir = args.logdir or tempfile.mkdtemp(prefix="profile_tf_")
    tf.profiler.experimental.start(logdir)
    for _ in range(args.steps):
        call()
    tf.profiler.experimental.stop()
    path = sorted(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True))[-1]
    summary = summarise(op_stats(path), args.steps)
    thunks = xla_thunk_stats(path)
    thunk_total = sum(thunks.values())
    summary["xla_ms_per_step"] = thunk_total / 1e3 / args.steps
    summary["xla_by_kind"] = [
        {"kind": kind, "ms_per_step": us / 1e3 / args.steps, "share": us / thunk_total}
        for kind, us in collections.Counter(thunks).most_common(15)]
    summary.update({"what": args.what, "shape": shape.name if args.what != "serving" else None,
                    "xla": args.xla,
                    "beam": args.beam if args.what == "decode" else None, "steps": args.steps,
                    "logdir": logdir})
    if args.json:
        print(json.dumps(summary))
        return
    subject = args.saved_model if args.what == "serving" else shape.name
    print(f"{args.what} {subject} xla={args.xla}: busy {summary['busy_ms_per_step']:.0f} ms "
          f"per call (op self time, both threads' ops summed by the profiler)")
    print("by op type:")
    for row in summary["by_type"]:
        print(f"  {row['type']:40} {row['ms_per_step']:9.1f} ms  {100 * row['share']:5.1f}%")
    print("top ops:")
    for row in summary["top_ops"]:
        print(f"  {row['name'][:70]:70} {row['type'][:22]:22} x{row['occurrences']:<5.0f}"
              f" {row['ms_per_step']:8.1f} ms {100 * row['share']:5.1f}%")
    if summary["xla_by_kind"]:
        # The framework's table may not hold the compiled clusters' time (a SavedModel's
        # XLA search does not show in it), so the thunks' total is given on its own.
        print(f"inside XLA clusters, by HLO instruction kind (thunk time, "
              f"{summary['xla_ms_per_step']:.0f} ms per call in all):")
        for row in summary["xla_by_kind"]:
            print(f"  {row['kind'][:40]:40} {row['ms_per_step']:9.1f} ms  "
                  f"{100 * row['share']:5.1f}%")
    print(f"trace: {logdir}")


if __name__ == "__main__":
    main()
