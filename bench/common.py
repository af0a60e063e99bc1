"""Shared pieces of the benchmark workers: shapes, thread settings, timing, FLOPs, memory.

Every worker (bench/workers/*.py) runs in its own process, started by bench/run_all.py,
and prints one JSON object on its last stdout line. This module must stay importable
without TensorFlow, PyTorch or CTranslate2 (each worker imports the engine it needs).
"""
from __future__ import annotations

import dataclasses
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
for _path in (str(ROOT), str(BENCH)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from transformer_tf.config import NUM_SPECIAL_IDS  # noqa: E402  (light: no TF import)

THREADS = 2


def set_thread_env(threads: int = THREADS) -> None:
    """Environment thread limits; call before importing numpy / TF / torch."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                 "TF_NUM_INTRAOP_THREADS"):
        os.environ[name] = str(threads)
    os.environ["TF_NUM_INTEROP_THREADS"] = "1"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # OpenMP engines (PyTorch, CTranslate2) spin-wait by default; on a shared, oversubscribed
    # machine that costs them 2-3x (measured here), so their threads sleep when idle.
    # TensorFlow's own thread pool is not affected. Export OMP_WAIT_POLICY to override.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@dataclasses.dataclass(frozen=True)
class Shape:
    """The model shape a benchmark runs at (the same for us and for every peer)."""

    name: str
    vocab_size: int
    num_layers: int
    d_model: int
    d_ff: int
    num_heads: int

    @property
    def encoder_params(self) -> int:
        """Weights of the encoder stack (matmul weights and biases, LayerNorms)."""
        d, f = self.d_model, self.d_ff
        attention = 4 * (d * d + d)
        ffn = d * f + f + f * d + d
        return self.num_layers * (attention + ffn + 2 * 2 * d)

    @property
    def cross_kv_params(self) -> int:
        """Keys/values projections of the decoder's cross-attention (all layers)."""
        d = self.d_model
        return self.num_layers * 2 * (d * d + d)

    @property
    def decoder_params(self) -> int:
        """Weights of the decoder stack (self- and cross-attention, FFN, LayerNorms)."""
        d, f = self.d_model, self.d_ff
        attention = 4 * (d * d + d)
        ffn = d * f + f + f * d + d
        return self.num_layers * (2 * attention + ffn + 3 * 2 * d)

    @property
    def projection_params(self) -> int:
        """Pre-softmax projection (tied with the embeddings, counted once here)."""
        return self.vocab_size * self.d_model

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "encoder_params": self.encoder_params,
                "decoder_params": self.decoder_params,
                "projection_params": self.projection_params}


SHAPES = {
    # Transformer base (paper Table 3), shared 37k vocabulary.
    "base": Shape("base", vocab_size=37000, num_layers=6, d_model=512, d_ff=2048, num_heads=8),
    # transformer_tf's "multi30k" preset (get_preset("multi30k").model).
    "multi30k": Shape("multi30k", vocab_size=8000, num_layers=3, d_model=256, d_ff=1024,
                      num_heads=4),
    # For developing the bench itself: seconds per run.
    "tiny": Shape("tiny", vocab_size=512, num_layers=1, d_model=64, d_ff=128, num_heads=2),
}


def training_flops(shape: Shape, batch: int, source_len: int, target_len: int) -> float:
    """FLOPs of one training step: 6 x parameters x tokens (forward 2, backward 4).

    Encoder weights see the source tokens; decoder weights and the output projection
    see the target tokens. Attention scores (QK^T, AV: about 1% at 32 tokens) and the
    embedding lookups are not counted.
    """
    source_tokens = batch * source_len
    target_tokens = batch * target_len
    return 6.0 * (shape.encoder_params * source_tokens
                  + (shape.decoder_params + shape.projection_params) * target_tokens)


def decoding_flops(shape: Shape, batch: int, source_len: int, output_len: int,
                   beam: int) -> float:
    """Forward FLOPs of a cached decode of `batch` sentences of these lengths."""
    return translation_flops(shape, batch * source_len, batch * output_len, beam)


def translation_flops(shape: Shape, source_tokens: int, output_tokens: int,
                      beam: int) -> float:
    """Forward FLOPs of translating sentences of `source_tokens` tokens in all into
    `output_tokens` tokens (EOS included): 2 x parameters x tokens.

    The encoder and the cross-attention keys/values run once per source token; the
    rest of the decoder and the projection once per output token of each of `beam`
    beams. Attention over the caches is not counted, nor the steps a beam search runs
    past the output's length (hypotheses longer than the one returned, the exact
    stopping rule's proof steps): the same useful work for every engine that returns
    the same translations.
    """
    per_step = shape.decoder_params - shape.cross_kv_params + shape.projection_params
    return 2.0 * ((shape.encoder_params + shape.cross_kv_params) * source_tokens
                  + per_step * beam * output_tokens)


