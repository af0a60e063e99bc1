"""Score a translation file: sacreBLEU, chrF, paper-style tokenized BLEU, lowercased BLEU.

Argument parsing only; the work is done by `transformer_tf.evaluation`.
"""
from __future__ import annotations

import argparse
import dataclasses

from transformer_tf.cli.arguments import add_version_flag, positive_int
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.flags import add_flag
from transformer_tf.evaluation import (
    DEFAULT_LANG,
    EvaluationInputError,
    LineCountMismatchError,
    evaluate_files,
)
from transformer_tf.runtime import console

DESCRIPTION = """\
Score a hypothesis file against one or more reference files (one segment per line, UTF-8,
".gz" read transparently; both sides detokenized, i.e. plain text as people write it).

Reported, each labelled with how it was computed:
  bleu                      sacreBLEU: cased BLEU on detokenized text, sacreBLEU's default
                            13a tokenizer, printed with sacreBLEU's signature. The number to
                            compare with other systems.
  chrf                      sacreBLEU's chrF2 (character 6-grams, beta=2), with its signature.
  bleu_paper_tokenized      the Transformer paper's tokenized BLEU (tensor2tensor
                            get_ende_bleu.sh): Moses-like tokenization of both sides, for
                            German "##AT##" compound splitting (a-b -> a ##AT##-##AT## b), then
                            multi-bleu.perl (cased, no smoothing). NOT comparable with
                            sacreBLEU; it usually comes out higher.
  bleu_lowercase_tokenized  lowercased tokenized BLEU as the Multi30k literature reports it,
                            computed as sacreBLEU lowercase=True tokenize=13a.
"""

EPILOG = """\
examples:
  python scripts/evaluate.py --hyp out.de --ref ../shared/data/multi30k/test_2016_flickr.de.gz
  python scripts/evaluate.py --hyp out.fr --ref ref.fr --lang fr --json
  python scripts/evaluate.py --hyp new.de --against old.de --ref ref.de   # significance

exit status: 0 on success; 2 on bad arguments or unusable input (missing, non-UTF-8 or
damaged .gz file, different line counts, a --hyp whose lines end in a tab and a score as
`translate --scores` writes them: strip it with `cut -f1`), with the reason on stderr.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--hyp", required=True, metavar="FILE",
        help="hypothesis file: the system's translations, one detokenized segment per line")
    parser.add_argument(
        "--ref", required=True, nargs="+", metavar="FILE",
        help="reference file(s), one detokenized segment per line, the same number of lines "
             "as --hyp; give several files for several references per segment")
    parser.add_argument(
        "--lang", default=None, metavar="LANG",
        help="target language code (de, fr, en, ...): chooses the rules of the Moses-like "
             "tokenizer of the paper-style BLEU, and compound splitting for de. Default: the "
             "language suffix of the first --ref file name (e.g. 'test.de.gz' -> de), else "
             f"{DEFAULT_LANG}")
    split = parser.add_mutually_exclusive_group()
    split.add_argument(
        "--compound-splitting", dest="compound_splitting", action="store_true", default=None,
        help="apply ##AT## compound splitting in the paper-style BLEU whatever the language "
             "(default: only for --lang de)")
    split.add_argument(
        "--no-compound-splitting", dest="compound_splitting", action="store_false",
        help="never apply compound splitting in the paper-style BLEU")
    add_flag(parser, "json",
             help='print one JSON object instead of text: {"bleu", "chrf", "signature", '
                  '"chrf_signature", "bleu_paper_tokenized", "bleu_lowercase_tokenized", their '
                  'signatures, counts, and a "scores" object with every label and detail}')
    add_flag(parser, "against",
             help="another system's output of the same segments: add sacreBLEU's paired bootstrap "
                  "resampling of --hyp against it for BLEU and chrF (p-values, 95%% confidence "
                  "intervals; significant: p < 0.05); in --json, a \"significance\" object "
                  "(docs/scoring.md)")
    parser.add_argument(
        "--bootstrap-samples", type=positive_int, default=1000, metavar="N",
        help="resamples of the paired bootstrap (default %(default)s, sacreBLEU's)")
    console.add_verbose_flag(parser)
    add_version_flag(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    with console.session(args.verbose):
        return run_command(_run, parser, args, verbose=args.verbose)


def _run(parser, args) -> int:
    try:
        report = evaluate_files(args.hyp, args.ref, lang=args.lang,
                                compound_splitting=args.compound_splitting)
        if args.against is not None:
            from transformer_tf.evaluation.significance import compare_files

            report = dataclasses.replace(report, comparison=compare_files(
                args.hyp, args.against, args.ref, args.bootstrap_samples))
    except (EvaluationInputError, LineCountMismatchError) as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    print(report.to_json() if args.json else report.format_text())
    return 0

