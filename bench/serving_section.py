"""bench/run_all.py's serving section: a trained model served end to end, text in and
text out, on real sentences, our SavedModel variants against CTranslate2 (see `serving`),
and which inference fast paths paid on this CPU."""
from __future__ import annotations

import json
from pathlib import Path

import common
from comparison import (CT2_COMPUTE_TYPES, TARGETS, compare, ratio_of, run_where,
                        value_of)
from suite_runner import log, missing_modules

from transformer_tf.runtime.cpu import other_matmul_library

DEFAULT_SERVING_MODEL = common.ROOT / "runs" / "multi30k_en_de" / "model"


def _add_latencies(entry: dict, **results) -> None:
    """entry["<who>_latency_{p50,p99}_ms"] from each serving worker's batch-1 result."""
    for who, result in results.items():
        for q in ("p50", "p99"):
            entry[f"{who}_latency_{q}_ms"] = value_of(result, f"latency_{q}_ms")


def _test_2016_source() -> Path | None:
    path = common.multi30k_test_2016("en")
    return path if path.exists() else None


def _serving_gflops(entry: dict, runs: dict, shape, beam: int, peak) -> None:
    """entry["<who>_gflops"]: each serving run's useful forward GFLOP/s
    (`common.translation_flops` of its source and output tokens / its seconds), and
    entry["peak_gflops"] = peak; nothing when the model's shape is not known."""
    if shape is None:
        return
    for who, run in runs.items():
        entry[f"{who}_gflops"] = None if run is None else common.translation_flops(
            shape, run["source_tokens"], run["target_tokens"], beam) / run["seconds"] / 1e9
    entry["peak_gflops"] = peak


