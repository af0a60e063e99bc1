#!/usr/bin/env python
"""The parsing ablation (issue 41): the paper's configuration (parsing_paper), the engineered
parser (parsing_cpu, beyond the paper) and parsing_cpu without its tree grammar, without its
source cursor, without its copied leaves, and without all three; every row's dev F1 by
EVALB's COLLINS.prm rules, compared with the engineered row by paired bootstrap. The
results file lists every row (the ones not run yet marked so) and is rewritten after each
finished row; run the same command again to resume. See transformer_tf/jobs/parse_ablation.py.

The study (5 trainings of 45 minutes; parsing_paper's d_model 1024 trains few steps in
that time on 2 cores):
  python scripts/parse_ablation.py --work-dir runs/parse_ablation \\
      --results results/parsing/ablation-wsj-sample.json
Some rows now, the others later (the same --results):
  python scripts/parse_ablation.py --work-dir runs/parse_ablation \\
      --results results/parsing/ablation-wsj-sample.json --rows engineered no_grammar
The results file with every row not run yet, for the docs:
  python scripts/parse_ablation.py --work-dir runs/parse_ablation \\
      --results results/parsing/ablation-wsj-sample.json --plan-only
A smoke run of the whole path (minutes):
  python scripts/parse_ablation.py --work-dir runs/ablation_smoke --results runs/ablation_smoke/a.json \\
      --train-minutes 0 --max-steps 20 --beam-size 2 --model-option d_model=32 \\
      --model-option d_ff=64 --model-option num_heads=2 --model-option num_layers=1
"""
import argparse
import logging
import os
import shlex
import sys
from pathlib import Path

from transformer_tf.cli.arguments import non_negative_float, positive_int
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.flags import add_precision_flag
from transformer_tf.cli.model_flags import add_option_flags, resolve_option_flags
from transformer_tf.runtime import console
from transformer_tf.runtime.cpu import prefer_onednn_for_training


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--treebank", help="directory of .mrg files (default "
                                           "$TRANSFORMER_TF_DATA/ptb_wsj_sample)")
    parser.add_argument("--work-dir", required=True,
                        help="prepared treebanks and the rows' model directories")
    parser.add_argument("--results", default="results/parsing/ablation-wsj-sample.json",
                        help="results file, rewritten after every finished row (default "
                             "results/parsing/ablation-wsj-sample.json)")
    parser.add_argument("--rows", nargs="+", metavar="ROW",
                        help="the rows to run now, by key (default all; the keys are in "
                             "docs/parsing.md, e.g. engineered no_grammar)")
    parser.add_argument("--plan-only", action="store_true",
                        help="only write the results file (rows not run yet marked so)")
    parser.add_argument("--vocab-size", type=positive_int, default=4000,
                        help="shared vocabulary size (default 4000)")
    parser.add_argument("--train-minutes", type=non_negative_float, default=45.0,
                        help="each model's training time in minutes (default 45; 0: give "
                             "--max-steps)")
    parser.add_argument("--max-steps", type=positive_int, help="each model's training steps")
    parser.add_argument("--eval-every", type=positive_int, default=200,
                        help="steps between dev loss evaluations (default 200)")
    parser.add_argument("--beam-size", type=positive_int,
                        help="beam of the dev parse (default: the preset's, 21)")
    parser.add_argument("--max-extra-length", type=positive_int,
                        help="output up to input + this (default: the preset's, 300)")
    add_option_flags(parser, "override a ModelConfig field of every row (repeatable)",
                     "override a TrainingConfig field of every row (repeatable)")
    add_precision_flag(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    console.add_verbose_flag(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    prefer_onednn_for_training()
    command = " ".join(["python scripts/parse_ablation.py",
                        *map(shlex.quote, sys.argv[1:] if argv is None else argv)])
    with console.session(args.verbose):
        return run_command(_run, parser, args, command, verbose=args.verbose)


def _run(parser, args, command) -> int:
    from transformer_tf.data.corpora import DATA_ENV_VAR

    model_overrides, training_overrides = resolve_option_flags(parser, args)
    treebank = args.treebank
    if treebank is None:
        root = os.environ.get(DATA_ENV_VAR)
        if not root:
            parser.error(f"give --treebank or set {DATA_ENV_VAR} (its ptb_wsj_sample/ is used)")
        treebank = str(Path(root) / "ptb_wsj_sample")
    minutes = args.train_minutes or None
    if (minutes is None) == (args.max_steps is None):
        parser.error("give one training budget: --train-minutes M, or --train-minutes 0 "
                     "with --max-steps N")

    # Imported after parsing, so that --help answers without loading TensorFlow.
    from transformer_tf.jobs.parse_ablation import (
        ROW_KEYS,
        AblationOptions,
        run_ablation,
        write_plan,
    )

    options = AblationOptions(
        treebank_dir=treebank, work_dir=args.work_dir, results=args.results,
        rows=tuple(args.rows or ROW_KEYS), vocab_size=args.vocab_size, train_minutes=minutes,
        max_steps=args.max_steps, eval_every=args.eval_every,
        model_overrides=model_overrides, training_overrides=training_overrides,
        beam_size=args.beam_size, max_extra_length=args.max_extra_length,
        precision=args.precision, command=command, verbose=0 if args.quiet else 1)
    document = write_plan(options) if args.plan_only else run_ablation(options)
    print(f"{args.results}: {document['headline'].format(**document['values'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
