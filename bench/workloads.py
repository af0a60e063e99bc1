"""bench/run_all.py's sections on random weights or synthetic data, each timing a workload
of ours against a peer: training (against torch), decoding (against CTranslate2 and
transformers), bfloat16 against float32, the input pipeline against the training step,
and ConvS2S against the Transformer. (The serving section, on a trained model:
serving_section.py.) Each adds its entries to `benchmarks`."""
from __future__ import annotations

from comparison import (CT2_COMPUTE_TYPES, TARGETS, compare, difference, ratio_of,
                        run_where, value_of)
from suite_runner import PEER_MODULES, repeat_args

from transformer_tf.runtime.cpu import matmul_library, other_matmul_library


def train(runner, settings, shapes, benchmarks, peak) -> dict:
    """train_<shape>: our training step (and with XLA) against torch.nn.Transformer, per
    shape; memory_train_<shape>: their peak memory. Returns {shape: (ours, ours_xla,
    peer)}, the worker results the bfloat16 and pipeline sections reuse."""
    train_results = {}
    for shape in shapes:
        spec = settings["train_big"] if shape == "base" else settings["train_small"]
        common_args = ["--shape", shape, *repeat_args(spec)]
        ours, ours_error = runner.run(f"train_tf_{shape}", "train_tf", common_args)
        ours_xla, xla_error = runner.run(f"train_tf_{shape}_xla", "train_tf",
                                         common_args + ["--xla"])
        peer, peer_error = runner.run(f"train_torch_{shape}", "train_torch", common_args,
                                      needs=PEER_MODULES["torch"])
        train_results[shape] = (ours, ours_xla, peer)
        entry = {
            "metric": "target_tokens_per_s", "higher_is_better": True,
            "ours": value_of(ours, "target_tokens_per_s"),
            "ours_xla": value_of(ours_xla, "target_tokens_per_s"),
            "peer": value_of(peer, "target_tokens_per_s"), "peer_name": "torch.nn.Transformer",
            "peer_missing": peer_error,
            "ours_error": ours_error, "ours_xla_error": xla_error,
            "ours_gflops": value_of(ours, "achieved_gflops"),
            "ours_xla_gflops": value_of(ours_xla, "achieved_gflops"),
            "peer_gflops": value_of(peer, "achieved_gflops"),
            "gflop_per_step": value_of(ours or ours_xla or peer, "gflop_per_step"),
            "peak_gflops": peak,
            "target_ratio": TARGETS["train_vs_torch"],
            "target_fraction_of_peak": TARGETS["train_fraction_of_peak"],
            "details": {"ours": ours, "ours_xla": ours_xla, "peer": peer},
        }
        benchmarks[f"train_{shape}"] = compare(entry)

    # Peak memory of a training step: each worker above ran alone in its process.
    memory_shape = "base" if "base" in train_results else shapes[0]
    ours, ours_xla, peer = train_results[memory_shape]
    entry = {
        "metric": "peak_rss_mb", "higher_is_better": False,
        "ours": value_of(ours, "peak_rss_mb"), "ours_xla": value_of(ours_xla, "peak_rss_mb"),
        "peer": value_of(peer, "peak_rss_mb"), "peer_name": "torch.nn.Transformer",
        "peer_missing": (None if peer is not None else
                         runner.workers.get(f"train_torch_{memory_shape}", {}).get("error")),
        "shape": memory_shape,
        "details": {
            "what": "peak RSS of the whole training-benchmark process (runtime, model, "
                    "optimizer state, warm-up and timed steps); *_built_mb is the RSS "
                    "after building the model and optimizer, before the first step",
            "ours_rss_start_mb": value_of(ours, "rss_start_mb"),
            "ours_built_mb": value_of(ours, "rss_built_mb"),
            "ours_peak_minus_start_mb": difference(value_of(ours, "peak_rss_mb"),
                                              value_of(ours, "rss_start_mb")),
            "ours_xla_peak_minus_start_mb": difference(value_of(ours_xla, "peak_rss_mb"),
                                                  value_of(ours_xla, "rss_start_mb")),
            "peer_peak_minus_start_mb": difference(value_of(peer, "peak_rss_mb"),
                                              value_of(peer, "rss_start_mb")),
            "ours_xla_built_mb": value_of(ours_xla, "rss_built_mb"),
            "peer_rss_start_mb": value_of(peer, "rss_start_mb"),
            "peer_built_mb": value_of(peer, "rss_built_mb"),
        },
    }
    benchmarks[f"memory_train_{memory_shape}"] = compare(entry)
    return train_results


