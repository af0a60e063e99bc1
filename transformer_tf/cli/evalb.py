"""Score parse trees against gold trees with EVALB's COLLINS.prm rules (no TensorFlow).

One bracketed tree per line in each file, line i of TEST parsing line i of GOLD. Prints
bracketing recall, precision, F1, complete match, average crossing and tagging accuracy
for all sentences and for those of at most 40 words, and lists the error sentences
(length or word mismatches, unreadable trees), which are left out of the scores.

Example:
  python scripts/evalb.py runs/ptb_parsing/data/test.gold runs/ptb_parsing/test.trees
"""
import argparse
import json
import sys

from transformer_tf import console


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("gold", help="gold trees, one per line")
    parser.add_argument("test", help="parser output trees, one per line")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    console.add_verbose_flag(parser)
    args = parser.parse_args(argv)
    with console.session(args.verbose):
        return _run(parser, args)


def _run(parser, args) -> int:

    from transformer_tf.evaluation.evalb import evalb

    try:
        with open(args.gold, encoding="utf-8") as f:
            gold = f.read().splitlines()
        with open(args.test, encoding="utf-8") as f:
            test = f.read().splitlines()
        report = evalb(gold, test)
    except (OSError, UnicodeDecodeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"error: {args.gold} and {args.test}: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print(report.format_text())
        for line, message in report.errors():
            print(f"error line {line}: {message}")
    return 0

