"""The preset's recipe against others at equal target tokens, on the dev set (issue 39): the
preset's recipe, the preset's with half its batch for twice the steps, the budget-aware
recipe (docs/training.md) and that recipe with the paper's decaying rate (--arms),
trained for each --steps budget (in steps of 4,096 tokens) with each --seed, every run's
latest and averaged checkpoints scored with beam search on the dev set. The results
file is rewritten after each finished run; run the same command again to resume a killed
study. See transformer_tf/jobs/recipe_study.py.

The full study (16 runs, 24,000 training steps, 8,000 of them of half a batch; the
preset's arms continue their 1,000-step runs to 2,000):
  python scripts/prepare_data.py --dataset multi30k --src en --tgt de --vocab-size 8000 \\
      --out runs/multi30k_en_de/data
  python scripts/recipe_study.py --data runs/multi30k_en_de/data --work-dir runs/recipe_study \\
      --results results/main_job/recipe_study.json
A smoke test of the whole path (minutes):
  python scripts/recipe_study.py --data runs/multi30k_en_de/data --work-dir /tmp/recipe_smoke \\
      --results /tmp/recipe_smoke/recipe_study.json --steps 20 --seeds 1 --dev-limit 20
"""
import argparse
import logging

from transformer_tf.cli.arguments import (
    command_as_run,
    add_version_flag,
    non_negative_int,
    positive_int,
)
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.flags import add_flag, add_precision_flag, add_quiet_flag
from transformer_tf.jobs.recipe_study import ARMS  # plain Python: no TensorFlow yet
from transformer_tf.runtime import console
from transformer_tf.runtime.training_process import prepare_for_training


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(parser, "data", required=True)
    add_flag(parser, "work_dir", required=True, help="where the runs' model directories go")
    add_flag(parser, "results", default="results/main_job/recipe_study.json",
             help="results file, rewritten after every finished run (default "
                  "results/main_job/recipe_study.json)")
    add_flag(parser, "preset", default="multi30k",
             help="the Transformer preset every arm starts from (default multi30k)")
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS),
                        help="what to train, in this order within a budget: preset (its own "
                             "recipe), preset-half-batch (half its tokens per batch, twice "
                             "the steps), planned (the budget-aware recipe), "
                             "planned-inverse-sqrt (that recipe with the paper's decaying "
                             "rate); default all")
    parser.add_argument("--steps", type=positive_int, nargs="+", default=[1000, 2000],
                        help="step budgets (default 1000 2000)")
    parser.add_argument("--seeds", type=non_negative_int, nargs="+", default=[1, 2],
                        help="seeds (default 1 2)")
    add_flag(parser, "eval_every", default=500,
             help="steps between validation losses (default 500)")
    add_precision_flag(parser)
    add_flag(parser, "dev_limit",
             help="dev sentences decoded for BLEU (default: all; the NLL is always the whole "
                  "dev set's)")
    add_quiet_flag(parser)
    console.add_verbose_flag(parser)
    add_version_flag(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    prepare_for_training()
    command = command_as_run("python scripts/recipe_study.py", argv)
    with console.session(args.verbose):
        return run_command(_run, args, command, verbose=args.verbose)


def _run(args, command) -> int:
    from transformer_tf.jobs.recipe_study import RecipeStudyOptions, run_recipe_study
    from transformer_tf.training.precision import resolve_precision

    document = run_recipe_study(RecipeStudyOptions(
        data_dir=args.data, work_dir=args.work_dir, results=args.results, preset=args.preset,
        arms=tuple(args.arms), steps=tuple(args.steps), seeds=tuple(args.seeds),
        eval_every=args.eval_every, dev_limit=args.dev_limit,
        precision=resolve_precision(args.precision)[0],  # recorded as it resolved here
        command=command,
        verbose=0 if args.quiet else 1))
    print(f"{args.results}: {document['headline'].format(**document['values'])}")
    return 0