def decode(runner, settings, shapes, benchmarks, peak, quick: bool) -> None:
    """decode_<shape>_<search>_vs_<engine>: our greedy and beam-4 search (and with XLA in
    a full run) against CTranslate2 and transformers on random weights, in float32; then
    CTranslate2's other compute types (`_decode_compute_types`)."""
    shape_list = ",".join(shapes)
    repeats = repeat_args(settings["decode"])
    modes = ",".join(("off",) + tuple(settings["decode_xla"]))
    ours, ours_error = runner.run(
        "decode_tf", "decode_tf",
        ["--shapes", shape_list, "--beams", "1,4", "--xla-modes", modes, *repeats])
    # A full run also searches with the other library of TensorFlow's CPU matrix products
    # (oneDNN where this CPU's default is Eigen, and the reverse): which one pays depends
    # on the CPU and the model's size, and a server picks it with TF_ENABLE_ONEDNN_OPTS.
    default_library = matmul_library()
    other_library, other_setting = other_matmul_library(default_library)
    other, other_error = None, None
    if not quick:
        other, other_error = runner.run(
            f"decode_tf_{other_library}", "decode_tf",
            ["--shapes", shape_list, "--beams", "1,4", "--xla-modes", "off", *repeats],
            env=other_setting)
    peers = {}
    for engine in ("ctranslate2", "hf"):
        types = ["--compute-types", ",".join(("float32", *CT2_COMPUTE_TYPES))] \
            if engine == "ctranslate2" else []
        peers[engine] = runner.run(
            f"decode_{engine}", "decode_peer",
            ["--engine", engine, "--shapes", shape_list, "--beams", "1,4", *repeats,
             *types], needs=PEER_MODULES[engine])

    for shape in shapes:
        for beam in (1, 4):
            mine = run_where(ours, shape=shape, beam=beam, xla=False)
            mine_xla = run_where(ours, shape=shape, beam=beam, xla=True)
            for engine, (peer_result, peer_error) in peers.items():
                theirs = run_where(peer_result, shape=shape, beam=beam,
                                    compute_type="float32")
                if peer_error is None and theirs is None:
                    peer_error = "no run for this configuration"
                entry = {
                    "metric": "output_tokens_per_s", "higher_is_better": True,
                    "ours": value_of(mine, "output_tokens_per_s"),
                    "ours_xla": value_of(mine_xla, "output_tokens_per_s"),
                    "peer": value_of(theirs, "output_tokens_per_s"),
                    "peer_name": {"ctranslate2": "CTranslate2 (float32, our weights)",
                                  "hf": "transformers MarianMTModel.generate"}[engine],
                    "peer_missing": peer_error, "ours_error": ours_error,
                    "ours_xla_missing": (None if mine_xla is not None else
                                         "XLA decoding not run with --quick"
                                         if quick else ours_error),
                    "ours_sentences_per_s": value_of(mine, "sentences_per_s"),
                    "peer_sentences_per_s": value_of(theirs, "sentences_per_s"),
                    "ours_gflops": value_of(mine, "achieved_gflops"),
                    "ours_xla_gflops": value_of(mine_xla, "achieved_gflops"),
                    "peer_gflops": value_of(theirs, "achieved_gflops"),
                    "peak_gflops": peak,
                    "details": {"ours": mine, "ours_xla": mine_xla, "peer": theirs},
                }
                if not quick:
                    mine_other = run_where(other, shape=shape, beam=beam, xla=False)
                    entry["matmul_library"] = {
                        "default": default_library, "other": other_library,
                        "ours_other": value_of(mine_other, "output_tokens_per_s"),
                        "other_over_default": ratio_of(
                            value_of(mine_other, "output_tokens_per_s"), entry["ours"]),
                        "error": other_error}
                name = "greedy" if beam == 1 else f"beam{beam}"
                entry["target_ratio"] = TARGETS.get(f"decode_{name}_vs_{engine}",
                                                    TARGETS[f"decode_vs_{engine}"])
                benchmarks[f"decode_{shape}_{name}_vs_{engine}"] = compare(entry)
    _decode_compute_types(runner, settings, benchmarks, shapes, ours, ours_error,
                          peers["ctranslate2"])


