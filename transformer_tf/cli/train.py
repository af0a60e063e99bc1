"""Train a Transformer with model.fit (resumes from MDIR's last checkpoint if there is one).

One run at a time per model directory: a second run on the same MDIR stops at once (exit
status 2) naming the holder (pid, host, start time).

Example (or the installed command transformer-tf-train with the same arguments):
  python scripts/train.py --data runs/multi30k_en_de/data --preset multi30k \\
      --model-dir runs/multi30k_en_de/model --max-minutes 30
"""
import argparse
import dataclasses
import json
import logging

from transformer_tf.cli.arguments import (
    add_version_flag,
    non_negative_int,
    positive_int,
)
from transformer_tf.cli.errors import run_command
from transformer_tf.cli.model_flags import add_model_flags, resolve_model_flags
from transformer_tf.config import get_preset
from transformer_tf.runtime import console
from transformer_tf.runtime.cpu import prefer_onednn_for_training


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True,
                        help="prepared data directory (written by scripts/prepare_data.py)")
    add_model_flags(parser)
    parser.add_argument("--model-dir", required=True,
                        help="where checkpoints, TensorBoard logs and run_config.json go; "
                             "an existing run there is resumed")
    plan = parser.add_argument_group("how long (one of --max-steps/--epochs; --max-minutes "
                                     "alone or as a cap; none: the preset's step plan, "
                                     "base 100k, big 300k)")
    plan.add_argument("--max-steps", type=positive_int, help="train until this many optimizer steps")
    plan.add_argument("--epochs", type=float, help="train for this many passes over the data")
    plan.add_argument("--max-minutes", type=float,
                      help="stop cleanly (with a checkpoint) once the run has trained this "
                           "many minutes in all (a resumed run trains what is left)")
    parser.add_argument("--eval-every", type=positive_int, default=1000,
                        help="steps between validation runs (loss and dev BLEU) (default 1000)")
    parser.add_argument("--log-every", type=positive_int, default=100,
                        help="steps between TensorBoard writes (default 100)")
    parser.add_argument("--validation-sentences", type=non_negative_int, default=200,
                        help="dev sentences decoded (greedy) for validation BLEU and example "
                             "translations; 0 disables (default 200)")
    dist = parser.add_argument_group("devices")
    dist.add_argument("--strategy", choices=("default", "mirrored", "multiworker"),
                      default="default",
                      help="default: one device; mirrored: all local GPUs (or --devices); "
                           "multiworker: MultiWorkerMirroredStrategy from TF_CONFIG")
    dist.add_argument("--devices", nargs="+", help="device list for --strategy mirrored")
    dist.add_argument("--cpu-devices", type=positive_int,
                      help="split the CPU into N logical devices (to run the mirrored path "
                           "without GPUs)")
    parser.add_argument("--precision", choices=("auto", "float32", "mixed_float16", "mixed_bfloat16"),
                        default="auto",
                        help="dtype policy; mixed_float16 adds dynamic loss scaling; auto (the "
                             "default): mixed_bfloat16 on CPUs with native bfloat16 "
                             "(AVX512-BF16/AMX), float32 elsewhere")
    parser.add_argument("--xla", action="store_true", help="compile the train step with XLA")
    parser.add_argument("--tokens-per-batch", type=positive_int,
                        help="GLOBAL token budget per batch and side, padding included "
                             "(split across replicas); default from the preset")
    parser.add_argument("--warmup-steps", type=non_negative_int, help="learning-rate warm-up (preset default)")
    parser.add_argument("--seed", type=int, help="seed for weights, dropout and data order")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    console.add_verbose_flag(parser)
    add_version_flag(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    prefer_onednn_for_training()
    with console.session(args.verbose):
        return run_command(_run, parser, args, verbose=args.verbose)


def _run(parser, args) -> int:
    # Imported after parsing (--help answers without loading TensorFlow), and the CPU split
    # must precede any other TensorFlow work.
    if args.cpu_devices:
        from transformer_tf.training.distribution import split_cpu
        split_cpu(args.cpu_devices)
    from transformer_tf.training.fit import TrainOptions, train

    args.preset, model_overrides, training_overrides = resolve_model_flags(parser, args)
    if (args.max_steps is None and args.epochs is None and args.max_minutes is None
            and get_preset(args.preset).training.train_steps is None):
        parser.error("give --max-steps, --epochs or --max-minutes (this preset has no step "
                     "plan; base, big and big_en_fr do: 100k, 300k, 300k steps)")
    for flag, field in (("tokens_per_batch", "tokens_per_batch"),
                        ("warmup_steps", "warmup_steps"), ("seed", "seed")):
        if getattr(args, flag) is not None:
            training_overrides[field] = getattr(args, flag)
    options = TrainOptions(
        data_dir=args.data, model_dir=args.model_dir, preset=args.preset,
        model_overrides=model_overrides,
        training_overrides=training_overrides, max_steps=args.max_steps, epochs=args.epochs,
        max_minutes=args.max_minutes, eval_every=args.eval_every, log_every=args.log_every,
        strategy=args.strategy, devices=args.devices, precision=args.precision,
        jit_compile=args.xla, validation_sentences=args.validation_sentences,
        verbose=0 if args.quiet else 1)
    result = train(options)
    print(json.dumps(dataclasses.asdict(result), indent=2))
    return 0

