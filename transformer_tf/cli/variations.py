"""The paper's model variations (Table 3): every row trained for the same budget and scored
on the development set; resumable. See transformer_tf/jobs/variation_rows.py for the rows.

  python scripts/variations.py --data runs/multi30k_en_de/data --budget-minutes 12 \\
      --out runs/variations                           # all rows around the multi30k preset
  python scripts/variations.py --count-only           # parameter column at the paper's scale
  python scripts/variations.py --plan informative --data runs/multi30k_en_de/data \
      --out runs/table3                               # the paper's directions, with verdicts

--plan informative trains the rows of INFORMATIVE_PLAN (transformer_tf/jobs/variation_rows.py):
groups A-E with fewer values, every row's learning rate scaled to peak where the base
row's schedule does (multi30k: 1.98e-3), 3,000 steps per row, the base row with three
seeds; the table ends with a verdict per row (reproduced, not reproduced, within the base
seeds' noise). --rows, --max-steps, --budget-minutes, --eval-every and
--peak-learning-rate still override it.

OUT/results.json is the study in the results/ format (results/README.md): copy it to
results/table3/ to render it in the docs (the copy is a --results file), or give
--results results/table3/NAME.json to have it written there after every row, with each
row's own result: commit that file and the study continues in a fresh clone or on another
machine, keeping its rows (--plan-only rewrites that file and the tables from them,
training nothing).

The same command started twice on one --out, each pinned to its own core (taskset -c 0,
taskset -c 1) with TF_NUM_INTRAOP_THREADS=1, trains the study two rows at a time: each
process takes the rows the other does not hold.

--model-option and --training-option change the base before the rows are derived from it
(e.g. a smaller batch and a shorter warm-up so that a short budget is not spent in the
warm-up); a study directory remembers its settings and refuses to resume with others.
"""
import argparse
import logging
import sys

from transformer_tf.cli.arguments import (
    add_version_flag,
    command_as_run,
    positive_float,
    positive_int,
)
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.flags import add_flag, add_precision_flag, add_quiet_flag
from transformer_tf.cli.model_flags import add_option_flags, resolve_option_flags
from transformer_tf.jobs.variation_rows import INFORMATIVE_PLAN, PLANS, ROW_GROUPS
from transformer_tf.presets import PRESET_NAMES
from transformer_tf.runtime import console
from transformer_tf.runtime.training_process import prepare_for_training


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(parser, "data")
    add_flag(parser, "out", help="study directory: rows/, variations.md, variations.json "
                                 "(new, empty, or this study's: one holding other files is "
                                 "refused)")
    parser.add_argument("--base", default="multi30k", choices=PRESET_NAMES,
                        help="Transformer preset the rows vary around (default multi30k)")
    parser.add_argument("--plan", default="full", choices=PLANS,
                        help="full: the paper's rows, scaled; informative: fewer rows at the "
                             "base model's peak rate, three base seeds, verdicts (default full)")
    parser.add_argument("--rows",
                        help=f"comma-separated groups of {','.join(ROW_GROUPS)} (default all "
                             "of the plan)")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--budget-minutes", type=positive_float, help="training minutes per row")
    add_flag(budget, "max_steps", help="training steps per row")
    add_option_flags(parser, "change the base model before the rows are derived, e.g. "
                             "num_layers=2 (repeatable)",
                     "training change shared by every row, e.g. tokens_per_batch=2048 "
                     "(repeatable)")
    add_flag(parser, "results",
             help="a results file (e.g. results/table3/NAME.json) that also keeps "
                  "each finished row: a study continued in a fresh clone or on another "
                  "machine keeps the rows it holds (an existing file must be this "
                  "study's: any other is refused, not replaced)")
    add_flag(parser, "plan_only",
             help="train nothing: write the tables and the results file from the rows "
                  "finished before (the others marked not trained yet)")
    add_flag(parser, "alongside")
    parser.add_argument("--base-seeds", type=positive_int, metavar="N",
                        help="train the base row N times (its preset's seed, then 2, 3, ...): "
                             "the spread of their dev perplexities is the verdicts' noise "
                             "(default: the plan's, informative 3, full 1); a study resumed "
                             "with more seeds keeps its rows and trains the new seeds")
    add_flag(parser, "eval_every", default=None,
             help="steps between validations (default 500; informative plan 250)")
    parser.add_argument("--peak-learning-rate", type=positive_float, metavar="RATE",
                        help="scale every row's rate to peak at RATE (default: the full "
                             "plan keeps each row's own schedule; the informative plan "
                             "peaks where the base row's schedule does)")
    add_precision_flag(parser)
    parser.add_argument("--count-only", action="store_true",
                        help="print the parameter column at the paper's scale and exit")
    add_quiet_flag(parser)
    console.add_verbose_flag(parser)
    add_version_flag(parser)
    args = parser.parse_args(argv)
    plan = INFORMATIVE_PLAN if args.plan == "informative" else {}
    rows = args.rows or ",".join(plan.get("groups", ROW_GROUPS))
    groups = tuple(g for g in rows.split(",") if g)
    unknown = sorted(set(groups) - set(ROW_GROUPS))
    if unknown:
        parser.error(f"--rows: unknown group(s) {unknown}; choose from {','.join(ROW_GROUPS)}")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if not args.count_only:
        prepare_for_training()
    with console.session(args.verbose):
        command = command_as_run("transformer-tf-variations", argv)
        return run_command(_run, parser, args, groups, command, verbose=args.verbose)


def _run(parser, args, groups, command) -> int:
    from transformer_tf.jobs.variation_rows import (
        BASE_SCHEDULE_PEAK,
        count_rows,
        format_counts,
    )
    from transformer_tf.jobs.variations import (
        StudyMismatch,
        StudyOptions,
        base_schedule_peak,
        run_study,
    )

    if args.count_only:
        print(format_counts(count_rows(groups)), end="")
        return 0
    if not args.data or not args.out:
        parser.error("--data and --out are needed (or --count-only)")
    plan = INFORMATIVE_PLAN if args.plan == "informative" else {}
    max_steps = args.max_steps
    if args.budget_minutes is None and max_steps is None:
        if "max_steps" not in plan:
            parser.error("give --budget-minutes or --max-steps")
        max_steps = plan["max_steps"]
    model_overrides, training_overrides = resolve_option_flags(parser, args)
    training_overrides = {**plan.get("training", {}), **training_overrides}
    peak = args.peak_learning_rate or plan.get("peak_learning_rate")
    if peak == BASE_SCHEDULE_PEAK:
        peak = base_schedule_peak(args.base, model_overrides, training_overrides)
    options = StudyOptions(data_dir=args.data, out_dir=args.out, base_preset=args.base,
                           groups=groups, budget_minutes=args.budget_minutes,
                           max_steps=max_steps,
                           eval_every=args.eval_every or plan.get("eval_every", 500),
                           plan=args.plan, peak_learning_rate=peak,
                           extra_base_seeds=(tuple(range(2, args.base_seeds + 1))
                                             if args.base_seeds is not None
                                             else plan.get("extra_base_seeds", ())),
                           precision=args.precision, verbose=0 if args.quiet else 1,
                           model_overrides=model_overrides,
                           training_overrides=training_overrides, command=command,
                           results=args.results, alongside=args.alongside)
    try:
        run_study(options, plan_only=args.plan_only)
    except StudyMismatch as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(open(f"{args.out}/variations.md", encoding="utf-8").read(), end="")
    return 0