def serving(runner, benchmarks, model_dir, sentences: int, peak=None) -> None:
    """A trained model served end to end, text in and text out, on real sentences: our
    SavedModel's serving_default vs CTranslate2 on the converted checkpoint (beam 4, alpha
    0.6, 2 threads each), batches of 1, 8 and 64 test 2016 sentences in file order. The
    artefacts are written once per run (serving_prepare) into a temporary directory.
    With the matmul peak of the run (`peak`, GFLOP/s), each figure is also given as
    GFLOP/s and as a fraction of it."""
    import tempfile

    model_dir = Path(model_dir) if model_dir else DEFAULT_SERVING_MODEL
    source = _test_2016_source()
    reason = None
    if not (model_dir / "run_config.json").exists():
        reason = (f"no trained model at {model_dir} (give --model-dir MDIR of a trained "
                  "Transformer run; the benchmark does not train one)")
    elif source is None:
        reason = "Multi30k test 2016 not found (set TRANSFORMER_TF_DATA)"
    else:
        reason = missing_modules(["ctranslate2"])
    if reason is not None:
        log(f"serving: skipped, {reason}")
        benchmarks["serving_multi30k_beam4"] = {"metric": "sentences_per_s", "ours": None,
                                                "peer": None, "skipped": reason}
        return None
    prepared = runner.results.get("serving_prepare")
    if prepared is None:
        out = tempfile.mkdtemp(prefix="transformer_tf_serving_")
        runner.temporary.append(out)
        prepared, error = runner.run("serving_prepare", "serving_prepare",
                                     ["--model-dir", str(model_dir), "--out", out])
        if prepared is None:
            benchmarks["serving_multi30k_beam4"] = {"metric": "sentences_per_s", "ours": None,
                                                    "peer": None, "skipped": error}
            return None
    shape = common.shape_of_model(json.loads((model_dir / "run_config.json").read_text()))
    args = ["--source", str(source), "--sentences", str(sentences)]
    reference = common.multi30k_test_2016("de")
    if reference.exists():
        args += ["--reference", str(reference)]
    # Lanes: both engines with one thread per operation and `lanes` parts of a call at once.
    in_lanes = ["--intra-op", "1", "--inter-op", str(prepared["lanes"])]

    translations = Path(tempfile.mkdtemp(prefix="transformer_tf_translations_"))
    runner.temporary.append(str(translations))

    def serve(name, engine, model, *extra, env=None):
        return runner.run(name, "serving", ["--engine", engine, "--model", model, *args,
                                            "--translations", str(translations / name), *extra],
                          needs=["ctranslate2"] if engine == "ctranslate2" else (), env=env)

    def same_outputs(name, other, batch):
        return _identical_share(translations / name, translations / other, batch)

    ours, ours_error = serve("serving_savedmodel", "savedmodel", prepared["savedmodel"])
    variants = {}
    for variant in ("unchunked", "chunked_xla", "k_finished", "lanes", "lanes_k_finished"):
        variants[variant] = serve(
            f"serving_savedmodel_{variant}", "savedmodel", prepared[f"savedmodel_{variant}"],
            *(["--warm-up-buckets"] if variant.endswith("xla") else []),
            *(in_lanes if variant.startswith("lanes") else []))
    peer, peer_error = serve("serving_ctranslate2", "ctranslate2", prepared["ctranslate2"])
    peer_lanes, _ = serve("serving_ctranslate2_lanes", "ctranslate2", prepared["ctranslate2"],
                          *in_lanes)

    greedy, greedy_error = serve("serving_savedmodel_greedy", "savedmodel",
                                 prepared["savedmodel_greedy"])
    greedy_lanes, _ = serve("serving_savedmodel_greedy_lanes", "savedmodel",
                            prepared["savedmodel_greedy_lanes"], *in_lanes)
    greedy_xla, greedy_xla_error = serve("serving_savedmodel_greedy_chunked_xla", "savedmodel",
                                         prepared["savedmodel_greedy_chunked_xla"],
                                         "--warm-up-buckets")
    peer_greedy, peer_greedy_error = serve("serving_ctranslate2_greedy", "ctranslate2",
                                           prepared["ctranslate2_greedy"])
    peer_greedy_lanes, _ = serve("serving_ctranslate2_greedy_lanes", "ctranslate2",
                                 prepared["ctranslate2_greedy"], *in_lanes)


    for batch in (1, 8, 64):
        mine, theirs = run_where(greedy, batch=batch), run_where(peer_greedy, batch=batch)
        mine_lanes = run_where(greedy_lanes, batch=batch)
        mine_xla = run_where(greedy_xla, batch=batch)
        theirs_lanes = run_where(peer_greedy_lanes, batch=batch)
        entry = {
            "metric": "sentences_per_s", "higher_is_better": True,
            "ours": value_of(mine, "sentences_per_s"), "peer": value_of(theirs, "sentences_per_s"),
            "ours_lanes": value_of(mine_lanes, "sentences_per_s"),
            "ours_chunked_xla": value_of(mine_xla, "sentences_per_s"),
            "peer_lanes": value_of(theirs_lanes, "sentences_per_s"), "lanes": prepared["lanes"],
            "chunk_size": prepared.get("chunk_size"),
            "xla_chunk_size": prepared.get("xla_chunk_size"),
            "peer_name": "CTranslate2 float32, greedy, on the converted checkpoint",
            "ours_error": greedy_error, "ours_chunked_xla_error": greedy_xla_error,
            "peer_missing": peer_greedy_error,
            "ours_bleu": value_of(mine, "bleu"), "peer_bleu": value_of(theirs, "bleu"),
            "model_dir": str(model_dir), "checkpoint": prepared.get("checkpoint"),
            "details": {"ours": mine, "peer": theirs, "ours_lanes": mine_lanes,
                        "ours_chunked_xla": mine_xla, "peer_lanes": theirs_lanes},
        }
        _serving_gflops(entry, {"ours": mine, "ours_lanes": mine_lanes,
                                "ours_chunked_xla": mine_xla, "peer": theirs,
                                "peer_lanes": theirs_lanes}, shape, 1, peak)
        if batch == 1:
            _add_latencies(entry, ours=mine, ours_chunked_xla=mine_xla, peer=theirs)
        if batch == 64:
            entry["target_ratio"] = TARGETS["serving_greedy_vs_ctranslate2_batch64"]
        benchmarks[f"serving_multi30k_greedy_batch{batch}"] = compare(entry)

    for batch in (1, 8, 64):
        mine, theirs = run_where(ours, batch=batch), run_where(peer, batch=batch)
        variant_runs = {v: run_where(result, batch=batch)
                        for v, (result, _) in variants.items()}
        theirs_lanes = run_where(peer_lanes, batch=batch)
        entry = {
            "metric": "sentences_per_s", "higher_is_better": True,
            "ours": value_of(mine, "sentences_per_s"), "peer": value_of(theirs, "sentences_per_s"),
            **{f"ours_{v}": value_of(r, "sentences_per_s") for v, r in variant_runs.items()},
            "peer_lanes": value_of(theirs_lanes, "sentences_per_s"),
            "lanes": prepared["lanes"],
            **{f"ours_{v}_error": error for v, (_, error) in variants.items()},
            "chunk_size": prepared.get("chunk_size"),
            "xla_chunk_size": prepared.get("xla_chunk_size"),
            "peer_name": "CTranslate2 float32 on the converted checkpoint (+ sentencepiece)",
            "ours_error": ours_error, "peer_missing": peer_error,
            "ours_target_tokens_per_s": value_of(mine, "target_tokens_per_s"),
            "peer_target_tokens_per_s": value_of(theirs, "target_tokens_per_s"),
            "ours_bleu": value_of(mine, "bleu"), "peer_bleu": value_of(theirs, "bleu"),
            "model_dir": str(model_dir), "checkpoint": prepared.get("checkpoint"),
            "details": {"ours": mine, **{f"ours_{v}": r for v, r in variant_runs.items()},
                        "peer": theirs, "peer_lanes": theirs_lanes,
                        "ours_decoding": value_of(ours, "decoding"),
                        "peer_decoding": value_of(peer, "decoding")},
        }
        _serving_gflops(entry, {"ours": mine, **{f"ours_{v}": r for v, r in variant_runs.items()},
                                "peer": theirs, "peer_lanes": theirs_lanes},
                        shape, prepared["beam_size"], peak)
        if batch == 1:
            _add_latencies(entry, ours=mine, peer=theirs)
        if batch == 64:
            entry["target_ratio"] = TARGETS["serving_vs_ctranslate2_batch64"]
        benchmarks[f"serving_multi30k_beam4_batch{batch}"] = compare(entry)

    bf16 = serve("serving_savedmodel_bf16", "savedmodel", prepared["savedmodel_bf16"])
    bf16_lanes = serve("serving_savedmodel_bf16_lanes", "savedmodel",
                       prepared["savedmodel_bf16_lanes"], *in_lanes)
    # Per precision of ours: (one search, 2 lanes), each a (result, error) pair.
    ours_by_precision = {"float32": ((ours, ours_error), variants["lanes"]),
                         "bfloat16": (bf16, bf16_lanes)}
    peers = {}  # compute type -> (one translator, 2 in lanes), each a (result, error) pair
    for compute_type in CT2_COMPUTE_TYPES:
        if compute_type in prepared["ct2_compute_types"]:
            name, model = f"serving_ctranslate2_{compute_type}", prepared["ctranslate2"]
            peers[compute_type] = (
                serve(name, "ctranslate2", model, "--compute-type", compute_type),
                serve(f"{name}_lanes", "ctranslate2", model, "--compute-type", compute_type,
                      *in_lanes))
    for batch in (1, 8, 64):
        for compute_type, (ours_precision, comparison) in CT2_COMPUTE_TYPES.items():
            (mine, mine_error), (mine_lanes, _) = ours_by_precision[ours_precision]
            unsupported = (None, f"CTranslate2 compute_type {compute_type} not supported on "
                                 f"this CPU (it lists {', '.join(prepared['ct2_compute_types'])})")
            (theirs, theirs_error), (theirs_lanes, _) = peers.get(compute_type,
                                                                  (unsupported, unsupported))
            entry = _precision_entry(run_where(mine, batch=batch), mine_error,
                                     run_where(theirs, batch=batch), theirs_error,
                                     f"CTranslate2 {compute_type} on the converted checkpoint",
                                     comparison, ours_precision, prepared,
                                     lanes=(run_where(mine_lanes, batch=batch),
                                            run_where(theirs_lanes, batch=batch)))
            entry["peer_same_outputs_as_its_float32"] = same_outputs(
                f"serving_ctranslate2_{compute_type}", "serving_ctranslate2", batch)
            benchmarks[f"serving_multi30k_beam4_batch{batch}_ct2_{compute_type}"] = entry
    # Our two precisions like with like: one search each, and both in lanes of one thread
    # (one thread's bfloat16 products gain more over float32 than two threads' do).
    for layout, pair in (("", 0), ("_lanes", 1)):
        (mine, mine_error), (theirs, theirs_error) = (ours_by_precision["bfloat16"][pair],
                                                      ours_by_precision["float32"][pair])
        in_same_lanes = ("", "") if not layout else (" in the same lanes", ", both in lanes")
        for batch in (1, 8, 64):
            entry = _precision_entry(run_where(mine, batch=batch), mine_error,
                                     run_where(theirs, batch=batch), theirs_error,
                                     f"our float32 export{in_same_lanes[0]}",
                                     f"like with like: our two precisions{in_same_lanes[1]}",
                                     "bfloat16", prepared, TARGETS["serving_bf16_vs_float32"])
            entry["same_outputs_as_float32"] = same_outputs(
                f"serving_savedmodel_bf16{layout}", f"serving_savedmodel{layout}", batch)
            name = f"serving_multi30k_beam4_batch{batch}_bf16{layout}_vs_float32{layout}"
            benchmarks[name] = entry
    flipped, _ = serve("serving_savedmodel_lanes_padding_flipped", "savedmodel",
                       prepared["savedmodel_lanes_padding_flipped"], *in_lanes)
    # The default and lanes exports again, with TensorFlow's other library of CPU matrix
    # products (as the decode section does, bench/workloads.py).
    _, other_setting = other_matmul_library(prepared["matmul_library"])
    other, _ = serve("serving_savedmodel_other_library", "savedmodel", prepared["savedmodel"],
                     env=other_setting)
    other_lanes, _ = serve("serving_savedmodel_lanes_other_library", "savedmodel",
                           prepared["savedmodel_lanes"], *in_lanes, env=other_setting)
    return _fast_paths(prepared, ours, {v: result for v, (result, _) in variants.items()},
                       flipped, {"": other, "lanes": other_lanes})


