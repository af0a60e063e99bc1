"""Heads with a job, measured (issue 41; the paper's Figures 4-5): for Multi30k English
sentences with a possessive pronoun ("its", "their", "his", "her") and its antecedent
(nearest preceding noun of a small lexicon, transformer_tf/data/possessives.py), the share
whose strongest encoder self-attention goes to the antecedent, for every layer and head,
against the best fixed-offset baseline; and a figure of the best head beside the head of
its layer with the lowest share. See transformer_tf/jobs/pronoun_heads.py.

The measurement of a 6-layer model (docs/attention.md gives its training budget):
  python scripts/pronoun_heads.py --model-dir runs/attention6/model \\
      --results runs/attention6/pronoun-heads.json --figure-dir runs/attention6/figures
The cases and the baseline alone, without a model:
  python scripts/pronoun_heads.py --baseline-only --results runs/pronoun-baseline.json

An existing --results file, and PNG files in --figure-dir, are refused before the model
runs (the figures' names depend on the heads found), unless --overwrite is given.

Needs matplotlib for the figure: pip install -e '.[viz]'.
"""
import argparse
import logging
import sys

from transformer_tf.cli.arguments import add_version_flag, command_as_run
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.flags import add_flag
from transformer_tf.data.corpora import SPLITS
from transformer_tf.runtime import console


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group()
    add_flag(source, "model_dir")
    add_flag(source, "saved_model", help="SavedModel directory written by scripts/export.py")
    add_flag(parser, "checkpoint")
    parser.add_argument("--baseline-only", action="store_true",
                        help="no model: only the cases and the positional baseline")
    add_flag(parser, "data_dir", help="where Multi30k is (default $TRANSFORMER_TF_DATA)")
    parser.add_argument("--splits", nargs="+", choices=SPLITS, default=["valid", "test"],
                        help="Multi30k splits searched for cases (default valid test)")
    add_flag(parser, "results", default="runs/pronoun-heads.json",
             help="results file (default runs/pronoun-heads.json)")
    parser.add_argument("--figure-dir", help="draw the two heads here (default: no figure)")
    add_flag(parser, "overwrite", help="replace an existing --results file and the PNG files "
                                       "in --figure-dir")
    add_flag(parser, "batch_size", default=32, help="sentences per forward pass (default 32)")
    console.add_verbose_flag(parser)
    add_version_flag(parser)
    args = parser.parse_args(argv)
    if args.baseline_only == bool(args.model_dir or args.model):
        parser.error("give --model-dir or --model, or --baseline-only")
    if args.baseline_only and args.figure_dir:
        parser.error("--figure-dir needs a model")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    command = command_as_run("python scripts/pronoun_heads.py", argv)
    with console.session(args.verbose):
        return run_command(_run, args, command, verbose=args.verbose)


def _run(args, command) -> int:
    # Imported after parsing, so that --help answers without loading TensorFlow.
    from transformer_tf.jobs.pronoun_heads import PronounHeadsOptions, measure

    if args.figure_dir:
        from transformer_tf.visualization.plots import check_matplotlib

        check_matplotlib()
    document = measure(PronounHeadsOptions(
        results=args.results, model_dir=args.model_dir, saved_model=args.model,
        checkpoint=args.checkpoint, data_dir=args.data_dir, splits=tuple(args.splits),
        figure_dir=args.figure_dir, baseline_only=args.baseline_only,
        batch_size=args.batch_size, overwrite=args.overwrite, command=command))
    print(f"{args.results}: {document['headline'].format(**document['values'])}")
    for path in document.get("figure", {}).get("files", []):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
