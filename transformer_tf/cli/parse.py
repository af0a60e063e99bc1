"""Parse stdin to stdout: one whitespace-tokenised sentence per line in, one bracketed tree
(TOP root, XX as the tag of non-punctuation words) per line out; empty lines stay empty.
Input is read a window of lines at a time (sorted by length and batched together), whose
trees are printed before the next is read: memory stays bounded whatever the input's
size. Typed at a terminal, each line is parsed as soon as it is entered.

From an exported parsing SavedModel (--model; its in-graph serving_default, with the
search settings it was exported with) or a training run (--model-dir; averaged checkpoint
if present, search settings overridable). Repairs of ill-formed model outputs are counted
on stderr.

Examples:
  echo "Ms. Haag plays Elianti ." | python scripts/parse.py --model runs/ptb_parsing/saved_model/1
  python scripts/parse.py --model-dir runs/ptb_parsing/model --beam-size 4 < sentences.txt
"""
import argparse
import logging
import sys

from transformer_tf.cli.arguments import (
    add_version_flag,
)
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.flags import (
    SEARCH_FLAG_FIELDS,
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
    add_flag(source, "saved_model", help="parsing SavedModel directory")
    add_flag(source, "model_dir", help="parsing training run directory")
    add_flag(parser, "checkpoint")
    add_search_flags(parser, "the run's", length=True, purpose="with --model-dir")
    add_flag(parser, "grammar",
             help="with --model-dir: output constraint (default: the run's; tree: well-formed "
                  "trees with every input word in place; none: unconstrained, repaired "
                  "afterwards)")
    add_flag(parser, "batch_size", default=32, help="sentences per batch")
    add_flag(parser, "window",
             help="input lines read and sorted by length together, their trees printed "
                  "before the next are read (default: 16 x --batch-size)")
    add_quiet_flag(parser)
    console.add_verbose_flag(parser)
    add_version_flag(parser)
    args = parser.parse_args(argv)
    with console.session(args.verbose):
        return run_command(_run, parser, args, verbose=args.verbose)


def _run(parser, args) -> int:
    if args.model and any(getattr(args, field, None) is not None
                          for field in SEARCH_FLAG_FIELDS):
        parser.error("search settings can be changed only with --model-dir")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")

    from transformer_tf.data.linearise import RepairCounts
    from transformer_tf.inference.streaming import counted_windows, source_lines, window_size

    parse = _load_parse(args)  # (lines, number of the first from 1) -> (trees, repairs)
    typed = console.is_terminal(sys.stdin)  # by a person: answer each line at once
    if typed and not args.quiet:
        print("parsing each line as it is entered; Ctrl-D ends", file=sys.stderr)
    # Lines end at "\n" only, so N input lines give N trees; invalid UTF-8 becomes U+FFFD
    # (a warning names the line).
    lines = source_lines(sys.stdin.buffer)
    total, count = RepairCounts(), 0
    for first, chunk in counted_windows(lines, window_size(args.window, args.batch_size, typed),
                                        verb="parsed", progress=not (args.quiet or typed)):
        trees, repairs = parse(chunk, first + 1)
        sys.stdout.write("".join(tree + "\n" for tree in trees))
        sys.stdout.flush()
        total.add(repairs)
        count = first + len(chunk)
    print(f"repairs: {total.total} in {total.repaired_sentences} of {count} "
          f"sentences {total.as_dict()}", file=sys.stderr)
    return 0


def _load_parse(args):
    """(lines: list of str, the input line number of lines[0]) -> (trees, total
    RepairCounts), from --model or --model-dir."""
    if args.model:
        from transformer_tf.inference.parser import ExportedParser

        exported = ExportedParser(args.model, args.batch_size)
        return exported.parse
    from transformer_tf.inference.batch import load_translator
    from transformer_tf.inference.loading import source_decoding
    from transformer_tf.inference.parser import parse_lines

    decoding = search_settings(args, source_decoding(model_dir=args.model_dir))
    translator = load_translator(model_dir=args.model_dir, checkpoint=args.checkpoint,
                                 decoding=decoding)

    def parse(lines, first_line):
        trees, _, _, repairs = parse_lines(translator, lines, args.batch_size, progress=False,
                                           first_line=first_line)
        return trees, repairs

    return parse
