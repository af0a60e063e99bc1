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

    from transformer_tf.models.transformer import Transformer
    from transformer_tf.training import checkpoints, model_dir as model_dir_lib

    try:
        run = model_dir_lib.read_run_config(args.model_dir)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    last = args.last or run.training.average_last
    available = checkpoints.list_checkpoints(args.model_dir)
    names = ", ".join(pathlib.Path(p).name for p in available) or "none"
    if not available:
        print(f"error: {args.model_dir} has no checkpoints to average", file=sys.stderr)
        return 2
    if len(available) < last:
        message = (f"{args.model_dir} has {len(available)} checkpoint(s) ({names}), fewer "
                   f"than --last {last}")
        if not args.allow_fewer:
            print(f"error: {message}; pass --allow-fewer to average those", file=sys.stderr)
            return 2
        print(f"warning: {message}; averaging those {len(available)}", file=sys.stderr)
    selected = available[-last:]
    out = args.out or str(model_dir_lib.averaged_prefix(args.model_dir))

    model = Transformer(run.model)
    model.build()
    written = checkpoints.average_checkpoints(model, selected, out)
    print(f"averaged {len(selected)} checkpoint(s) "
          f"({', '.join(pathlib.Path(p).name for p in selected)}) -> {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