def pipeline(runner, settings, quick: bool, train_results, benchmarks) -> None:
    """input_pipeline_multi30k: our tf.data pipeline's target positions/s against what the
    multi30k training step consumes (when that shape's training ran in this run)."""
    args = ["--epochs", str(settings["pipeline_epochs"])] + (["--quick"] if quick else [])
    result, error = runner.run("pipeline", "pipeline", args)
    # The "peer" here is our own consumer: target positions/s the multi30k training
    # step eats (the faster of XLA on / off; 32 x 32 batches, no padding).
    consumer = None
    if "multi30k" in train_results:
        ours, ours_xla, _ = train_results["multi30k"]
        rates = [r for r in (value_of(ours, "target_tokens_per_s"),
                             value_of(ours_xla, "target_tokens_per_s")) if r]
        consumer = max(rates, default=None)
    entry = {
        "metric": "padded_target_positions_per_s", "higher_is_better": True,
        "ours": value_of(result, "padded_target_positions_per_s"), "ours_error": error,
        "peer": consumer,
        "peer_name": "our multi30k training step (target positions/s it consumes)",
        "peer_missing": None if consumer else
        "needs the multi30k training benchmark in the same run (--shapes ...,multi30k)",
        "pairs_per_s": value_of(result, "pairs_per_second"),
        "real_tokens_per_s": value_of(result, "tokens_per_second"),
        "padding_efficiency": value_of(result, "padding_efficiency"),
        "target_ratio": TARGETS["pipeline_vs_training"],
        "details": {"pipeline": result},
    }
    benchmarks["input_pipeline_multi30k"] = compare(entry)


def _decode_args(settings, shapes) -> list[str]:
    """decode_tf's arguments of the bf16 section (XLA off) and of `_decode_compute_types`."""
    return ["--shapes", ",".join(shapes), "--beams", "1,4", "--xla-modes", "off",
            *repeat_args(settings["decode"])]


def _decode_compute_types(runner, settings, benchmarks, shapes, ours, ours_error,
                          ct2) -> None:
    """decode_<shape>_<search>_vs_ctranslate2_<type>: CTranslate2 in each of
    CT2_COMPUTE_TYPES that the CPU runs against our search in the same arithmetic
    (mixed_bfloat16 for the bfloat16 types, run here when one of them ran) or, for the
    int8 types, named as the gap."""
    ct2_result, ct2_error = ct2
    ran = {run.get("compute_type") for run in (ct2_result or {}).get("runs", [])}
    bf16 = (None, "no CTranslate2 bfloat16 type ran")
    if ran & {t for t, (ours_precision, _) in CT2_COMPUTE_TYPES.items()
              if ours_precision == "bfloat16"}:
        bf16 = runner.run("decode_tf_mixed_bfloat16", "decode_tf",
                          [*_decode_args(settings, shapes), "--precision", "mixed_bfloat16"])
    for shape in shapes:
        for beam, name in ((1, "greedy"), (4, "beam4")):
            for compute_type, (ours_precision, comparison) in CT2_COMPUTE_TYPES.items():
                mine, mine_error = bf16 if ours_precision == "bfloat16" else (ours, ours_error)
                theirs = run_where(ct2_result, shape=shape, beam=beam,
                                    compute_type=compute_type)
                missing = ct2_error or (None if theirs is not None else
                                        f"CTranslate2 compute_type {compute_type} not "
                                        "supported on this CPU")
                mine = run_where(mine, shape=shape, beam=beam, xla=False)
                benchmarks[f"decode_{shape}_{name}_vs_ctranslate2_{compute_type}"] = compare({
                    "metric": "output_tokens_per_s", "higher_is_better": True,
                    "ours": value_of(mine, "output_tokens_per_s"),
                    "peer": value_of(theirs, "output_tokens_per_s"),
                    "ours_precision": ours_precision, "comparison": comparison,
                    "peer_name": f"CTranslate2 {compute_type} (our random weights)",
                    "ours_error": mine_error, "peer_missing": missing,
                    "details": {"ours": mine, "peer": theirs}})