def shape_of_model(run_config: dict) -> Shape | None:
    """The `Shape` of a trained model (its model directory's run_config.json, read as a
    dict), or None when the parameter counts above do not describe it: not a Transformer,
    unequal encoder and decoder depths, heads not d_model wide in all, untied
    vocabularies."""
    config = run_config["model"]
    heads, d = config["num_heads"], config["d_model"]
    if (run_config.get("family", "transformer") != "transformer"
            or config.get("num_decoder_layers") not in (None, config["num_layers"])
            or any(heads * (config.get(key) or d // heads) != d
                   for key in ("key_dim", "value_dim"))
            or config.get("target_vocab_size") not in (None, config["vocab_size"])):
        return None
    return Shape("served", vocab_size=config["vocab_size"], num_layers=config["num_layers"],
                 d_model=config["d_model"], d_ff=config["d_ff"], num_heads=config["num_heads"])


def decoding_figures(timing: dict, shape: Shape, batch: int, source_len: int,
                     output_len: int, beam: int) -> dict:
    """Throughput and achieved GFLOP/s of a decode of `batch` sentences x `output_len`
    tokens, from `time_calls`' best and median seconds."""
    flops = decoding_flops(shape, batch, source_len, output_len, beam)
    tokens = batch * output_len
    return {
        "output_tokens_per_s": tokens / timing["best_s"],
        "output_tokens_per_s_median": tokens / timing["median_s"],
        "sentences_per_s": batch / timing["best_s"],
        "gflop_per_decode": flops / 1e9,
        "achieved_gflops": flops / timing["best_s"] / 1e9,
    }


def random_ids(rng, batch: int, length: int, vocab: int):
    """Random token ids in [NUM_SPECIAL_IDS, vocab): no PAD/UNK/BOS/EOS (numpy int32
    [batch, length])."""
    return rng.integers(NUM_SPECIAL_IDS, vocab, size=(batch, length), dtype="int32")


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux ru_maxrss is KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2 ** 20
    except OSError:
        return float("nan")


def time_calls(fn, repeats: int, warmup: int = 1, max_seconds: float | None = None) -> dict:
    """Calls `fn()` `warmup` times untimed, then up to `repeats` times timed.

    Stops early once `max_seconds` of timed calls have passed (at least one call is
    always timed). Returns best / median / all times in seconds and the warm-up time.
    """
    start = time.perf_counter()
    for _ in range(warmup):
        fn()
    warmup_seconds = time.perf_counter() - start
    times = []
    total = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        total += times[-1]
        if max_seconds is not None and total >= max_seconds:
            break
    return {"best_s": min(times), "median_s": statistics.median(times),
            "times_s": [round(t, 4) for t in times], "warmup_s": round(warmup_seconds, 3)}


def data_dir() -> Path:
    """Where the local corpora are: $TRANSFORMER_TF_DATA, else ../shared/data beside the
    checkout."""
    return Path(os.environ.get("TRANSFORMER_TF_DATA", ROOT.parent / "shared" / "data"))


def multi30k_test_2016(language: str = "en") -> Path:
    return data_dir() / "multi30k" / f"test_2016_flickr.{language}.gz"


def first_lines(path: Path, limit: int) -> list[str]:
    """The first `limit` lines of a gzipped UTF-8 text file, without line ends."""
    import gzip

    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for _, line in zip(range(limit), handle)]


def best_translate_seconds(translator, batches, passes: int) -> float:
    """Seconds of the fastest of `passes` passes of `translator.translate` over `batches`
    (text in, text out, results fetched)."""
    best = float("inf")
    for _ in range(passes):
        started = time.perf_counter()
        for batch in batches:
            translator.translate(batch)["translation"].numpy()
        best = min(best, time.perf_counter() - started)
    return best


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def emit(result: dict) -> None:
    """Prints the worker's result as the last line of stdout (what run_all.py parses)."""
    result.setdefault("peak_rss_mb", round(peak_rss_mb(), 1))
    result.setdefault("load_average_end", load_average())
    sys.stdout.flush()
    print(json.dumps(result), flush=True)


def refuse_existing_outputs(parser, paths, flag: str = "--out") -> None:
    """Stops the command with `parser.error` (its usage, exit status 2) when any of the
    files `flag` would write already holds one: call it right after parsing, so a long
    benchmark never ends by silently replacing a file the user owns. `paths` are every
    file the flag derives (OUT.md, OUT.json, OUT.png, ...); None entries are skipped."""
    from transformer_tf.runtime.outputs import refuse_existing

    try:
        refuse_existing(paths, "choose another name (or remove the file)")
    except FileExistsError as error:
        parser.error(f"{flag}: {error}")


def csv_list(text, kind=str) -> list:
    """"1,4" -> [1, 4] (with kind=int): the workers' comma-separated options."""
    return [kind(x) for x in text.split(",") if x]


def time_training_step(step, args, shape, batch, source_len, target_len, losses) -> dict:
    """Times `step` (args.repeats / warmup / max_seconds) and returns the throughput, FLOP
    rate and loss figures of a training step (ours and peers alike)."""
    timing = time_calls(step, args.repeats, warmup=args.warmup, max_seconds=args.max_seconds)
    flops = training_flops(shape, batch, source_len, target_len)
    return {**timing,
            "target_tokens_per_s": batch * target_len / timing["best_s"],
            "target_tokens_per_s_median": batch * target_len / timing["median_s"],
            "gflop_per_step": flops / 1e9,
            "achieved_gflops": flops / timing["best_s"] / 1e9,
            "first_loss": losses[0], "last_loss": losses[-1]}
