"""Export a trained Transformer as a CTranslate2 model (a second CPU serving target).

Uses --checkpoint, else the checkpoint MDIR's last choice kept (the main job's dev-set
choice, or average_checkpoints.py's), else MDIR's averaged checkpoint, else its newest.
Writes CTranslate2's model.bin, config.json and shared_vocabulary.json, plus the run's
sentencepiece model (bpe.model) and transformer_tf.json (decoding settings), atomically
into a version directory NAME/VERSION (VERSION an integer; not inside a training run);
--overwrite replaces only a CTranslate2 model, deleted once the new one is in place. Only
the Transformer family converts. Needs the ctranslate2 package (the [ctranslate2] extra:
pip install 'ctranslate2==4.8.*').

There is no --precision here: --quantization sets the weights' storage type, and
CTranslate2 chooses its arithmetic when it loads the model
(`ctranslate2.Translator(..., compute_type=...)`: on a CPU float32, int8, int8_float32
and int16 in CTranslate2 4.8, also where the CPU has native bfloat16; bfloat16 and
int8_bfloat16 on GPUs; `ctranslate2.get_supported_compute_types("cpu")` lists this
machine's).

Run it text in, text out with transformer_tf.export.ctranslate2.CTranslate2Translator, or
with ctranslate2.Translator on sentencepiece pieces (the model appends </s> itself). Its
length_penalty differs from our GNMT alpha: bench/README.md has the closest setting.

Example:
  python scripts/export_ctranslate2.py --model-dir runs/multi30k_en_de/model --out ct2/en_de/1
"""
import argparse
import logging

from transformer_tf.cli.arguments import add_version_flag
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.flags import (
    add_export_precision_flags,
    add_flag,
    add_search_flags,
    search_settings,
)
from transformer_tf.runtime import console


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(parser, "model_dir", required=True)
    add_flag(parser, "out", required=True,
             help="CTranslate2 model directory to write, NAME/VERSION (VERSION: an integer)")
    add_flag(parser, "checkpoint", help="checkpoint prefix to export instead of the default")
    add_search_flags(parser, "the run's", purpose="recorded for the runner")
    parser.add_argument("--quantization",
                        choices=["int8", "int8_float32", "int16", "bfloat16", "int8_bfloat16"],
                        help="store the weights in this type (default: float32, exact); "
                             "the arithmetic is the loader's compute_type")
    add_export_precision_flags(parser, refused=True)
    add_flag(parser, "overwrite", help="replace an existing version (only a CTranslate2 model)")
    console.add_verbose_flag(parser)
    add_version_flag(parser)
    args = parser.parse_args(argv)
    if args.precision is not None:
        parser.error("--precision: a CTranslate2 model's arithmetic is chosen when it is "
                     "loaded (ctranslate2.Translator(compute_type=...), e.g. int8, or bfloat16 "
                     "on a GPU); store its weights so with --quantization")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    with console.session(args.verbose):
        return run_command(_run, args, verbose=args.verbose, also=(ImportError,))


def _run(args) -> int:
    # Imported after parsing, so that --help answers without loading TensorFlow.
    from transformer_tf.cli.export import say_default_checkpoint
    from transformer_tf.export.ctranslate2 import export_model_dir_ctranslate2
    from transformer_tf.inference.loading import source_decoding

    decoding = search_settings(args, source_decoding(model_dir=args.model_dir))
    path = export_model_dir_ctranslate2(args.model_dir, args.out, args.checkpoint,
                                        args.overwrite, args.quantization, decoding)
    if not args.checkpoint:
        say_default_checkpoint(args.model_dir)
    print(path)
    return 0
