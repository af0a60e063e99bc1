"""Worker: end-to-end serving on real sentences, text in and text out.

    python bench/workers/serving.py --engine {savedmodel,ctranslate2} --model DIR
        --source FILE [--reference FILE --sentences 1000 --batch-sizes 1,8,64
        --max-seconds S --compute-type float32]

- savedmodel: `tf.saved_model.load(DIR).signatures["serving_default"]` (tokenisation, beam
  search and detokenisation in the graph, as TF Serving runs it; beam and alpha are those
  the SavedModel was exported with), TF intra-op threads --intra-op (2), inter-op
  --inter-op (1; an export with lanes wants intra-op 1 and inter-op = lanes).
- ctranslate2: the CTranslate2 export of the same checkpoint (scripts/export_ctranslate2.py)
  through `CTranslate2Translator`: sentencepiece in Python, `translate_batch`, sentencepiece
  back; intra_threads --intra-op, inter_threads --inter-op (a call then cut into that many
  sub-batches translated at once), in --compute-type (float32; int8, int8_float32,
  int8_bfloat16, bfloat16 where `ctranslate2.get_supported_compute_types("cpu")` lists
  them); the same beam, alpha mapped by `ct2_length_penalty`
  (transformer_tf/export/ctranslate2.py). A SavedModel's arithmetic is its export's
  ("precision" in its assets, reported as "compute_type").

The first `--sentences` lines of `--source`, in file order (requests as they arrive, not
sorted by length), cut into consecutive batches of each size; every batch is one call.
Each batch size first gets one untimed warm-up call; with --warm-up-buckets, every
source length bucket gets one untimed call of each batch size first, made of sentences of
that bucket (an XLA export compiles on the first request of each chunk shape and source
length bucket). Target tokens = sentencepiece pieces of the output text + 1 (the EOS),
source tokens likewise of the input, counted the same way for both engines. Batch 1 also
gives the latency percentiles of its calls. With --max-seconds a batch size stops after
that many timed seconds (the figures then cover the sentences done). With --reference
(the translations of --source, line by line) each batch size also gives the sacreBLEU
of the sentences it translated ("bleu", the default 13a tokenization). With --translations
DIR each batch size's outputs go to DIR/batch<N>.txt, so that two runs can be compared
sentence by sentence.
"""
from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

common.set_thread_env()


def read_lines(path: Path, limit: int) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for _, line in zip(range(limit), handle)]


def percentile(values, q: float) -> float:
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def savedmodel_engine(model_dir: str, intra_op: int, inter_op: int):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the sentencepiece ops)

    tf.config.threading.set_intra_op_parallelism_threads(intra_op)
    tf.config.threading.set_inter_op_parallelism_threads(inter_op)
    from transformer_tf.inference.loading import read_bpe_model, read_export_info

    serving = tf.saved_model.load(model_dir).signatures["serving_default"]

    def translate(batch):
        out = serving(text=tf.constant(batch))["translation"].numpy()
        return [t.decode("utf-8") for t in out]

    info = read_export_info(model_dir)
    return (translate, read_bpe_model(model_dir), info["decoding"],
            {"tensorflow": tf.__version__}, info.get("precision", "float32"))


