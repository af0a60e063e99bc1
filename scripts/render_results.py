#!/usr/bin/env python
"""Renders the result tables of README.md, bench/README.md and docs/ from results/*.json.

    python scripts/render_results.py            # rewrite the tables between the markers
    python scripts/render_results.py --check    # exit 1 if a table differs from its rendering

The logic is `transformer_tf.evaluation.results_tables` (no TensorFlow).
"""
import argparse
import pathlib
import sys

from transformer_tf.evaluation.results_tables import ResultsError, default_documents, process

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=pathlib.Path,
                        help="documents to render (default: README.md, bench/README.md, docs/**/*.md)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a table differs from its rendering")
    parser.add_argument("--results", type=pathlib.Path, default=ROOT / "results",
                        help="the results directory (default: results/ of this checkout)")
    args = parser.parse_args(argv)
    try:
        outcomes = process(args.files or default_documents(ROOT), args.results,
                           write=not args.check)
    except ResultsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    stale = [outcome for outcome in outcomes if outcome.stale]
    for outcome in stale:
        verb = "differs from its rendering" if args.check else "rendered"
        print(f"{outcome.path}: {outcome.tables} table(s), {verb}")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
