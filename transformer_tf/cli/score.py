"""Score given translations: the log-probability a model gives each (source, target) pair.

Forced decoding: one teacher-forced pass per pair, natural log, summed over the target's
BPE pieces and the end of sentence, with no label smoothing and no length penalty (the
model's own distribution). Pairs come on stdin as "SOURCE ||| TARGET" lines, or from
--src and --tgt (line i of one with line i of the other). Prints one line per pair: the
log-probability, and with --per-token a tab and each piece with its log-probability,
"</s>" last:

  -7.1234\t▁Ein -0.1021 ▁Hund -1.9876 ▁läuft -4.2021 . -0.5012 </s> -0.3304

Pieces hold no spaces ("▁" marks a word's start), so the line splits on spaces. A
target longer than the model's positions cannot be scored: its line is "nan", and a
warning names its line number; the other pairs are scored.

Examples:
  echo "A dog runs. ||| Ein Hund läuft." | transformer-tf-score --model saved_models/en_de/1
  python scripts/score.py --model-dir runs/en_de/model --src test.en --tgt test.hyp.de \\
      --per-token
"""
import argparse
import logging
import sys

from transformer_tf.cli.arguments import add_version_flag
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.flags import add_flag
from transformer_tf.runtime import console


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    add_flag(source, "saved_model")
    add_flag(source, "model_dir")
    add_flag(parser, "checkpoint")
    add_flag(parser, "source_file",
             help="source file (with --tgt); default: 'SOURCE ||| TARGET' lines on stdin")
    add_flag(parser, "target_file", help="target file, line i translating line i of --src")
    parser.add_argument("--per-token", action="store_true",
                        help="after the total, a tab and 'piece score' for every piece")
    add_flag(parser, "batch_size", default=64, help="pairs per batch")
    add_version_flag(parser)
    console.add_verbose_flag(parser)
    args = parser.parse_args(argv)
    if (args.src is None) != (args.tgt is None):
        parser.error("give both --src and --tgt, or neither (pairs on stdin)")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    with console.session(args.verbose):
        return run_command(_run, args, verbose=args.verbose)


def _run(args) -> int:
    # Imported after parsing, so that --help answers without loading TensorFlow.
    from transformer_tf.inference.pair_scoring import (
        load_scorer,
        pairs_from_files,
        pairs_from_lines,
        score_pairs,
    )
    from transformer_tf.evaluation.hypothesis_files import refuse_score_fields
    from transformer_tf.inference.streaming import source_lines

    if args.src is not None:
        pairs, name = pairs_from_files(args.src, args.tgt), args.tgt
    else:
        pairs, name = pairs_from_lines(source_lines(sys.stdin.buffer)), "<stdin>"
    # Before the model loads: "translation<TAB>score" targets (translate --scores).
    refuse_score_fields(name, [target for _, target in pairs])
    scorer = load_scorer(model=args.model, model_dir=args.model_dir, checkpoint=args.checkpoint)
    out = sys.stdout
    for scored in score_pairs(scorer, pairs, args.batch_size, name=name):
        line = f"{scored.log_prob:.4f}"
        if args.per_token and scored.pieces:
            line += "\t" + " ".join(f"{piece} {value:.4f}" for piece, value
                                    in zip(scored.pieces, scored.token_scores))
        out.write(line + "\n")
    out.flush()
    return 0
