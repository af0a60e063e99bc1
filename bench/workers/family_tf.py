"""Worker: one model family's training step and beam search (random weights), for the
ConvS2S vs Transformer comparison of run_all.py.

    python bench/workers/family_tf.py --preset convs2s_multi30k
    python bench/workers/family_tf.py --preset multi30k --match-params convs2s_multi30k

`--match-params P` sets the Transformer's d_ff (a multiple of 64) so that its parameter
count is the closest to preset P's: the two families compared at equal size. Training: a
batch of `batch` random pairs of `length` tokens a side, the preset's optimizer and loss.
Decoding: `batch` sentences, beam `--beam`, exactly `length` output tokens
(bench/fixed_length.py). FLOPs: bench/model_flops.py (one counting rule for every family).
Prints one JSON object.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

common.set_thread_env()


def _matched_config(preset_name: str, target_name: str):
    """The preset's Transformer config with d_ff chosen to match `target_name`'s size."""
    from transformer_tf.presets import get_preset
    from transformer_tf.models.registry import build_model

    def params(family, config):
        return int(build_model(family, config).count_params())

    target = get_preset(target_name)
    wanted = params(target.family, target.model)
    preset = get_preset(preset_name)
    candidates = [preset.model.replace(d_ff=d_ff) for d_ff in range(64, 8193, 64)]
    # Parameters grow linearly in d_ff: two builds give the line (the chosen model's own
    # count is reported beside the target, so a miss would show).
    p0, p1 = params(preset.family, candidates[0]), params(preset.family, candidates[1])
    best = min(candidates, key=lambda c: abs(p0 + (p1 - p0) * (c.d_ff - 64) // 64 - wanted))
    return best, wanted


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", required=True)
    parser.add_argument("--match-params", help="resize this Transformer preset's d_ff to "
                                               "the size of another preset")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=32)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=None)
    args = parser.parse_args(argv)
    result = {"benchmark": "family", "preset": args.preset, "batch": args.batch,
              "length": args.length, "beam": args.beam,
              "load_average_start": common.load_average()}
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(common.THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras

    import model_flops
    from fixed_length import fixed_length_search
    from transformer_tf.config import BOS_ID, EOS_ID
    from transformer_tf.presets import get_preset
    from transformer_tf.models.registry import build_model
    from transformer_tf.training.fit import build_model_and_optimizer

    preset = get_preset(args.preset)
    config = preset.model
    if args.match_params:
        config, result["matched_parameters"] = _matched_config(args.preset, args.match_params)
        result["d_ff"] = config.d_ff
    keras.utils.set_random_seed(0)
    trainer = build_model_and_optimizer(config, preset.training, family=preset.family)
    model = trainer.network
    result["family"] = preset.family
    result["parameters"] = int(model.count_params())
    b, n, vocab = args.batch, args.length, model.target_vocab_size
    rng = np.random.default_rng(0)
    source = common.random_ids(rng, b, n, vocab)
    source[:, -1] = EOS_ID
    target = common.random_ids(rng, b, n + 1, vocab)
    target[:, 0] = BOS_ID
    target[:, -1] = EOS_ID
    batch = ((tf.constant(source), tf.constant(target[:, :-1])), tf.constant(target[:, 1:]))

    flops_per_token = model_flops.training_flops_per_target_token(model, b, n, n)
    result["training_flops_per_target_token"] = flops_per_token
    losses = []

    def train_step():
        losses.append(float(trainer.train_on_batch(*batch, return_dict=True)["loss"]))

    timing = common.time_calls(train_step, args.repeats, warmup=args.warmup,
                               max_seconds=args.max_seconds)
    result["train"] = {**timing, "target_tokens_per_s": b * n / timing["best_s"],
                       "achieved_gflops": flops_per_token * b * n / timing["best_s"] / 1e9,
                       "first_loss": losses[0], "last_loss": losses[-1]}

    inference = build_model(preset.family, config)
    inference.set_weights(model.get_weights())

    @tf.function
    def decode(source_ids):
        return fixed_length_search(inference, source_ids, args.beam, 0.6, n)

    source_ids = tf.constant(source)
    timing = common.time_calls(lambda: decode(source_ids).ids.numpy(), args.repeats,
                               warmup=args.warmup, max_seconds=args.max_seconds)
    result["decode"] = {**timing, "sentences_per_s": b / timing["best_s"],
                        "output_tokens_per_s": b * n / timing["best_s"]}
    common.emit(result)


if __name__ == "__main__":
    main()
