"""The parsing ablation (issue 41): the paper's configuration (parsing_paper), the engineered
parser (parsing_cpu, beyond the paper) and parsing_cpu without its tree grammar, without its
source cursor, without its copied leaves, and without all three; every row's dev F1 by
EVALB's COLLINS.prm rules, compared with the engineered row by paired bootstrap. The
results file lists every row (the ones not run yet marked so) and is rewritten after each
finished row; run the same command again to resume. See transformer_tf/jobs/parse_ablation.py.

The study (4 trainings of 45 minutes for its six rows; parsing_paper's d_model 1024 trains
few steps in that time), its results in runs/parse_ablation/ablation.json:
  python scripts/parse_ablation.py --work-dir runs/parse_ablation
Some rows now, the others later (the same --work-dir and --results):
  python scripts/parse_ablation.py --work-dir runs/parse_ablation --rows engineered no_grammar
The results file with every row not run yet, for the docs (a file under results/ is one
to commit, as results/parsing/ablation-wsj-sample-avx512bf16.json is):
  python scripts/parse_ablation.py --work-dir runs/parse_ablation \\
      --results results/parsing/NAME.json --plan-only
A smoke run of the whole path (minutes):
  python scripts/parse_ablation.py --work-dir runs/ablation_smoke --results runs/ablation_smoke/a.json \\
      --train-minutes 0 --max-steps 20 --beam-size 2 --model-option d_model=32 \\
      --model-option d_ff=64 --model-option num_heads=2 --model-option num_layers=1
"""
import argparse
import logging
import os
import sys
from pathlib import Path

from transformer_tf.cli.arguments import add_version_flag, command_as_run
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.flags import (
    add_flag,
    add_precision_flag,
    add_quiet_flag,
    add_search_flags,
)
from transformer_tf.cli.model_flags import add_option_flags, resolve_option_flags
from transformer_tf.runtime import console
from transformer_tf.runtime.training_process import prepare_for_training


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(parser, "treebank")
    add_flag(parser, "work_dir", required=True,
             help="prepared treebanks and the rows' model directories")
    add_flag(parser, "results",
             help="results file, rewritten after every finished row; a study continues the "
                  "rows it holds (default WORK_DIR/ablation.json; a file under results/ "
                  "is one to commit)")
    parser.add_argument("--rows", nargs="+", metavar="ROW",
                        help="the rows to run now, by key (default all; the keys are in "
                             "docs/parsing.md, e.g. engineered no_grammar)")
    add_flag(parser, "plan_only",
             help="only write the results file (rows not run yet marked so)")
    add_flag(parser, "alongside")
    add_flag(parser, "vocab_size", default=4000, help="shared vocabulary size (default 4000)")
    add_flag(parser, "train_minutes", default=45.0,
             help="each model's training time in minutes (default 45; 0: give --max-steps)")
    add_flag(parser, "max_steps", help="each model's training steps")
    add_flag(parser, "eval_every", default=200,
             help="steps between dev loss evaluations (default 200)")
    add_search_flags(parser, "each row's preset's: beam 21, input + 300", length=True,
                     alpha=False, purpose="the dev parse")
    add_option_flags(parser, "override ModelConfig fields of every row (repeatable)",
                     "override TrainingConfig fields of every row (repeatable)")
    add_precision_flag(parser)
    add_quiet_flag(parser)
    console.add_verbose_flag(parser)
    add_version_flag(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    prepare_for_training()
    command = command_as_run("python scripts/parse_ablation.py", argv)
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
    results = args.results or str(Path(args.work_dir) / "ablation.json")
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
    from transformer_tf.training.precision import resolve_precision

    options = AblationOptions(
        treebank_dir=treebank, work_dir=args.work_dir, results=results,
        rows=tuple(args.rows or ROW_KEYS), vocab_size=args.vocab_size, train_minutes=minutes,
        max_steps=args.max_steps, eval_every=args.eval_every,
        model_overrides=model_overrides, training_overrides=training_overrides,
        beam_size=args.beam_size, max_extra_length=args.max_extra_length,
        # Resolved before the study records it: the rows' time budget depends on it.
        precision=resolve_precision(args.precision)[0], command=command,
        verbose=0 if args.quiet else 1,
        alongside=args.alongside)
    document = write_plan(options) if args.plan_only else run_ablation(options)
    print(f"{results}: {document['headline'].format(**document['values'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
