"""Prepare a parallel corpus for training: check it, train a shared BPE model, write DIR.

Argument parsing only; the work is done by `transformer_tf.data.prepared_writer`.
"""
from __future__ import annotations

import argparse
import logging
import sys

from transformer_tf.cli.arguments import (
    add_version_flag,
    float_between,
    non_negative_int,
    positive_int,
)
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.flags import add_flag, add_quiet_flag
from transformer_tf.config import BOS_ID, CHARACTER_COVERAGE, EOS_ID, PAD_ID, UNK_ID
from transformer_tf.data.text_lines import CorpusError
from transformer_tf.runtime import console

DESCRIPTION = f"""\
Check a parallel corpus (equal line counts, valid UTF-8), copy it into OUT as plain text,
train one shared sentencepiece BPE model on the training text of both languages (ids
{PAD_ID}=<pad> {UNK_ID}=<unk> {BOS_ID}=<s> {EOS_ID}=</s>), and describe it all in OUT/prepared.json (languages,
vocabulary size, special ids, checksums, file names per split, pairs dropped).
`scripts/train.py --data OUT` then trains on it.

Corpora (--dataset):
  multi30k  Multi30k task 1 (en, de, fr): train 29,000 / valid (val) 1,014 / test
            (test_2016_flickr) 1,000 pairs. Read from --data-dir (DIR/multi30k or DIR),
            else $TRANSFORMER_TF_DATA/multi30k, else downloaded with checksum checks.
  wmt14     TensorFlow Datasets wmt14_translate/de-en or fr-en (train / newstest2013 /
            newstest2014); --data-dir is the TFDS data directory.
  files     your own line-aligned files: --train-src/--train-tgt (required),
            --valid-src/--valid-tgt and --test-src/--test-tgt (optional); .gz allowed.
"""

