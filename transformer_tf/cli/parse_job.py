"""The parsing job (paper section 6.3): Penn Treebank WSJ trees end to end on this machine.

Prepares the treebank (default: the sample in $TRANSFORMER_TF_DATA/ptb_wsj_sample; a full
treebank directory of .mrg files gets the standard section split), trains the preset
within a time budget, averages the final checkpoints (kept only if better on dev), parses
dev and test with the preset's beam search (beam 21, output up to input + 300;
`parsing_paper`, also called `parsing`: the paper's alpha 0.3, no grammar, XX leaves;
`parsing_cpu`, beyond the paper: alpha 5.0, the tree grammar, word leaves, the source
cursor),
scores them with EVALB's COLLINS.prm rules, exports a SavedModel that parses sentences
into trees, and parses a few examples through it. Running it again resumes training.

Examples:
  python scripts/parse_job.py --train-minutes 45
  python scripts/parse_job.py --treebank /data/ptb/wsj --preset parsing_paper --work-dir runs/wsj
"""
import argparse
import json
import logging
import os
import sys
from pathlib import Path

from transformer_tf.cli.arguments import (
    add_version_flag,
)
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.flags import (
    add_flag,
    add_precision_flag,
    add_quiet_flag,
    add_search_flags,
)
from transformer_tf.cli.model_flags import (
    add_config_flags,
    add_option_flags,
    dump_config,
    resolve_model_flags,
)
from transformer_tf.data.linearise import LEAVES
from transformer_tf.presets.parsing import DEFAULT_PARSING_PRESET
from transformer_tf.runtime import console
from transformer_tf.runtime.training_process import prepare_for_training


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(parser, "treebank")
    add_flag(parser, "work_dir", default="runs/ptb_parsing",
             help="where data/, model/, trees and summary.json go (default runs/ptb_parsing)")
    add_flag(parser, "preset",
             help=f"model preset (default {DEFAULT_PARSING_PRESET}, beyond the paper, or a "
                  "--config file's; parsing_paper or parsing: the paper's configuration)")
    add_flag(parser, "vocab_size", default=4000,
             help="shared vocabulary size (default 4000; paper 16k on the full WSJ)")
    add_flag(parser, "subword", default="bpe",
             help="bpe (sentencepiece, default) or wordpiece (words whole where the vocabulary "
                  "holds them, like the paper's word vocabulary)")
    parser.add_argument("--leaves", choices=LEAVES,
                        help="what stands for a word in the target tree: words (the words "
                             "themselves, copied from the input under the tree grammar; "
                             "parsing_cpu's) or slot (one XX per word, as Vinyals et al. and "
                             "the paper; parsing_paper's). Default: the preset's")
    add_flag(parser, "train_minutes", default=45.0,
             help="the run's training time in minutes, in all invocations together (default 45; 0 "
                  "= none, then give --epochs or --max-steps)")
    add_flag(parser, "epochs", help="train this many epochs in total")
    add_flag(parser, "max_steps")
    add_flag(parser, "eval_every", default=200,
             help="steps between dev loss evaluations (default 200)")
    add_flag(parser, "average_last", help="checkpoints to average (preset's)")
    add_search_flags(parser, "the preset's", length=True)
    add_flag(parser, "grammar",
             help="output constraint (default: preset's, tree: well-formed trees with every input "
                  "word in place; none: unconstrained, repaired afterwards)")
    add_flag(parser, "batch_size", default=32, help="sentences per decode batch")
    parser.add_argument("--saved-model-dir",
                        help="export here, an empty or new NAME/VERSION directory (default "
                             "WORK/saved_model/<the next free version>)")
    add_option_flags(parser, "override ModelConfig fields (repeatable)",
                     "override TrainingConfig fields (repeatable)")
    add_config_flags(parser)
    add_precision_flag(parser)
    add_quiet_flag(parser)
    console.add_verbose_flag(parser)
    add_version_flag(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    prepare_for_training()
    with console.session(args.verbose):
        return run_command(_run, parser, args, verbose=args.verbose)


def _run(parser, args) -> int:
    logging.getLogger("absl").setLevel(logging.WARNING)

    from transformer_tf.data.corpora import DATA_ENV_VAR

    choice = resolve_model_flags(parser, args, DEFAULT_PARSING_PRESET)
    if args.dump_config:
        from transformer_tf.data.prepared_reader import METADATA_FILE

        data_dir = Path(args.work_dir) / "data"  # the job's prepared treebank, once there
        print(dump_config(choice, data_dir if (data_dir / METADATA_FILE).exists() else None,
                          vocab_size=args.vocab_size, precision=args.precision))
        return 0
    treebank = args.treebank
    if treebank is None:
        root = os.environ.get(DATA_ENV_VAR)
        if not root:
            parser.error(f"give --treebank or set {DATA_ENV_VAR} (its ptb_wsj_sample/ is used)")
        treebank = str(Path(root) / "ptb_wsj_sample")
    minutes = args.train_minutes if args.train_minutes and args.train_minutes > 0 else None
    if minutes is None and args.epochs is None and args.max_steps is None:
        parser.error("--train-minutes 0 needs --epochs or --max-steps")

    # Imported after parsing, so that --help answers without loading TensorFlow.
    from transformer_tf.data.treebank_reader import TreebankError
    from transformer_tf.jobs.parse_job import ParseJobOptions, run_parse_job

    options = ParseJobOptions(
        treebank_dir=treebank, work_dir=args.work_dir, preset=choice.preset,
        vocab_size=args.vocab_size, subword=args.subword, leaves=args.leaves,
        train_minutes=minutes, max_steps=args.max_steps,
        epochs=args.epochs, eval_every=args.eval_every,
        model_overrides=choice.model_overrides, training_overrides=choice.training_overrides,
        decoding_overrides=choice.decoding_overrides, average_last=args.average_last,
        beam_size=args.beam_size, alpha=args.alpha, max_extra_length=args.max_extra_length,
        grammar=args.grammar, batch_size=args.batch_size, saved_model_dir=args.saved_model_dir,
        precision=args.precision, verbose=0 if args.quiet else 1)
    try:
        summary = run_parse_job(options)
    except TreebankError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    brief = {split: {key: summary[split]["evalb"]["all"][key]
                     for key in ("f1", "recall", "precision", "complete_match",
                                 "error_sentences")}
             | {"repairs": summary[split]["repairs"]["total"]}
             for split in ("dev", "test")}
    print("\n==> summary (also in " + str(Path(args.work_dir) / "summary.json") + ")")
    print(json.dumps({"train_steps": summary["train_steps"],
                      "train_minutes": round(summary["train_seconds_this_invocation"] / 60, 1),
                      "chosen": summary["chosen"], **brief}, indent=2))
    return 0

