"""Score parse trees against gold trees with EVALB's COLLINS.prm rules (no TensorFlow).

One bracketed tree per line in each file (UTF-8, ".gz" read as text, lines ended by "\\n"
only), line i of TEST parsing line i of GOLD; an empty file is refused. Prints
bracketing recall, precision, F1, complete match, average crossing and tagging accuracy
for all sentences and for those of at most 40 words, and lists the error sentences
(length or word mismatches, unreadable trees), which are left out of the scores.

With --against OTHER (a second parser's trees of the same sentences), also compares the
two by a paired bootstrap over sentences: the difference in F1 (TEST - OTHER), its 95%
interval, and how often each parser is ahead when the sentences are drawn again.

Examples:
  python scripts/evalb.py runs/ptb_parsing/data/test.gold runs/ptb_parsing/test.trees
  python scripts/evalb.py runs/a/data/valid.gold runs/a/valid.trees --against runs/b/valid.trees
"""
import argparse
import json
import sys

from transformer_tf.cli.arguments import add_version_flag, positive_int
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.flags import add_flag
from transformer_tf.runtime import console


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("gold", help="gold trees, one per line")
    parser.add_argument("test", help="parser output trees, one per line")
    add_flag(parser, "against",
             help="a second parser's trees of the same sentences: compare TEST with them by "
                  "paired bootstrap")
    parser.add_argument("--samples", type=positive_int, default=1000,
                        help="bootstrap samples for --against (default 1000)")
    add_flag(parser, "seed", default=0, help="random seed of the bootstrap draws (default 0)")
    add_flag(parser, "json", help="print the report as JSON")
    console.add_verbose_flag(parser)
    add_version_flag(parser)
    args = parser.parse_args(argv)
    with console.session(args.verbose):
        return run_command(_run, parser, args, verbose=args.verbose)


def _run(parser, args) -> int:

    from transformer_tf.evaluation.evalb import evalb
    from transformer_tf.evaluation.hypothesis_files import EvaluationInputError
    from transformer_tf.evaluation.paired_bootstrap import paired_bootstrap

    if args.against is not None and args.samples < 1:
        parser.error(f"--samples must be at least 1, got {args.samples}")
    try:
        gold = _read_lines(args.gold)
        test = _read_lines(args.test)
        other = _read_lines(args.against) if args.against is not None else None
    except (OSError, EvaluationInputError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        report = evalb(gold, test)
    except ValueError as error:
        print(f"error: {args.gold} and {args.test}: {error}", file=sys.stderr)
        return 2
    comparison = None
    if other is not None:
        try:
            other_report = evalb(gold, other)
        except ValueError as error:
            print(f"error: {args.gold} and {args.against}: {error}", file=sys.stderr)
            return 2
        comparison = paired_bootstrap(report.sentences, other_report.sentences,
                                      samples=args.samples, seed=args.seed)
    if args.json:
        result = report.as_dict()
        if comparison is not None:
            result["against"] = {"file": args.against, "report": other_report.as_dict(),
                                 "paired_bootstrap": comparison.as_dict()}
        print(json.dumps(result, indent=2))
        return 0
    print(report.format_text())
    for line, message in report.errors():
        print(f"error line {line}: {message}")
    if comparison is not None:
        print(f"-- against {args.against} --")
        for line, message in other_report.errors():
            print(f"error line {line} of {args.against}: {message}")
        print(comparison.format_text("TEST", "OTHER"))
    return 0


def _read_lines(path) -> list[str]:
    """The trees of `path`, one a line, read as `evaluate` reads segment files
    (`hypothesis_files.read_lines`): split at "\\n" only, so a U+2028 inside a tree does
    not split it. Raises EvaluationInputError naming the file (and line, for invalid
    UTF-8), also for an empty file, which would score F1 0.00 rather than fail."""
    from transformer_tf.evaluation.hypothesis_files import EvaluationInputError, read_lines

    lines = read_lines(path)
    if not lines:
        raise EvaluationInputError(f"{path} is empty: nothing to score")
    return lines

