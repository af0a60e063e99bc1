"""Export a trained model as a SavedModel for TF Serving (text in, text out).

Uses --checkpoint, else the checkpoint MDIR's last choice kept (the main job's dev-set
choice, or scripts/average_checkpoints.py's), else MDIR's averaged checkpoint, else its
newest training checkpoint. The version directory is written atomically, in the layout TF
Serving watches: saved_models/NAME/VERSION (VERSION an integer; not inside a training
run). --overwrite replaces only a SavedModel; the old version is deleted once the new one
is in place, so a failed or killed export loses none.

Examples:
  python scripts/export.py --model-dir runs/multi30k_en_de/model --out saved_models/en_de/1
  python scripts/export.py --ensemble runs/seed1/model runs/seed2/model \
      --out saved_models/en_de_ensemble/1
  python scripts/export.py --model-dir runs/multi30k_en_de/model --precision bfloat16 \
      --out saved_models/en_de_bf16/1
"""
import argparse
import logging
import sys

from transformer_tf.cli.arguments import add_version_flag, non_negative_int
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.flags import (
    add_export_precision_flags,
    add_flag,
    add_search_flags,
    search_settings,
)
from transformer_tf.config import DEFAULT_MAX_BATCH_ROWS
from transformer_tf.runtime import console


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    model = parser.add_mutually_exclusive_group(required=True)
    add_flag(model, "model_dir")
    add_flag(model, "ensemble")
    add_flag(parser, "out", required=True,
             help="version directory to write, saved_models/NAME/VERSION (VERSION: an integer; TF "
                  "Serving serves the highest)")
    add_flag(parser, "checkpoint", help="checkpoint prefix to export instead of the default")
    add_search_flags(parser, "the run's: chosen on the dev set by the main job, else the preset's",
                     length=True, stopping=True, purpose="baked into the signatures")
    parser.add_argument("--chunk-size", type=int,
                        help="search each request sorted by source length, this many rows at "
                             "a time (same outputs, less work on mixed lengths); 0: the whole "
                             "batch at once (default: the run's; 64 for new runs)")
    parser.add_argument("--lanes", type=int,
                        help="search each request as this many parts at the same time (same "
                             "outputs); for CPU serving, one per core, with TF Serving's "
                             "--tensorflow_intra_op_parallelism=1 and "
                             "--tensorflow_inter_op_parallelism=LANES (default: the run's, 1)")
    add_flag(parser, "xla", default=None,
             help="compile each chunk's search with XLA (needs --chunk-size; each chunk shape and "
                  "source length bucket of 8 compiles on its first request)")
    add_flag(parser, "overwrite",
             help="replace an existing version (only a SavedModel; anything else in --out is "
                  "refused)")
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
    add_export_precision_flags(parser)
    parser.add_argument("--no-warmup", dest="warmup", action="store_false",
                        help="write no TF Serving warm-up requests (OUT/assets.extra/"
                             "tf_serving_warmup_requests: 2 requests, or with --xla one per "
                             "compiled shape, replayed by TF Serving at load)")
    console.add_verbose_flag(parser)
    add_version_flag(parser)
    args = parser.parse_args(argv)
    if args.ensemble and args.checkpoint:
        parser.error("--checkpoint: names one run's checkpoint; with --ensemble each run "
                     "uses its default checkpoint")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    with console.session(args.verbose):
        return run_command(_run, args, verbose=args.verbose)


def _run(args) -> int:
    # Imported after parsing, so that --help answers without loading TensorFlow.
    from transformer_tf.export.saved_model import export_ensemble, export_model_dir
    from transformer_tf.inference.loading import source_decoding

    base = source_decoding(model_dir=args.model_dir, ensemble=args.ensemble)
    options = {"ids_only": args.ids_only, "warmup": args.warmup,
               "max_batch_rows": args.max_batch_rows,
               "decoding": search_settings(args, base), "precision": args.precision,
               "force_precision": args.force_precision}
    if args.ensemble:
        path = export_ensemble(args.ensemble, args.out, args.overwrite, **options)
    else:
        path = export_model_dir(args.model_dir, args.out, args.checkpoint, args.overwrite,
                                **options)
    if not args.checkpoint:
        for model_dir in args.ensemble or [args.model_dir]:
            say_default_checkpoint(model_dir)
    print(path)
    return 0


def say_default_checkpoint(model_dir) -> None:
    """On stderr: which checkpoint of the run is used when none is named, and why."""
    from transformer_tf.inference.loading import default_checkpoint

    path, why = default_checkpoint(model_dir)
    print(f"checkpoint: {path} ({why})", file=sys.stderr)