def _identical_share(a: Path, b: Path, batch: int) -> float | None:
    """The share of sentences two serving runs translated identically at batch size
    `batch`, from the files the worker wrote with --translations; None if either is
    missing (a run that failed or was skipped)."""
    paths = [directory / f"batch{batch}.txt" for directory in (a, b)]
    if not all(path.exists() for path in paths):
        return None
    first, second = (path.read_text(encoding="utf-8").splitlines() for path in paths)
    count = min(len(first), len(second))
    return round(sum(x == y for x, y in zip(first, second)) / count, 4) if count else None


def _precision_entry(mine, mine_error, theirs, theirs_error, peer_name: str,
                     comparison: str, ours_precision: str, prepared: dict,
                     target=None, lanes=None) -> dict:
    """A serving entry of one of our runs against a run in another arithmetic (worker
    runs of one batch size), with both BLEU scores and what kind of comparison it is.
    `lanes`: (ours, theirs) in 2 lanes each, giving "ours_lanes", "peer_lanes" and so
    `compare`'s "ratio_best" (each engine at its better layout)."""
    entry = {"metric": "sentences_per_s", "higher_is_better": True,
             "ours": value_of(mine, "sentences_per_s"), "peer": value_of(theirs, "sentences_per_s"),
             "ours_precision": ours_precision, "comparison": comparison,
             "ours_bleu": value_of(mine, "bleu"), "peer_bleu": value_of(theirs, "bleu"),
             "peer_name": peer_name, "ours_error": mine_error, "peer_missing": theirs_error,
             "native_bfloat16": prepared.get("native_bfloat16"),
             "details": {"ours": mine, "peer": theirs}}
    if lanes is not None:
        entry["ours_lanes"], entry["peer_lanes"] = (value_of(run, "sentences_per_s")
                                                    for run in lanes)
        entry["details"].update(ours_lanes=lanes[0], peer_lanes=lanes[1])
    if ours_precision == "bfloat16" and not prepared.get("native_bfloat16"):
        entry["note"] = ("this CPU has no native bfloat16: our bfloat16 export ran "
                         "TensorFlow's emulation (forced)")
    if target is not None:
        entry["target_ratio"] = target
    return compare(entry)