def ctranslate2_engine(model_dir: str, intra_op: int, inter_op: int,
                       compute_type: str = "float32"):
    import ctranslate2

    from transformer_tf.export.ctranslate2 import (BPE_MODEL, CTranslate2Translator,
                                                   ct2_length_penalty)

    supported = ctranslate2.get_supported_compute_types("cpu")
    if compute_type not in supported:
        raise SystemExit(f"--compute-type {compute_type}: not supported by this CPU "
                         f"(ctranslate2 lists {', '.join(sorted(supported))})")
    runner = CTranslate2Translator(model_dir, intra_threads=intra_op, inter_threads=inter_op,
                                   compute_type=compute_type)
    decoding = runner.decoding.get_config()
    decoding["ct2_length_penalty"] = ct2_length_penalty(runner.decoding.alpha)
    return (runner.translate, (Path(model_dir) / BPE_MODEL).read_bytes(), decoding,
            {"ctranslate2": ctranslate2.__version__}, compute_type)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", required=True, choices=["savedmodel", "ctranslate2"])
    parser.add_argument("--model", required=True, help="SavedModel or CTranslate2 directory")
    parser.add_argument("--source", required=True, help="source sentences (.gz allowed)")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--batch-sizes", default="1,8,64")
    parser.add_argument("--max-seconds", type=float, default=None)
    parser.add_argument("--intra-op", type=int, default=common.THREADS,
                        help=f"threads per operation (default {common.THREADS})")
    parser.add_argument("--inter-op", type=int, default=1,
                        help="operations (TF) or sub-batches (CTranslate2) run at once "
                             "(default 1)")
    parser.add_argument("--reference", help="reference translations of --source, for BLEU")
    parser.add_argument("--translations", default=None,
                        help="write each batch size's outputs to DIR/batch<N>.txt, a line each")
    parser.add_argument("--compute-type", default="float32",
                        help="ctranslate2: its compute_type (default float32)")
    parser.add_argument("--warm-up-buckets", action="store_true",
                        help="one untimed call per source length bucket and batch size "
                             "before timing (XLA exports)")
    args = parser.parse_args(argv)
    report = {"benchmark": "serving", "engine": args.engine,
              "load_average_start": common.load_average(), "runs": []}
    sentences = read_lines(Path(args.source), args.sentences)
    references = read_lines(Path(args.reference), args.sentences) if args.reference else None
    if args.engine == "savedmodel" and args.compute_type != "float32":
        parser.error("--compute-type: a SavedModel runs in its export's precision")
    started = time.perf_counter()
    if args.engine == "savedmodel":
        loaded = savedmodel_engine(args.model, args.intra_op, args.inter_op)
    else:
        loaded = ctranslate2_engine(args.model, args.intra_op, args.inter_op, args.compute_type)
    translate, bpe_proto, decoding, versions, compute_type = loaded
    report.update(load_seconds=round(time.perf_counter() - started, 2), decoding=decoding,
                  versions=versions, intra_op=args.intra_op, inter_op=args.inter_op,
                  compute_type=compute_type)
    import sentencepiece  # not transformer_tf.data.bpe: the CT2 worker runs without TF

    processor = sentencepiece.SentencePieceProcessor(model_proto=bpe_proto)
    if args.warm_up_buckets:
        from transformer_tf.decoding.model_driver import XLA_LENGTH_BUCKET

        started = time.perf_counter()
        by_bucket = {}
        for sentence, ids in zip(sentences, processor.encode(sentences)):
            by_bucket.setdefault(-(-(len(ids) + 1) // XLA_LENGTH_BUCKET), []).append(sentence)
        for batch_size in common.csv_list(args.batch_sizes, int):
            for group in by_bucket.values():
                translate((group * batch_size)[:batch_size])
        report["warm_up_seconds"] = round(time.perf_counter() - started, 1)
        report["warm_up_buckets"] = len(by_bucket)
    for batch_size in common.csv_list(args.batch_sizes, int):
        batches = [sentences[i:i + batch_size] for i in range(0, len(sentences), batch_size)]
        translate(batches[0])  # warm-up (first call of this shape)
        times, done, tokens, source_tokens, translations = [], 0, 0, 0, []
        for batch in batches:
            t0 = time.perf_counter()
            outputs = translate(batch)
            times.append(time.perf_counter() - t0)
            translations += outputs
            done += len(batch)
            tokens += sum(len(ids) + 1 for ids in processor.encode(outputs))
            source_tokens += sum(len(ids) + 1 for ids in processor.encode(batch))
            if args.max_seconds is not None and sum(times) >= args.max_seconds:
                break
        total = sum(times)
        run = {"batch": batch_size, "sentences": done, "seconds": round(total, 3),
               "sentences_per_s": done / total, "target_tokens_per_s": tokens / total,
               "target_tokens": tokens, "source_tokens": source_tokens,
               "compute_type": compute_type}
        if references is not None:
            import sacrebleu

            run["bleu"] = sacrebleu.corpus_bleu(translations, [references[:done]]).score
        if batch_size == 1:
            run.update(latency_p50_ms=1000 * statistics.median(times),
                       latency_p99_ms=1000 * percentile(times, 0.99))
        report["runs"].append(run)
        if args.translations:
            out = Path(args.translations)
            out.mkdir(parents=True, exist_ok=True)
            (out / f"batch{batch_size}.txt").write_text(
                "".join(line.replace("\n", " ") + "\n" for line in translations),
                encoding="utf-8")
    common.emit(report)


if __name__ == "__main__":
    main()
