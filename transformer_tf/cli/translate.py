"""Translate stdin to stdout, one sentence per line (order kept; empty lines stay empty).
Input is read a window of lines at a time (--window), batched by length, and its
translations are printed before the next window is read; typed at a terminal, each line
is translated as soon as it is entered.

From an exported SavedModel (--model) or a training run (--model-dir, averaged checkpoint
if present). Progress goes to stderr. Inputs longer than the model's positions are
truncated, with a warning naming the line.

Files of any size: --src FILE and --output FILE read lazily and write as they go, in
input order, with bounded memory; after a kill, --resume keeps the complete lines written
and translates the rest.

Examples:
  python scripts/translate.py --model saved_models/en_de/1 < test.en > test.hyp.de
  python scripts/translate.py --model-dir runs/en_de/model --n-best 4 < in.txt
  python scripts/translate.py --ensemble runs/seed1/model runs/seed2/model < in.txt
  python scripts/translate.py --model saved_models/en_de/1 --alignments --replace-unk < in.txt
  python scripts/translate.py --model saved_models/en_de/1 --src big.en --output big.de [--resume]
"""
import argparse
import logging
import sys

from transformer_tf.cli.arguments import (
    add_version_flag,
    positive_int,
)
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.flags import (
    add_flag,
    add_quiet_flag,
    add_search_flags,
    search_settings,
)
from transformer_tf.runtime import console


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    add_flag(source, "saved_model")
    add_flag(source, "model_dir")
    add_flag(source, "ensemble")
    add_flag(parser, "checkpoint")
    add_search_flags(parser, "the model's: chosen on the dev set by the main job, else the "
                             "preset's", length=True, stopping=True)
    add_flag(parser, "batch_size", default=64, help="sentences per batch")
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
    files = parser.add_argument_group("files (stdin and stdout otherwise)")
    add_flag(files, "source_file",
             help="read this file (.gz too) lazily instead of stdin: memory stays bounded "
                  "whatever its size")
    files.add_argument("--output", metavar="FILE",
                       help="write here instead of stdout, a window at a time (flushed and "
                            "synced to disk); an existing file is refused unless --resume")
    files.add_argument("--resume", action="store_true",
                       help="continue an --output an interrupted run left: its complete "
                            "lines are kept (a partial last line is cut) and the input lines "
                            "they translate are skipped; give the --n-best and --scores "
                            "that wrote it (a file in another format is refused)")
    add_flag(files, "window",
             help="input lines read and sorted by length together, their translations "
                  "written before the next are read (default: 16 x --batch-size)")
    add_quiet_flag(parser)
    console.add_verbose_flag(parser)
    add_version_flag(parser)
    args = parser.parse_args(argv)
    if args.ensemble and args.checkpoint:
        parser.error("--checkpoint: names one run's checkpoint; with --ensemble each run "
                     "uses its default checkpoint")
    if args.ensemble and (args.alignments or args.replace_unk):
        parser.error("--alignments and --replace-unk read one model's attention: give "
                     "--model or --model-dir, not --ensemble")
    if (args.alignments or args.replace_unk) and args.n_best > 1:
        parser.error("--alignments and --replace-unk need --n-best 1")
    if args.resume and not args.output:
        parser.error("--resume needs --output (the file to continue)")
    if (args.alignments or args.replace_unk) and (args.src or args.output):
        parser.error("--alignments and --replace-unk read stdin and write stdout: drop "
                     "--src/--output")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    with console.session(args.verbose):
        return run_command(_run, args, verbose=args.verbose)


def _run(args) -> int:

    # Imported after parsing, so that --help answers without loading TensorFlow.
    from transformer_tf.inference.batch import load_translator
    from transformer_tf.inference.loading import default_checkpoint, source_decoding
    from transformer_tf.inference.streaming import (
        OutputFormat,
        check_output,
        source_lines,
        counted_windows,
        translate_file,
        window_size,
    )

    output_format = OutputFormat(n_best=args.n_best, scores=args.scores)
    streaming = args.src is not None or args.output is not None
    # Before the model loads: an existing --output is refused or resumed at once.
    skip = check_output(args.src, args.output, args.resume, output_format) if streaming else 0
    if args.model and not args.quiet:
        from transformer_tf.inference.loading import read_export_info

        precision = read_export_info(args.model).get("precision", "float32")
        print(f"precision: {precision} (as exported)", file=sys.stderr)
    source = {"model": args.model, "model_dir": args.model_dir, "ensemble": args.ensemble}
    decoding = search_settings(args, source_decoding(**source), n_best=args.n_best)
    if not (args.model or args.checkpoint):
        for model_dir in args.ensemble or [args.model_dir]:
            path, why = default_checkpoint(model_dir)
            print(f"checkpoint: {path} ({why})", file=sys.stderr)
    translator = load_translator(**source, checkpoint=args.checkpoint, decoding=decoding,
                                 n_best=args.n_best)
    if streaming:
        translate_file(translator, args.src, args.output, skip=skip,
                       batch_size=args.batch_size, window=window_size(args.window, args.batch_size),
                       output_format=output_format, progress=not args.quiet)
        return 0
    aligner = None
    if args.alignments or args.replace_unk:
        from transformer_tf.inference.alignment import load_aligner

        aligner = load_aligner(args.model, args.model_dir, args.checkpoint,
                               args.alignment_layer)
    # Lines end at "\n" only (as for the corpus reader and evaluate.py), so N input lines
    # give N output lines; invalid UTF-8 becomes U+FFFD (a warning names the line).
    lines = source_lines(sys.stdin.buffer)
    typed = console.is_terminal(sys.stdin)  # by a person: answer each line at once
    if typed and not args.quiet:
        print("translating each line as it is entered; Ctrl-D ends", file=sys.stderr)
    # From a pipe, a window of lines at a time, batched by length and printed before the
    # next is read (memory bounded, output as it goes).
    for first, chunk in counted_windows(lines, window_size(args.window, args.batch_size, typed),
                                        verb="translated", progress=not (args.quiet or typed)):
        _print_translations(translator, aligner, args, output_format, chunk, first)
    return 0


def _print_translations(translator, aligner, args, output_format, lines,
                        first: int) -> None:
    """Translate `lines`, input lines `first`, `first` + 1, ... (from 0), and print them to
    stdout in `output_format`, with their alignments (--alignments) or unknown words
    replaced (--replace-unk) by `aligner`, then flush."""
    from transformer_tf.inference.batch import translate_lines

    translations, scores = translate_lines(translator, lines, args.batch_size,
                                           progress=False, first_line=first + 1)
    if aligner is not None:
        alignments = aligner.align(lines, [hypotheses[0] for hypotheses in translations])
        if args.replace_unk:
            translations = [[alignment.replaced_text()] for alignment in alignments]
    out = sys.stdout
    for index, (hypotheses, row_scores) in enumerate(zip(translations, scores)):
        line = output_format.format(first + index, hypotheses, row_scores)
        if args.alignments:  # (--n-best 1: one line)
            line = f"{line[:-1]}\t{alignments[index].pharaoh()}\n"
        out.write(line)
    out.flush()