def _fast_paths(prepared: dict, ours, variants: dict, flipped, other_library: dict) -> dict:
    """Which inference fast paths paid on this CPU, from serving runs paired in this run:
    per path its sentences/s with it on over off at each batch size ("on_over_off"),
    whether the export turns it on by default here ("default_on"), and what was compared.
    `variants` are the serving section's SavedModel variant results, `flipped` the lanes
    export with the kernel padding the other way round from the default, `other_library`
    the default export ("") and the lanes export ("lanes") served with the other library
    of matrix products. Path "onednn" (and "onednn_lanes") is oneDNN's products over
    Eigen's; it is "on by default" where TensorFlow picks oneDNN on this CPU."""
    padded = prepared["kernel_padding_default"]
    onednn = prepared["matmul_library"] == "onednn"

    def on_off(default_run, flipped_run, on_by_default: bool) -> tuple:
        """(on, off, default_on) of a path run both ways round from the same export."""
        return ((default_run, flipped_run) if on_by_default
                else (flipped_run, default_run)) + (on_by_default,)

    pairs = {  # path -> (on, off, default_on, what)
        "chunking": (ours, variants.get("unchunked"), True,
                     "default export (chunks sorted by length) / unchunked"),
        "lanes": (variants.get("lanes"), ours, False,
                  f"{prepared['lanes']} lanes (intra-op 1) / one search"),
        "xla": (variants.get("chunked_xla"), ours, False,
                "chunked XLA export / default export"),
        "kernel_padding": on_off(variants.get("lanes"), flipped, padded) + (
            "lanes export with padded / plain kernels",),
        "onednn": on_off(ours, other_library[""], onednn) + (
            "default export, oneDNN / Eigen products",),
        "onednn_lanes": on_off(variants.get("lanes"), other_library["lanes"], onednn) + (
            f"{prepared['lanes']} lanes, oneDNN / Eigen products",),
    }
    paths = {}
    for path, (on, off, default_on, what) in pairs.items():
        paths[path] = {"default_on": default_on, "compared": what, "on_over_off": {
            f"batch{batch}": ratio_of(value_of(run_where(on, batch=batch), "sentences_per_s"),
                                    value_of(run_where(off, batch=batch), "sentences_per_s"))
            for batch in (1, 8, 64)}}
    return {"cpu_kind": prepared["cpu_kind"], "matmul_library": prepared["matmul_library"],
            "paths": paths}
