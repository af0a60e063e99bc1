#!/usr/bin/env python
"""Table 2, budget-fair (issue 41): the Transformer (`multi30k`) and ConvS2S
(`convs2s_multi30k`) on the same prepared data, each with its own paper schedule, for the
same training time (--minutes) and for the same target tokens (--passes over the data),
every --seed; dev BLEU/NLL logged during training draws the figure (dev BLEU against
minutes and passes); the results file has test BLEU, training FLOPs and tokens/s. Both
are rewritten after each finished run; run the same command again to resume a killed
study. See transformer_tf/jobs/table2_study.py.

Both families train in the precision the main job picks (--precision auto: mixed_bfloat16
on a CPU with native bfloat16, float32 on others), resolved once and recorded: a study
resumed where it resolves otherwise is refused, as its time arm would not compare.

The study (8 runs; about 13 hours on a quiet 2-core AVX2 CPU, docs/convs2s.md):
  python bench/table2_study.py --data runs/multi30k_en_de/data --work-dir runs/table2
The same study in about half the time, one process per family, each on its own core
(the two families then share the machine alike; the results file says so):
  taskset -c 0 python bench/table2_study.py --data runs/multi30k_en_de/data \
      --work-dir runs/table2 --threads 1 --train-only transformer &
  taskset -c 1 python bench/table2_study.py --data runs/multi30k_en_de/data \
      --work-dir runs/table2 --threads 1 --train-only convs2s
A smoke test of the whole path (minutes):
  python bench/table2_study.py --data runs/multi30k_en_de/data --work-dir runs/table2_smoke \\
      --results runs/table2_smoke/table2.json --figure runs/table2_smoke/curves.png --minutes 0.5 \\
      --passes 0.05 --seeds 1 --eval-every 10 --validation-sentences 8 --test-limit 16
"""
import argparse
import logging

import common
import model_flops

from transformer_tf.cli.arguments import command_as_run, positive_float, positive_int
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.launch import end_process
from transformer_tf.cli.flags import add_flag, add_precision_flag
from transformer_tf.runtime import console
from transformer_tf.runtime.training_process import prepare_for_training


def flops_per_target_token(preset_name: str, vocab_size: int) -> float:
    """Training FLOPs per target token of the preset's model at this vocabulary, counted
    from the graph by bench/model_flops.py (the rule every family shares)."""
    from transformer_tf.models.registry import build_model
    from transformer_tf.presets import get_preset

    preset = get_preset(preset_name)
    model = build_model(preset.family, preset.model.replace(vocab_size=vocab_size))
    return model_flops.training_flops_per_target_token(model)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True,
                        help="prepared data directory (scripts/prepare_data.py)")
    parser.add_argument("--work-dir", required=True, help="where the runs' model directories go")
    parser.add_argument("--results",
                        help="results file, rewritten after every finished run (default "
                             "results/table2/budget-fair-<CPU kind>.json, e.g. "
                             "budget-fair-avx2.json)")
    parser.add_argument("--figure", default="docs/table2_curves.png",
                        help="PNG of dev BLEU during training, rewritten with the results; "
                             "a file already there is refused unless the results file "
                             "records it as this study's (a new study needs a new name)")
    parser.add_argument("--presets", nargs=2, default=["multi30k", "convs2s_multi30k"],
                        metavar=("TRANSFORMER", "CONVS2S"), help="the two families' presets")
    parser.add_argument("--arms", nargs="+", choices=("time", "tokens"),
                        default=["time", "tokens"], help="which budgets (default both)")
    parser.add_argument("--minutes", type=positive_float, default=90.0,
                        help="the time arm's training minutes per run (default 90)")
    parser.add_argument("--passes", type=positive_float, default=20.0,
                        help="the tokens arm's passes over the training data (default 20)")
    parser.add_argument("--seeds", type=positive_int, nargs="+", default=[1, 2])
    parser.add_argument("--eval-every", type=positive_int, default=200,
                        help="steps between dev evaluations, the curves' points (default 200)")
    parser.add_argument("--validation-sentences", type=positive_int, default=200,
                        help="dev sentences translated at each evaluation (default 200)")
    parser.add_argument("--test-limit", type=positive_int,
                        help="test sentences decoded (default: all)")
    parser.add_argument("--threads", type=positive_int, default=common.THREADS,
                        help=f"TensorFlow threads per run (default {common.THREADS}); part "
                             "of the study's settings, as the time arm depends on them")
    parser.add_argument("--train-only", choices=("transformer", "convs2s"),
                        help="train only this family's runs: two processes, one per family, "
                             "each pinned to its own core (taskset), with --threads 1, share "
                             "the work directory and the results file")
    add_precision_flag(parser)
    add_flag(parser, "alongside")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    console.add_verbose_flag(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    common.set_thread_env(args.threads)
    prepare_for_training()
    command = command_as_run("python bench/table2_study.py", argv)
    with console.session(args.verbose):
        return run_command(_run, args, command, verbose=args.verbose)


def _run(args, command) -> int:
    from transformer_tf.jobs.table2_study import Table2Options, run_table2_study
    from transformer_tf.presets import get_preset
    from transformer_tf.runtime.cpu import cpu_kind, read_cpu_flags
    from transformer_tf.training.precision import resolve_precision

    results = args.results or (
        f"results/table2/budget-fair-{cpu_kind(read_cpu_flags()).lower().replace('-', '')}.json")
    options = Table2Options(
        data_dir=args.data, work_dir=args.work_dir, results=results, figure=args.figure,
        presets=tuple(args.presets), arms=tuple(args.arms), minutes=args.minutes,
        passes=args.passes, seeds=tuple(args.seeds), eval_every=args.eval_every,
        validation_sentences=args.validation_sentences, test_limit=args.test_limit,
        command=command, verbose=0 if args.quiet else 1, threads=args.threads,
        alongside=args.alongside, precision=resolve_precision(args.precision)[0],
        train_only=None if args.train_only is None else tuple(
            p for p in args.presets if get_preset(p).family == args.train_only))
    # A results file of other settings (StudyMismatch), a figure of another study
    # (FigureInUse) or a wrong preset is a ValueError: run_command reports it as
    # "error: ..." with exit status 2.
    document = run_table2_study(options, flops_per_target_token=flops_per_target_token)
    print(f"{results}: {document['headline'].format(**document['values'])}")
    return 0


if __name__ == "__main__":
    end_process(main())
