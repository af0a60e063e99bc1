"""Translate stdin to stdout, one sentence per line (order kept; empty lines stay empty).

From an exported SavedModel (--model) or a training run (--model-dir, averaged checkpoint
if present). Sentences are batched by length; a progress bar goes to stderr. Inputs longer
than the model's positions are truncated, with a warning naming the line.

Examples:
  python scripts/translate.py --model saved_models/en_de/1 < test.en > test.hyp.de
  python scripts/translate.py --model-dir runs/en_de/model --n-best 4 < in.txt
"""
import argparse
import logging
import sys

from transformer_tf.cli.arguments import (
    add_version_flag,
    non_negative_int,
    positive_int,
)
from transformer_tf.cli.errors import run_command
from transformer_tf.config import STOPPING_RULES
from transformer_tf.runtime import console


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="SavedModel directory (saved_models/NAME/VERSION)")
    source.add_argument("--model-dir", help="training run directory")
    parser.add_argument("--checkpoint", help="with --model-dir: checkpoint prefix to use")
    parser.add_argument("--beam-size", type=positive_int,
                        help="beam size (default: the model's, 4); 1 is greedy")
    parser.add_argument("--alpha", type=float, help="length penalty exponent (default 0.6)")
    parser.add_argument("--max-extra-length", type=non_negative_int,
                        help="output length limit = input length + this (default 50)")
    parser.add_argument("--stopping", choices=STOPPING_RULES,
                        help="when a sentence's beam search ends (default: the model's, "
                             "exact); k_finished: once beam-size hypotheses have finished "
                             "(faster; can miss a better, longer output)")
    parser.add_argument("--batch-size", type=positive_int, default=64, help="sentences per batch")
    parser.add_argument("--n-best", type=positive_int, default=1,
                        help="print the N best hypotheses per sentence as "
                             "'LINE ||| translation ||| score' lines (N <= beam size)")
    parser.add_argument("--scores", action="store_true",
                        help="append a tab and the score to each translation")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    console.add_verbose_flag(parser)
    add_version_flag(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    with console.session(args.verbose):
        return run_command(_run, args, verbose=args.verbose)


def _run(args) -> int:

    # Imported after parsing, so that --help answers without loading TensorFlow.
    from transformer_tf.data.textio import strip_newline
    from transformer_tf.inference.batch import load_translator, translate_lines

    if args.model_dir and not args.checkpoint:
        from transformer_tf.inference.loading import default_checkpoint
        path, why = default_checkpoint(args.model_dir)
        print(f"checkpoint: {path} ({why})", file=sys.stderr)
    translator = load_translator(
        model=args.model, model_dir=args.model_dir, checkpoint=args.checkpoint,
        beam_size=args.beam_size, alpha=args.alpha, max_extra_length=args.max_extra_length,
        n_best=args.n_best, stopping=args.stopping)
    # Lines end at "\n" only (as for the corpus reader and evaluate.py), so N input lines
    # give N output lines; invalid UTF-8 becomes U+FFFD rather than an error.
    lines = [strip_newline(raw).decode("utf-8", errors="replace") for raw in sys.stdin.buffer]
    translations, scores = translate_lines(translator, lines, args.batch_size,
                                           progress=not args.quiet)
    out = sys.stdout
    for number, (hypotheses, row_scores) in enumerate(zip(translations, scores)):
        if args.n_best > 1:
            for text, score in zip(hypotheses, row_scores):
                out.write(f"{number} ||| {text} ||| {score:.4f}\n")
        elif args.scores:
            out.write(f"{hypotheses[0]}\t{row_scores[0]:.4f}\n")
        else:
            out.write(hypotheses[0] + "\n")
    out.flush()
    return 0

