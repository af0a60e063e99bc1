"""The main job: Multi30k En->De end to end on this machine (the README's first command).

Prepares the shared BPE from the local corpus ($TRANSFORMER_TF_DATA/multi30k) or the
download, trains the preset for a time budget, averages the last checkpoints, chooses
among the latest, the averaged and the best checkpoint, then the beam size and alpha, on
the dev set, translates test 2016 with beam search, scores it with sacreBLEU (and the
tokenized BLEU variants), exports a SavedModel to saved_models/, translates a few
sentences through it, and prints where everything went. --train-minutes is the run's budget, not each invocation's: running
it again resumes the run from its last checkpoint and trains only what is left of the
budget (a killed run finishes its budget; a finished run is evaluated and exported again
without training). Give a larger --train-minutes to train a run longer.

Examples:
  python scripts/main_job.py                                # 60 min training, En->De
  python scripts/main_job.py --model convs2s                # the same with ConvS2S
  python scripts/main_job.py --tgt fr --train-minutes 120   # En->Fr, two hours
  python scripts/main_job.py --epochs 30 --train-minutes 0  # an epoch budget instead
  python scripts/main_job.py --recipe planned               # the recipe planned for the budget
  python scripts/main_job.py --early-stopping 4             # stop once dev BLEU stalls
"""
import argparse
import logging

from transformer_tf.cli.arguments import (
    add_version_flag,
    positive_int,
)
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.flags import (
    add_early_stopping_flag,
    add_flag,
    add_precision_flag,
    add_quiet_flag,
    add_recipe_flag,
    add_search_flags,
)
from transformer_tf.cli.model_flags import (
    add_model_flags,
    dump_config,
    resolve_model_flags,
)
from transformer_tf.runtime import console
from transformer_tf.runtime.training_process import prepare_for_training


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(parser, "dataset", choices=("multi30k", "wmt14"), default="multi30k",
             help="corpus (default multi30k; wmt14 through TFDS, for GPUs)")
    add_flag(parser, "source_language", default="en", help="source language (default en)")
    add_flag(parser, "target_language", default="de", help="target language (default de; fr works)")
    add_flag(parser, "vocab_size", default=8000,
             help="shared BPE vocabulary size (default 8000; paper 37000 for WMT)")
    add_flag(parser, "subword", default="bpe",
             help="shared subword vocabulary: sentencepiece BPE (default) or tensorflow-text word "
                  "pieces (the paper's En-Fr setup)")
    add_flag(parser, "data_dir",
             help="where the raw corpus is (default: $TRANSFORMER_TF_DATA, else download)")
    add_flag(parser, "work_dir",
             help="where data/, model/ and results go (default runs/<dataset>_<src>_<tgt>, plus "
                  "_<preset> for a preset other than multi30k)")
    add_model_flags(parser)
    add_flag(parser, "train_minutes", default=60.0,
             help="the run's training time in minutes, in all invocations together (default 60; 0 "
                  "= no time limit, then give --epochs/--max-steps)")
    add_recipe_flag(parser)
    add_precision_flag(parser)
    add_flag(parser, "epochs", help="train this many epochs in total")
    add_flag(parser, "max_steps")
    add_flag(parser, "eval_every", default=500,
             help="steps between validation loss/BLEU (default 500)")
    add_early_stopping_flag(parser)
    add_flag(parser, "average_last",
             help="checkpoints to average, from the last 20%% of training; the average is kept "
                  "only if it beats the latest checkpoint on the dev set (default: the preset's, "
                  "5)")
    add_search_flags(parser, "chosen on the dev set among beam 1, 4 and 6 and alpha 0.6, 1.0 and 1.4")
    parser.add_argument("--test-limit", type=positive_int, help="decode only the first N test sentences")
    add_flag(parser, "dev_limit",
             help="choose the checkpoint (latest, averaged, best) and the beam size and alpha by "
                  "BLEU on the first N dev sentences only (default: all)")
    parser.add_argument("--export-name",
                        help="saved_models/NAME (default: the work directory's name)")
    parser.add_argument("--export-version", type=positive_int,
                        help="version (default: the next free one: TF Serving moves to it and "
                             "the earlier ones stay; an existing version is refused)")
    parser.add_argument("--saved-models-dir", default="saved_models",
                        help="root of exported models (default saved_models)")
    add_flag(parser, "validation_sentences", default=200,
             help="dev sentences for validation BLEU during training (default 200)")
    add_quiet_flag(parser)
    console.add_verbose_flag(parser)
    add_version_flag(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    prepare_for_training()
    with console.session(args.verbose):
        return run_command(_run, parser, args, verbose=args.verbose)


def _run(parser, args) -> int:

    # Imported after parsing, so that --help answers without loading TensorFlow.
    from transformer_tf.jobs.main_job import (
        MainJobOptions,
        format_summary,
        run_main_job,
    )

    choice = resolve_model_flags(parser, args)
    args.preset = choice.preset
    if args.dump_config:
        print(dump_config(choice, vocab_size=args.vocab_size, precision=args.precision))
        return 0
    minutes = args.train_minutes or None  # 0: no time limit (never negative: the flag's type)
    if minutes is None and args.epochs is None and args.max_steps is None:
        parser.error("--train-minutes 0 needs --epochs or --max-steps")
    if args.early_stopping is not None and args.validation_sentences == 0:
        parser.error("--early-stopping needs dev BLEU: --validation-sentences must be above 0")
    options = MainJobOptions(
        dataset=args.dataset, source_language=args.src, target_language=args.tgt,
        vocab_size=args.vocab_size, subword=args.subword, data_dir=args.data_dir,
        work_dir=args.work_dir,
        preset=args.preset, train_minutes=minutes, epochs=args.epochs,
        max_steps=args.max_steps, eval_every=args.eval_every, average_last=args.average_last,
        beam_size=args.beam_size, alpha=args.alpha, test_limit=args.test_limit,
        dev_limit=args.dev_limit, export_name=args.export_name, export_version=args.export_version,
        saved_models_dir=args.saved_models_dir,
        model_overrides=choice.model_overrides, training_overrides=choice.training_overrides,
        decoding_overrides=choice.decoding_overrides,
        validation_sentences=args.validation_sentences, precision=args.precision,
        verbose=0 if args.quiet else 1, recipe=args.recipe,
        early_stopping=args.early_stopping)
    summary = run_main_job(options)
    print(format_summary(summary))
    return 0

