#!/usr/bin/env python
"""Average the model weights of a run's last N checkpoints into a new checkpoint.

The paper (section 6.1) evaluates the average of the last 5 checkpoints (base models) or
the last 20 (big models), written at 10-minute intervals. Only the model weights are
averaged (element-wise mean); the optimizer state is not kept. The result is read by
scripts/export.py and scripts/translate.py like any training checkpoint.

If MDIR holds fewer than N checkpoints, the script fails (exit status 2) and says how
many there are, unless --allow-fewer is given: then it averages those it has, with a
warning. (A run keeps its last `keep_checkpoints` checkpoints; make that at least N.)

Example:
  python scripts/average_checkpoints.py --model-dir runs/multi30k/model --last 5 \\
      --out runs/multi30k/model/averaged/ckpt
"""
import argparse
import pathlib
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", required=True,
                        help="the run's model directory (written by scripts/train.py)")
    parser.add_argument("--last", type=int,
                        help="how many of the newest checkpoints to average (default: the "
                             "run's training.average_last: 5 for base, 20 for big)")
    parser.add_argument("--out",
                        help="prefix of the checkpoint to write (default: MDIR/averaged/ckpt)")
    parser.add_argument("--allow-fewer", action="store_true",
                        help="average the checkpoints there are when fewer than --last exist "
                             "(with a warning) instead of failing")
    args = parser.parse_args(argv)
    if args.last is not None and args.last < 1:
        parser.error(f"--last must be at least 1, got {args.last}")

    # Imported after parsing, so that --help answers without loading TensorFlow.
    from transformer_tf.training.checkpoints import average_run

    try:
        averaged = average_run(args.model_dir, args.last, args.out, args.allow_fewer)
    except (FileNotFoundError, ValueError) as error:
        hint = "; pass --allow-fewer to average those" if "fewer than" in str(error) else ""
        print(f"error: {error}{hint}", file=sys.stderr)
        return 2
    names = ", ".join(pathlib.Path(p).name for p in averaged.sources)
    if len(averaged.sources) < averaged.requested:
        print(f"warning: only {len(averaged.sources)} checkpoint(s), fewer than --last "
              f"{averaged.requested}; averaged those", file=sys.stderr)
    print(f"averaged {len(averaged.sources)} checkpoint(s) ({names}) -> {averaged.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