EPILOG = """\
examples:
  python scripts/prepare_data.py --dataset multi30k --src en --tgt de --vocab-size 8000 --out /tmp/m30k
  python scripts/prepare_data.py --dataset wmt14 --src en --tgt de --vocab-size 37000 --out /data/ende
  python scripts/prepare_data.py --dataset files --src en --tgt fr --vocab-size 16000 \\
      --train-src train.en --train-tgt train.fr --valid-src dev.en --valid-tgt dev.fr --out /tmp/enfr

exit status: 0 on success; 2 on bad arguments or unusable input (missing file, different
line counts, invalid UTF-8, a truncated or non-gzip .gz file, control characters with
--reject-control-characters), with the reason on stderr. A UTF-8 BOM at the start of a file
is dropped; lines with NUL or other control characters are counted in a warning.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_flag(parser, "dataset", choices=("multi30k", "wmt14", "files"), default="multi30k",
             help="which corpus to prepare (default: multi30k)")
    add_flag(parser, "source_language", required=True, help="source language code, e.g. en")
    add_flag(parser, "target_language", required=True, help="target language code, e.g. de")
    add_flag(parser, "vocab_size", default=8000,
             help="size of the shared BPE vocabulary, including the 4 special ids and the 256 "
                  "byte-fallback pieces (default: 8000)")
    add_flag(parser, "subword", default="bpe",
             help="shared subword vocabulary: sentencepiece BPE (default) or tensorflow-text word "
                  "pieces (the paper's En-Fr setup; identity normalization, no byte fallback)")
    add_flag(parser, "out", required=True, help="output directory (created)")
    add_flag(parser, "data_dir", default=None,
             help="multi30k: directory holding multi30k/ (or the files); default "
                  "$TRANSFORMER_TF_DATA, then a download. wmt14: the TFDS data_dir")
    parser.add_argument("--no-download", action="store_true",
                        help="fail instead of downloading a corpus that is not found locally")
    for split in ("train", "valid", "test"):
        for side, name in (("src", "source"), ("tgt", "target")):
            parser.add_argument(f"--{split}-{side}", default=None,
                                help=f"--dataset files: {name} file of the {split} split")
    parser.add_argument("--max-length", type=non_negative_int, default=256,
                        help="drop training pairs with a side longer than this many BPE tokens "
                             "(EOS/BOS included); valid and test are never filtered; 0 keeps "
                             "every length (default: 256)")
    parser.add_argument("--normalization", choices=("identity", "nmt_nfkc"), default="identity",
                        help="sentencepiece normalisation: identity (only extra spaces removed; "
                             "default) or nmt_nfkc (NFKC + NMT clean-ups)")
    parser.add_argument("--character-coverage", type=float_between(*CHARACTER_COVERAGE),
                        default=0.9999,
                        help=f"share of characters given their own piece, from "
                             f"{CHARACTER_COVERAGE[0]} to {CHARACTER_COVERAGE[1]}; the rest use "
                             f"byte pieces (default: 0.9999)")
    parser.add_argument("--no-byte-fallback", action="store_true",
                        help="map unknown characters to <unk> instead of UTF-8 byte pieces "
                             "(then detokenize(tokenize(s)) == s no longer always holds)")
    parser.add_argument("--max-bpe-sentences", type=non_negative_int, default=2_000_000,
                        help="train BPE on a seeded sample of at most this many sentences of "
                             "both languages; 0 uses all (default: 2,000,000)")
    add_flag(parser, "seed", default=1234, help="seed of that sample (default: 1234)")
    parser.add_argument("--threads", type=positive_int, default=2,
                        help="sentencepiece trainer threads (default: 2)")
    parser.add_argument("--reject-control-characters", action="store_true",
                        help="refuse a corpus whose lines hold NUL or other control "
                             "characters (default: keep them, with a warning counting them)")
    parser.add_argument("--tokenizer", metavar="FILE",
                        help="use this sentencepiece model (e.g. a run's MDIR/bpe.model) "
                             "instead of training one, to fine-tune that run on this corpus "
                             "(train --init-from); give the --subword and --normalization it "
                             "was trained with")
    add_quiet_flag(parser, help="log warnings only")
    console.add_verbose_flag(parser)
    add_version_flag(parser)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    with console.session(args.verbose):
        return run_command(_run, args, verbose=args.verbose)


def _run(args) -> int:
    # Imported after argument parsing: they load TensorFlow, which --help and argument
    # errors need not wait for.
    from transformer_tf.data.bpe import BpeOptions
    from transformer_tf.data.prepared_writer import prepare_dataset

    files = {
        split: (getattr(args, f"{split}_src"), getattr(args, f"{split}_tgt"))
        for split in ("train", "valid", "test")
    }
    for split, (source, target) in files.items():
        if (source is None) != (target is None):
            print(f"error: give both --{split}-src and --{split}-tgt, or neither", file=sys.stderr)
            return 2
    files = {split: pair for split, pair in files.items() if pair[0] is not None}
    if args.dataset != "files" and files:
        print("error: --train-src etc. need --dataset files", file=sys.stderr)
        return 2
    try:
        options = BpeOptions(
            vocab_size=args.vocab_size,
            subword=args.subword,
            normalization=args.normalization,
            byte_fallback=not args.no_byte_fallback,
            character_coverage=args.character_coverage,
            max_training_sentences=args.max_bpe_sentences,
            seed=args.seed,
            num_threads=args.threads,
        )
        prepared = prepare_dataset(
            args.dataset, args.src, args.tgt, args.out,
            bpe_options=options,
            max_length=args.max_length or None,
            data_dir=args.data_dir,
            download=not args.no_download,
            files=files,
            reject_control_characters=args.reject_control_characters,
            tokenizer=args.tokenizer,
        )
    except (CorpusError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    sizes = ", ".join(f"{split} {prepared.num_examples(split)}" for split in prepared.splits)
    print(f"prepared {prepared.source_language}-{prepared.target_language} in "
          f"{prepared.directory}: vocab {prepared.vocab_size}; {sizes}")
    return 0

