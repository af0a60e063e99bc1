"""Draw what the attention heads of a trained model look at (the paper's Figures 3-5).

For one source sentence and a target (--target, teacher forced; default: the model's own
beam-search translation), writes into --out, for one kind of attention and one layer:

  lines_<kind>_layer<L>.png     the sentence twice (queries on top, keys below), a line
                                from a word (--word) or from every word to the words it
                                attends to; opacity = weight, one colour per head
  heatmaps_<kind>_layer<L>.png  one heat map per head (queries x keys)
  alignment_layer<L>.png        encoder-decoder attention of the translation as a target x
                                source matrix, mean over heads

Files of those names already in --out are kept, and the command stops naming them, unless
--overwrite is given.

Kinds: encoder (source to source), decoder (target to earlier target), cross (target to
source; rows named by the token that position predicts). Layers and heads count from 1,
as in the paper ("layer 5 of 6").

BPE pieces are merged back into words unless --pieces is given: a piece starting with
"▁" begins a word, the pieces after it continue it (punctuation written without a space
stays with the word). A word's weight as a key is the SUM over its pieces (rows still
sum to 1); as a query, the MEAN over its pieces.

Needs matplotlib: pip install -e '.[viz]'.

Examples:
  transformer-tf-attention --model-dir runs/multi30k_en_de/model \\
      --text "Two young girls are playing soccer in a park." --layer 3 --word playing --out figs
  transformer-tf-attention --model saved_models/en_de/1 --text "A dog runs." \\
      --target "Ein Hund rennt." --kind cross --heads 1,2 --out figs
"""
import argparse
import logging
import sys

from transformer_tf.cli.arguments import add_version_flag, positive_int
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.flags import add_flag, add_search_flags, search_settings
from transformer_tf.runtime import console


def heads_list(text: str):
    """'all' -> None; '1,3' -> (1, 3)."""
    if text == "all":
        return None
    try:
        heads = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'all' or head numbers like 1,3, got {text!r}")
    return heads


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    add_flag(source, "saved_model", help="SavedModel directory written by scripts/export.py")
    add_flag(source, "model_dir")
    add_flag(parser, "checkpoint")
    parser.add_argument("--text", required=True, help="the source sentence")
    parser.add_argument("--target", help="the target sentence (default: the model's own "
                                         "beam-search translation)")
    parser.add_argument("--kind", choices=("encoder", "decoder", "cross"), default="encoder",
                        help="which attention (default: encoder)")
    parser.add_argument("--layer", type=positive_int, help="layer, from 1 (default: the last)")
    parser.add_argument("--heads", type=heads_list, default=None,
                        help="'all' (default) or head numbers from 1, e.g. 1,3")
    parser.add_argument("--word", help="lines figure: only the lines from this query word "
                                       "(its first occurrence; default: all words)")
    parser.add_argument("--pieces", action="store_true",
                        help="label BPE pieces instead of merging them into words")
    add_search_flags(parser, "the model's")
    parser.add_argument("--dpi", type=positive_int, default=100, help="PNG pixels per inch")
    add_flag(parser, "out", required=True, help="directory for the PNG files")
    add_flag(parser, "overwrite", help="replace PNG files of the same names in --out (by "
                                       "default they are kept and the command stops)")
    console.add_verbose_flag(parser)
    add_version_flag(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    with console.session(args.verbose):
        return run_command(_run, args, verbose=args.verbose)


def _run(args) -> int:
    # Imported after parsing, so that --help answers without loading TensorFlow.
    from transformer_tf.inference.attention import attention_figures, load_model
    from transformer_tf.inference.loading import source_decoding
    from transformer_tf.visualization.plots import check_matplotlib
    from transformer_tf.visualization.words import pieces_to_text

    try:
        check_matplotlib()
        decoding = search_settings(args, source_decoding(model=args.model,
                                                         model_dir=args.model_dir))
        model, tokenizer, decoding = load_model(args.model_dir, args.model, args.checkpoint,
                                                decoding)
        maps, paths = attention_figures(
            model, tokenizer, decoding, args.text, args.out, target=args.target,
            kind=args.kind, layer=args.layer, heads=args.heads, word=args.word,
            merge_words=not args.pieces, dpi=args.dpi, overwrite=args.overwrite)
    except (FileNotFoundError, FileExistsError, ValueError, ImportError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if maps.from_search:
        print("translation:", pieces_to_text(maps.output_pieces))
    for path in paths:
        print(path)
    return 0
