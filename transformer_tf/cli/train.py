"""Train a Transformer with model.fit (resumes from MDIR's last checkpoint if there is one).

One run at a time per model directory: a second run on the same MDIR stops at once (exit
status 2) naming the holder (pid, host, start time).

Example (or the installed command transformer-tf-train with the same arguments):
  python scripts/train.py --data runs/multi30k_en_de/data --preset multi30k \\
      --model-dir runs/multi30k_en_de/model --max-minutes 30 --early-stopping 4

Fine-tuning: a new run from another run's weights, on data prepared with its tokenizer:
  python scripts/prepare_data.py --dataset files --src en --tgt de --train-src in.en \\
      --train-tgt in.de --tokenizer runs/multi30k_en_de/model/bpe.model --out runs/domain/data
  python scripts/train.py --data runs/domain/data --init-from runs/multi30k_en_de/model \\
      --model-dir runs/domain/model --max-steps 2000
"""
import argparse
import dataclasses
import json
import logging
import pathlib
import sys

from transformer_tf.cli.arguments import (
    add_version_flag,
    non_negative_int,
    positive_float,
    positive_int,
)
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.flags import (
    add_early_stopping_flag,
    add_flag,
    add_precision_flag,
    add_quiet_flag,
    add_recipe_flag,
)
from transformer_tf.cli.model_flags import (
    add_model_flags,
    dump_config,
    resolve_model_flags,
)
from transformer_tf.presets import get_preset
from transformer_tf.runtime import console
from transformer_tf.runtime.training_process import prepare_for_training


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(parser, "data",
             help="prepared data directory (written by scripts/prepare_data.py); default: a "
                  "--config file's data_dir")
    add_model_flags(parser)
    add_flag(parser, "model_dir",
             help="(required to train) where checkpoints, TensorBoard logs and run_config.json "
                  "go; an existing run there is resumed")
    parser.add_argument("--init-from", metavar="MDIR_OR_CKPT",
                        help="fine-tune: start this NEW run from another run's weights (its "
                             "default checkpoint, or the checkpoint prefix given) with a "
                             "fresh optimizer and schedule; same model and tokenizer "
                             "required (default --preset: the source run's)")
    plan = parser.add_argument_group("how long (one of --max-steps/--epochs; --max-minutes "
                                     "alone or as a cap; none: the preset's step plan, "
                                     "base 100k, big 300k)")
    add_flag(plan, "max_steps", help="train until this many optimizer steps")
    add_flag(plan, "epochs", help="train for this many passes over the data")
    plan.add_argument("--max-minutes", type=positive_float,
                      help="stop cleanly (with a checkpoint) once the run has trained this "
                           "many minutes in all (a resumed run trains what is left)")
    add_flag(parser, "eval_every", default=1000,
             help="steps between validation runs (loss and dev BLEU) (default 1000)")
    parser.add_argument("--log-every", type=positive_int, default=100,
                        help="steps between TensorBoard writes (default 100)")
    add_flag(parser, "validation_sentences", default=200,
             help="dev sentences decoded (greedy) for validation BLEU and example translations; 0 "
                  "disables (default 200)")
    add_early_stopping_flag(parser)
    dist = parser.add_argument_group("devices")
    dist.add_argument("--strategy", choices=("default", "mirrored", "multiworker"),
                      default="default",
                      help="default: one device; mirrored: all local GPUs (or --devices); "
                           "multiworker: MultiWorkerMirroredStrategy from TF_CONFIG")
    dist.add_argument("--devices", nargs="+", help="device list for --strategy mirrored")
    dist.add_argument("--cpu-devices", type=positive_int,
                      help="split the CPU into N logical devices (to run the mirrored path "
                           "without GPUs)")
    add_precision_flag(parser)
    add_recipe_flag(parser)
    add_flag(parser, "xla", help="compile the train step with XLA")
    parser.add_argument("--tokens-per-batch", type=positive_int,
                        help="GLOBAL token budget per batch and side, padding included "
                             "(split across replicas); default from the preset")
    parser.add_argument("--warmup-steps", type=non_negative_int, help="learning-rate warm-up (preset default)")
    add_flag(parser, "seed", help="seed for weights, dropout and data order")
    add_quiet_flag(parser)
    console.add_verbose_flag(parser)
    add_version_flag(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    prepare_for_training()
    with console.session(args.verbose):
        return run_command(_run, parser, args, verbose=args.verbose)


def _run(parser, args) -> int:
    # Imported after parsing (--help answers without loading TensorFlow), and the CPU split
    # must precede any other TensorFlow work.
    if args.cpu_devices:
        from transformer_tf.training.distribution import split_cpu
        split_cpu(args.cpu_devices)
    from transformer_tf.training.fit import TrainOptions, train

    init_from = _fine_tuning_source(args) if args.init_from else None
    choice = resolve_model_flags(parser, args)
    args.preset, training_overrides = choice.preset, choice.training_overrides
    args.data = args.data or choice.data_dir
    for field in ("tokens_per_batch", "warmup_steps", "seed"):  # flags named as the fields
        if getattr(args, field) is not None:
            training_overrides[field] = getattr(args, field)
    if args.dump_config:
        print(dump_config(choice, args.data, precision=args.precision))
        return 0
    if args.data is None:
        parser.error("give --data (or a --config file with data_dir)")
    if args.model_dir is None:
        parser.error("give --model-dir: the run directory to train into")
    if (args.max_steps is None and args.epochs is None and args.max_minutes is None
            and get_preset(args.preset).training.train_steps is None):
        parser.error("give --max-steps, --epochs or --max-minutes (this preset has no step "
                     "plan; base, big and big_en_fr do: 100k, 300k, 300k steps)")
    if args.early_stopping is not None and args.validation_sentences == 0:
        parser.error("--early-stopping needs dev BLEU: --validation-sentences must be above 0")
    options = TrainOptions(
        data_dir=args.data, model_dir=args.model_dir, preset=args.preset,
        model_overrides=choice.model_overrides, training_overrides=training_overrides,
        decoding_overrides=choice.decoding_overrides, max_steps=args.max_steps, epochs=args.epochs,
        max_minutes=args.max_minutes, eval_every=args.eval_every, log_every=args.log_every,
        strategy=args.strategy, devices=args.devices, precision=args.precision,
        jit_compile=args.xla, validation_sentences=args.validation_sentences,
        verbose=0 if args.quiet else 1, init_from=init_from, recipe=args.recipe,
        early_stopping=args.early_stopping)
    result = train(options)
    print(json.dumps(dataclasses.asdict(result), indent=2))
    return 0


def _fine_tuning_source(args) -> str:
    """The checkpoint prefix --init-from names (a run directory: its default checkpoint,
    said on stderr); without --preset or --model, args.preset becomes the source run's."""
    from transformer_tf.inference.loading import default_checkpoint
    from transformer_tf.rundir import init_source
    from transformer_tf.rundir.model_dir import read_run_config

    checkpoint = args.init_from
    if pathlib.Path(checkpoint).is_dir():
        checkpoint, why = default_checkpoint(checkpoint)
        print(f"init from: {checkpoint} ({why})", file=sys.stderr)
    if args.preset is None and args.model is None:
        args.preset = read_run_config(init_source.source_run_dir(checkpoint)).preset
    return checkpoint

