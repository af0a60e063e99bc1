"""Export a trained model as a SavedModel for TF Serving (text in, text out).

Uses MDIR's averaged checkpoint if there is one (scripts/average_checkpoints.py), else its
latest training checkpoint, unless --checkpoint says otherwise. The version directory is
written atomically, in the layout TF Serving watches: saved_models/NAME/VERSION (VERSION an
integer; not inside a training run). --overwrite replaces only a SavedModel; the old
version is deleted once the new one is in place, so a failed or killed export loses none.

Example:
  python scripts/export.py --model-dir runs/multi30k_en_de/model --out saved_models/en_de/1
"""
import argparse
import logging
import sys

from transformer_tf.cli.arguments import add_version_flag, non_negative_int
from transformer_tf.cli.errors import run_command
from transformer_tf.config import DEFAULT_MAX_BATCH_ROWS, STOPPING_RULES
from transformer_tf.runtime import console


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", required=True, help="training run directory")
    parser.add_argument("--out", required=True,
                        help="version directory to write, saved_models/NAME/VERSION (VERSION: "
                             "an integer; TF Serving serves the highest)")
    parser.add_argument("--checkpoint", help="checkpoint prefix to export instead of the default")
    parser.add_argument("--beam-size", type=int, help="beam size baked into the signatures "
                                                      "(default: the run's, 4)")
    parser.add_argument("--alpha", type=float, help="length penalty exponent (default 0.6)")
    parser.add_argument("--max-extra-length", type=int,
                        help="output length limit = input length + this (default 50)")
    parser.add_argument("--chunk-size", type=int,
                        help="search each request sorted by source length, this many rows at "
                             "a time (same outputs, less work on mixed lengths); 0: the whole "
                             "batch at once (default: the run's; 64 for new runs)")
    parser.add_argument("--lanes", type=int,
                        help="search each request as this many parts at the same time (same "
                             "outputs); for CPU serving, one per core, with TF Serving's "
                             "--tensorflow_intra_op_parallelism=1 and "
                             "--tensorflow_inter_op_parallelism=LANES (default: the run's, 1)")
    parser.add_argument("--xla", action="store_true", default=None,
                        help="compile each chunk's search with XLA (needs --chunk-size; each "
                             "chunk shape and source length bucket of 8 compiles on its "
                             "first request)")
    parser.add_argument("--stopping", choices=STOPPING_RULES,
                        help="when a sentence's beam search ends: exact (default; the result "
                             "of searching to the length limit) or k_finished (once beam-size "
                             "hypotheses have finished, as CTranslate2 and fairseq do: fewer "
                             "steps, a better longer output can be missed)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing version (only a SavedModel; anything else "
                             "in --out is refused)")
    parser.add_argument("--max-batch-rows", type=non_negative_int, default=DEFAULT_MAX_BATCH_ROWS,
                        help="the most sentences (rows) one request may hold: a larger request "
                             "fails with InvalidArgument naming the limit instead of running "
                             "out of memory; 0: no limit (default %(default)s; with TF "
                             "Serving's --enable_batching, keep its max_batch_size at most "
                             "this)")
    parser.add_argument("--ids-only", action="store_true",
                        help="export the ids-in, ids-out variant without the tokenizer, for "
                             "servers without tensorflow-text ops (clients tokenize with "
                             "OUT/assets.extra/bpe.model)")
    parser.add_argument("--no-warmup", dest="warmup", action="store_false",
                        help="write no TF Serving warm-up requests (OUT/assets.extra/"
                             "tf_serving_warmup_requests: 2 requests, or with --xla one per "
                             "compiled shape, replayed by TF Serving at load)")
    console.add_verbose_flag(parser)
    add_version_flag(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    with console.session(args.verbose):
        return run_command(_run, args, verbose=args.verbose)


def _run(args) -> int:
    # Imported after parsing, so that --help answers without loading TensorFlow.
    from transformer_tf.export.saved_model import export_model_dir

    path = export_model_dir(args.model_dir, args.out, args.checkpoint, args.overwrite,
                            ids_only=args.ids_only, warmup=args.warmup,
                            max_batch_rows=args.max_batch_rows,
                            beam_size=args.beam_size, alpha=args.alpha,
                            max_extra_length=args.max_extra_length,
                            chunk_size=args.chunk_size, lanes=args.lanes, xla=args.xla,
                            stopping=args.stopping)
    if not args.checkpoint:
        say_default_checkpoint(args.model_dir)
    print(path)
    return 0


def say_default_checkpoint(model_dir) -> None:
    """On stderr: which checkpoint of the run is used when none is named, and why."""
    from transformer_tf.inference.loading import default_checkpoint

    path, why = default_checkpoint(model_dir)
    print(f"checkpoint: {path} ({why})", file=sys.stderr)
