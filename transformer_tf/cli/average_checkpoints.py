"""Average the model weights of a run's last N checkpoints into a new checkpoint.

The paper (section 6.1) evaluates the average of the last 5 checkpoints (base models) or
the last 20 (big models), written at 10-minute intervals. Only the model weights are
averaged (element-wise mean); the optimizer state is not kept. The result is read by
scripts/export.py and scripts/translate.py like any training checkpoint.

If MDIR holds fewer than N checkpoints, the script fails (exit status 2) and says how
many there are, unless --allow-fewer is given: then it averages those it has, with a
warning. (A run keeps its last `keep_checkpoints` checkpoints; make that at least N.)

With --select dev it does what the main job does: it averages up to N checkpoints from
the last 20% of training only, scores that average and the latest checkpoint on the dev
set of the run's prepared data (NLL per token and BLEU with --beam-size / --alpha), and
keeps the better one: BLEU decides when the difference is beyond the dev set's noise (a
paired bootstrap), the lower NLL otherwise.

The checkpoint kept (the average written into MDIR/averaged/, or the dev-set choice) is
recorded in MDIR/chosen_checkpoint.json: export and translate use it unless told
otherwise with --checkpoint, until the run trains further.

Example:
  python scripts/average_checkpoints.py --model-dir runs/multi30k/model --last 5
"""
import argparse
import logging
import pathlib
import sys

from transformer_tf.cli.arguments import add_version_flag, positive_int
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.flags import add_flag, add_search_flags, search_settings
from transformer_tf.runtime import console


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(parser, "model_dir", required=True,
             help="the run's model directory (written by scripts/train.py)")
    parser.add_argument("--last", type=positive_int,
                        help="how many of the newest checkpoints to average (default: the "
                             "run's training.average_last: 5 for base, 20 for big)")
    add_flag(parser, "out", help="prefix of the checkpoint to write (default: MDIR/averaged/ckpt)")
    parser.add_argument("--allow-fewer", action="store_true",
                        help="average the checkpoints there are when fewer than --last exist "
                             "(with a warning) instead of failing")
    parser.add_argument("--select", choices=("none", "dev"), default="none",
                        help="dev: average from the final part of training only and compare "
                             "with the latest checkpoint on the dev set (default none)")
    add_search_flags(parser, "the run's", purpose="the search of --select dev")
    console.add_verbose_flag(parser)
    add_version_flag(parser)
    args = parser.parse_args(argv)
    if args.last is not None and args.last < 1:
        parser.error(f"--last must be at least 1, got {args.last}")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    with console.session(args.verbose):
        return run_command(_run, args, verbose=args.verbose)


def _run(args) -> int:

    # Imported after parsing, so that --help answers without loading TensorFlow.
    from transformer_tf.data.prepared_reader import load_prepared
    from transformer_tf.inference.loading import source_decoding
    from transformer_tf.inference.selection import average_and_choose
    from transformer_tf.rundir.model_dir import (
        CHOSEN_FILE,
        averaged_prefix,
        read_run_config,
    )
    from transformer_tf.training.averaging import average_into_run, average_run

    if args.select == "dev":
        run = read_run_config(args.model_dir)
        decoding = search_settings(args, source_decoding(model_dir=args.model_dir))
        selection = average_and_choose(
            args.model_dir, load_prepared(run.data_dir), args.last or run.training.average_last,
            args.out, decoding)
        print(selection.note)
        for score in selection.scores:
            print(f"  {score.describe()}")
        print(f"better on the dev set: {selection.chosen.name} ({selection.chosen.checkpoint})")
        print(f"  why: {selection.reason}")
        print(f"  recorded in {pathlib.Path(args.model_dir) / CHOSEN_FILE}: export and "
              "translate use it")
        return 0

    into_run = args.out is None or (pathlib.Path(args.out).resolve()
                                    == averaged_prefix(args.model_dir).resolve())
    try:
        if into_run:
            averaged = average_into_run(args.model_dir, args.last, args.allow_fewer)
        else:
            averaged = average_run(args.model_dir, args.last, args.out, args.allow_fewer)
    except ValueError as error:
        if "fewer than" not in str(error):
            raise
        print(f"error: {error}; pass --allow-fewer to average those", file=sys.stderr)
        return 2
    names = ", ".join(pathlib.Path(p).name for p in averaged.sources)
    if len(averaged.sources) < averaged.requested:
        print(f"warning: only {len(averaged.sources)} checkpoint(s), fewer than --last "
              f"{averaged.requested}; averaged those", file=sys.stderr)
    print(f"averaged {len(averaged.sources)} checkpoint(s) ({names}) -> {averaged.path}")
    if into_run:
        print(f"recorded in {pathlib.Path(args.model_dir) / CHOSEN_FILE}: export and "
              "translate use it")
    return 0
