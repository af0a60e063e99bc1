"""Translate stdin to stdout, one sentence per line (order kept; empty lines stay empty).

From an exported SavedModel (--model) or a training run (--model-dir, averaged checkpoint
if present). Sentences are batched by length; a progress bar goes to stderr. Inputs longer
than the model's positions are truncated, with a warning naming the line.

Examples:
  python scripts/translate.py --model saved_models/en_de/1 < test.en > test.hyp.de
  python scripts/translate.py --model-dir runs/en_de/model --n-best 4 < in.txt
  python scripts/translate.py --ensemble runs/seed1/model runs/seed2/model < in.txt
  python scripts/translate.py --model saved_models/en_de/1 --alignments --replace-unk < in.txt
"""
import argparse
import logging
import sys

from transformer_tf.cli.arguments import positive_int
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.flags import add_quiet_flag, add_search_flags
from transformer_tf.runtime import console


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="SavedModel directory (saved_models/NAME/VERSION)")
    source.add_argument("--model-dir", help="training run directory")
    source.add_argument("--ensemble", nargs="+", metavar="MDIR",
                        help="training run directories decoded together (the mean of their "
                             "log-probabilities at every step), each at its default "
                             "checkpoint; they must share one tokenizer; the first run's "
                             "search settings")
    parser.add_argument("--checkpoint", help="with --model-dir: checkpoint prefix to use")
    add_search_flags(parser, "the model's", length=True, stopping=True)
    parser.add_argument("--batch-size", type=positive_int, default=64, help="sentences per batch")
    parser.add_argument("--n-best", type=positive_int, default=1,
                        help="print the N best hypotheses per sentence as "
                             "'LINE ||| translation ||| score' lines (N <= beam size)")
    parser.add_argument("--scores", action="store_true",
                        help="append a tab and the score to each translation")
    parser.add_argument("--alignments", action="store_true",
                        help="append a tab and the word alignment of each translation, "
                             "Pharaoh 'i-j' pairs (source word i, target word j, from 0), "
                             "from the encoder-decoder attention (docs/scoring.md)")
    parser.add_argument("--alignment-layer", type=positive_int,
                        help="the attention layer the alignments read, from 1 (default: "
                             "the penultimate, layer N-1 of N)")
    parser.add_argument("--replace-unk", action="store_true",
                        help="replace each unknown word of a translation (the vocabulary's "
                             "UNK, written ⁇ or <unk>) by the source word aligned with it")
    add_quiet_flag(parser)
    console.add_verbose_flag(parser)
    args = parser.parse_args(argv)
    if args.ensemble and args.checkpoint:
        parser.error("--checkpoint: names one run's checkpoint; with --ensemble each run "
                     "uses its default checkpoint")
    if args.ensemble and (args.alignments or args.replace_unk):
        parser.error("--alignments and --replace-unk read one model's attention: give "
                     "--model or --model-dir, not --ensemble")
    if (args.alignments or args.replace_unk) and args.n_best > 1:
        parser.error("--alignments and --replace-unk need --n-best 1")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    with console.session(args.verbose):
        return run_command(_run, args, verbose=args.verbose)


def _run(args) -> int:

    # Imported after parsing, so that --help answers without loading TensorFlow.
    from transformer_tf.data.textio import strip_newline
    from transformer_tf.inference.batch import load_translator, translate_lines

    if not (args.model or args.checkpoint):
        from transformer_tf.inference.loading import default_checkpoint
        for model_dir in args.ensemble or [args.model_dir]:
            path, why = default_checkpoint(model_dir)
            print(f"checkpoint: {path} ({why})", file=sys.stderr)
    translator = load_translator(
        model=args.model, model_dir=args.model_dir, ensemble=args.ensemble,
        checkpoint=args.checkpoint,
        beam_size=args.beam_size, alpha=args.alpha, max_extra_length=args.max_extra_length,
        n_best=args.n_best, stopping=args.stopping)
    # Lines end at "\n" only (as for the corpus reader and evaluate.py), so N input lines
    # give N output lines; invalid UTF-8 becomes U+FFFD rather than an error.
    lines = [strip_newline(raw).decode("utf-8", errors="replace") for raw in sys.stdin.buffer]
    translations, scores = translate_lines(translator, lines, args.batch_size,
                                           progress=not args.quiet)
    if args.alignments or args.replace_unk:
        from transformer_tf.inference.alignment import load_aligner

        aligner = load_aligner(args.model, args.model_dir, args.checkpoint,
                               args.alignment_layer)
        alignments = aligner.align(lines, [hypotheses[0] for hypotheses in translations])
        if args.replace_unk:
            translations = [[alignment.replaced_text()] for alignment in alignments]
    out = sys.stdout
    for number, (hypotheses, row_scores) in enumerate(zip(translations, scores)):
        if args.n_best > 1:
            for text, score in zip(hypotheses, row_scores):
                out.write(f"{number} ||| {text} ||| {score:.4f}\n")
            continue
        fields = [hypotheses[0]]
        if args.scores:
            fields.append(f"{row_scores[0]:.4f}")
        if args.alignments:
            fields.append(alignments[number].pharaoh())
        out.write("\t".join(fields) + "\n")
    out.flush()
    return 0

