"""Worker: the serving artefacts of one trained model, for bench/workers/serving.py.

    python bench/workers/serving_prepare.py --model-dir MDIR --out DIR
        [--beam-size 4 --alpha 0.6]

Writes, from the same checkpoint (MDIR's averaged one if present, else its latest):
DIR/savedmodel (scripts/export.py's SavedModel, with this beam and alpha baked into
serving_default, and the default search: requests sorted by source length, --chunk-size
rows at a time), DIR/savedmodel_unchunked (each request searched as one batch),
DIR/savedmodel_chunked_xla (chunks of --xla-chunk-size, each chunk's search compiled by
XLA), DIR/savedmodel_k_finished (the default with CTranslate2's stopping rule: a sentence
stops once beam-size hypotheses have finished), DIR/savedmodel_lanes (the default in
--lanes lanes, one per thread of the benchmark), DIR/savedmodel_lanes_k_finished (both),
DIR/ctranslate2 (scripts/export_ctranslate2.py's model), and DIR/savedmodel_greedy,
DIR/savedmodel_greedy_lanes, DIR/savedmodel_greedy_chunked_xla and DIR/ctranslate2_greedy
(beam 1, both engines), and DIR/savedmodel_bf16 (the default exported with --precision
bfloat16, forced on a CPU without native bfloat16: there it measures TensorFlow's
emulation), DIR/savedmodel_bf16_lanes (the same in --lanes lanes, against
DIR/savedmodel_lanes), DIR/savedmodel_lanes_padding_flipped (the lanes export with the kernel
padding of layers/kernel_layout.py the other way round from this machine's default,
"kernel_padding_default"), each as version 1 of its name (DIR/NAME/1, the layout the exports require).
Prints their paths as JSON, with "ct2_compute_types" (what
`ctranslate2.get_supported_compute_types("cpu")` lists), "native_bfloat16" and
"cpu_kind" (`runtime.cpu`).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

common.set_thread_env()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.6)
    parser.add_argument("--chunk-size", type=int, default=None,
                        help="the default export's chunk size (default: DecodingConfig's)")
    parser.add_argument("--xla-chunk-size", type=int, default=16,
                        help="chunk size of the XLA export (fixed shapes, no compaction: "
                             "smaller chunks waste fewer steps; default 16)")
    parser.add_argument("--lanes", type=int, default=common.THREADS,
                        help=f"lanes of the lanes exports (default {common.THREADS})")
    args = parser.parse_args(argv)
    from transformer_tf.config import DecodingConfig
    from transformer_tf.export.ctranslate2 import export_model_dir_ctranslate2
    from transformer_tf.export.saved_model import export_model_dir
    from transformer_tf.inference.loading import pick_checkpoint, source_decoding

    if args.chunk_size is None:
        args.chunk_size = DecodingConfig().chunk_size
    out = Path(args.out)
    started = time.perf_counter()
    beam = {"beam_size": args.beam_size, "alpha": args.alpha}
    greedy = {"beam_size": 1, "alpha": 0.0}
    default, xla = {"chunk_size": args.chunk_size}, {"chunk_size": args.xla_chunk_size, "xla": True}
    lanes, k_finished = {"lanes": args.lanes}, {"stopping": "k_finished"}
    exports = {  # SavedModel name -> export_model_dir's decoding overrides
        "savedmodel": {**beam, **default},
        "savedmodel_unchunked": {**beam, "chunk_size": 0},
        "savedmodel_chunked_xla": {**beam, **xla},
        "savedmodel_k_finished": {**beam, **default, **k_finished},
        "savedmodel_lanes": {**beam, **default, **lanes},
        "savedmodel_lanes_k_finished": {**beam, **default, **lanes, **k_finished},
        # Greedy search (beam 1): the second serving target.
        "savedmodel_greedy": {**greedy, **default},
        "savedmodel_greedy_lanes": {**greedy, **default, **lanes},
        "savedmodel_greedy_chunked_xla": {**greedy, **xla},
        # The bfloat16 export, against CTranslate2's bfloat16 compute types.
        "savedmodel_bf16": {**beam, **default},
        # ... and with lanes (one thread each), against the float32 lanes export.
        "savedmodel_bf16_lanes": {**beam, **default, **lanes},
    }
    bfloat16 = {"precision": "bfloat16", "force_precision": True}
    precisions = {"savedmodel_bf16": bfloat16, "savedmodel_bf16_lanes": bfloat16}
    run = source_decoding(model_dir=args.model_dir)
    paths = {name: str(export_model_dir(args.model_dir, out / name / "1", overwrite=True,
                                         decoding=run.with_overrides(**overrides),
                                         **precisions.get(name, {})))
             for name, overrides in exports.items()}
    # The kernel padding the other way round (its switch is read once per process).
    from transformer_tf.layers import kernel_layout

    padding_default = kernel_layout.layout_applies()
    os.environ[kernel_layout.PADDING_VARIABLE] = "0" if padding_default else "1"
    kernel_layout.layout_applies.cache_clear()
    paths["savedmodel_lanes_padding_flipped"] = str(export_model_dir(
        args.model_dir, out / "savedmodel_lanes_padding_flipped" / "1", overwrite=True,
        decoding=run.with_overrides(**exports["savedmodel_lanes"])))
    del os.environ[kernel_layout.PADDING_VARIABLE]
    kernel_layout.layout_applies.cache_clear()
    for name, overrides in (("ctranslate2", beam), ("ctranslate2_greedy", greedy)):
        paths[name] = str(export_model_dir_ctranslate2(args.model_dir, out / name / "1",
                                                       overwrite=True,
                                                       decoding=run.with_overrides(**overrides)))
    import ctranslate2

    from transformer_tf.runtime.cpu import (
        cpu_kind,
        has_native_bfloat16,
        matmul_library,
        read_cpu_flags,
    )

    flags = read_cpu_flags()
    common.emit({**paths, "lanes": args.lanes, "chunk_size": args.chunk_size,
                 "ct2_compute_types": sorted(ctranslate2.get_supported_compute_types("cpu")),
                 "native_bfloat16": has_native_bfloat16(flags), "cpu_kind": cpu_kind(flags),
                 "kernel_padding_default": padding_default,
                 "matmul_library": matmul_library(),
                 "xla_chunk_size": args.xla_chunk_size,
                 "checkpoint": pick_checkpoint(args.model_dir),
                 "beam_size": args.beam_size, "alpha": args.alpha,
                 "seconds": round(time.perf_counter() - started, 1)})


if __name__ == "__main__":
    main()