def bfloat16(runner, settings, benchmarks, shapes, train_results) -> None:
    """Our training step and greedy / beam-4 decoding in mixed_bfloat16 against float32
    (each shape, XLA off): the same workers with `--precision`. The float32 training
    figure is the train section's when it ran."""
    for shape in shapes:
        spec = settings["train_big"] if shape == "base" else settings["train_small"]
        train_args = ["--shape", shape, *repeat_args(spec)]
        float32 = (train_results.get(shape) or (None,))[0]
        float32_error = None
        if float32 is None:
            float32, float32_error = runner.run(f"train_tf_{shape}", "train_tf", train_args)
        bf16, bf16_error = runner.run(f"train_tf_{shape}_bf16", "train_tf",
                                      [*train_args, "--precision", "mixed_bfloat16"])
        benchmarks[f"train_{shape}_bf16_vs_float32"] = _versus_float32(
            "target_tokens_per_s", "our training step", (bf16, bf16_error),
            (float32, float32_error))
    by_precision = {precision: runner.run(f"decode_tf_{precision}", "decode_tf",
                                          [*_decode_args(settings, shapes), "--precision",
                                           precision])
                    for precision in ("float32", "mixed_bfloat16")}

    (float32, float32_error), (bf16, bf16_error) = (by_precision["float32"],
                                                    by_precision["mixed_bfloat16"])
    for shape in shapes:
        for beam, name in ((1, "greedy"), (4, "beam4")):
            benchmarks[f"decode_{shape}_{name}_bf16_vs_float32"] = _versus_float32(
                "output_tokens_per_s", "our search",
                (run_where(bf16, shape=shape, beam=beam), bf16_error),
                (run_where(float32, shape=shape, beam=beam), float32_error))


def _versus_float32(metric: str, what: str, bf16, float32) -> dict:
    """A benchmark entry of a mixed_bfloat16 figure (ours) against the same workload in
    float32 (peer); `bf16` and `float32` are (worker result or run, error) pairs."""
    (mine, mine_error), (reference, reference_error) = bf16, float32
    return compare({
        "metric": metric, "higher_is_better": True,
        "ours": value_of(mine, metric), "peer": value_of(reference, metric),
        "peer_name": f"{what} in float32", "ours_error": mine_error,
        "peer_missing": reference_error, "target_ratio": TARGETS["bf16_vs_float32"],
        "details": {"ours": mine, "peer": reference}})


def families(runner, settings, benchmarks, peak) -> None:
    """ConvS2S (convs2s_multi30k) vs the Transformer of the same parameter count (the
    multi30k preset with d_ff matched), training and beam-4 decoding, one worker each."""
    args = repeat_args(settings["train_small"])
    convs2s, convs2s_error = runner.run("family_convs2s", "family_tf",
                                        ["--preset", "convs2s_multi30k", *args])
    transformer, transformer_error = runner.run(
        "family_transformer", "family_tf",
        ["--preset", "multi30k", "--match-params", "convs2s_multi30k", *args])

    def part(result, name, key):
        return value_of(value_of(result, name), key)

    common_fields = {
        "higher_is_better": True, "ours_error": convs2s_error, "peer_missing": transformer_error,
        "peer_name": "our Transformer (multi30k preset, d_ff matched to ConvS2S's parameters)",
        "ours_parameters": value_of(convs2s, "parameters"),
        "peer_parameters": value_of(transformer, "parameters"),
        "details": {"ours": convs2s, "peer": transformer},
    }
    benchmarks["train_convs2s_vs_transformer_multi30k"] = compare({
        "metric": "target_tokens_per_s", **common_fields,
        "ours": part(convs2s, "train", "target_tokens_per_s"),
        "peer": part(transformer, "train", "target_tokens_per_s"),
        "ours_gflops": part(convs2s, "train", "achieved_gflops"),
        "peer_gflops": part(transformer, "train", "achieved_gflops"),
        "ours_flops_per_target_token": value_of(convs2s, "training_flops_per_target_token"),
        "peer_flops_per_target_token": value_of(transformer, "training_flops_per_target_token"),
        "peak_gflops": peak,
    })
    benchmarks["decode_convs2s_vs_transformer_multi30k_beam4"] = compare({
        "metric": "sentences_per_s", **common_fields,
        "ours": part(convs2s, "decode", "sentences_per_s"),
        "peer": part(transformer, "decode", "sentences_per_s"),
    })
