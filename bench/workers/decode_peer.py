"""Worker: a decoding peer on random weights of our shape.

    python bench/workers/decode_peer.py --engine {ctranslate2,hf} --shapes base,multi30k
        --beams 1,4 [--batch 32 --source-len 32 --output-len 32 --warmup 1 --repeats 3]
        [--compute-types float32,int8,int8_float32,int8_bfloat16,bfloat16]

Same work as bench/workers/decode_tf.py: `batch` random sources of `source_len` tokens
(the last one EOS), exactly `output_len` output tokens each (EOS suppressed until then:
CTranslate2 `min_decoding_length`, HF `min_new_tokens`), greedy (beam 1) or beam search.

- ctranslate2: decode_tf.py's own random-weight Transformer, converted by our exporter
  in a separate process (bench/workers/ct2_model.py; no torch needed), so both engines
  decode the same weights; `Translator(device="cpu", compute_type=T, intra_threads=2,
  inter_threads=1)` for each T of --compute-types that
  `ctranslate2.get_supported_compute_types("cpu")` lists (the others are reported under
  "unsupported_compute_types"), `translate_batch` on the whole batch. Each run records
  its "compute_type" (the hf peer's: float32).
- hf: `MarianMTModel.generate` on a random-weight Marian model of our shape
  (bench/marian_peer.py; KV cache on, `torch.set_num_threads(2)`, no_grad).
"""
from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
from transformer_tf.config import EOS_ID  # noqa: E402

common.set_thread_env()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", required=True, choices=["ctranslate2", "hf"])
    parser.add_argument("--shapes", default="base", help="comma-separated: base,multi30k,tiny")
    parser.add_argument("--beams", default="1,4", help="comma-separated beam sizes; 1 = greedy")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--source-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=None)
    parser.add_argument("--compute-types", default="float32",
                        help="ctranslate2: comma-separated compute types (default float32)")
    args = parser.parse_args(argv)
    compute_types = common.csv_list(args.compute_types)
    if args.engine == "hf" and compute_types != ["float32"]:
        parser.error("--compute-types: the hf peer runs float32 only")
    b, length = args.batch, args.output_len
    report = {"benchmark": "decode", "engine": args.engine,
              "load_average_start": common.load_average(), "runs": []}
    scratch = None
    # Engine imports here, after argument parsing: --help and bad arguments do not load
    # them, and the load average above is sampled before they load.
    import numpy as np

    if args.engine == "ctranslate2":
        import ctranslate2

        report["versions"] = {"ctranslate2": ctranslate2.__version__}
        report["threads"] = {"intra_threads": common.THREADS, "inter_threads": 1}
        supported = ctranslate2.get_supported_compute_types("cpu")
        report["unsupported_compute_types"] = [t for t in compute_types if t not in supported]
        compute_types = [t for t in compute_types if t in supported]
        scratch = tempfile.TemporaryDirectory()
        models = ct2_models(args.shapes, Path(scratch.name))
    else:
        import torch
        import transformers

        import marian_peer

        torch.set_num_threads(common.THREADS)
        report["versions"] = {"torch": torch.__version__,
                              "transformers": transformers.__version__}
        report["threads"] = {"torch": torch.get_num_threads()}

    for shape_name in common.csv_list(args.shapes):
        shape = common.SHAPES[shape_name]
        rng = np.random.default_rng(0)
        source = common.random_ids(rng, b, args.source_len, shape.vocab_size)
        source[:, -1] = EOS_ID
        if args.engine == "ctranslate2":
            model_dir, model_params = models[shape_name]["dir"], models[shape_name]["params"]
            tokens = models[shape_name]["vocabulary"]
            batch = [[tokens[i] for i in row] for row in source]
        else:
            model = marian_peer.build_marian(torch, shape)
            model_params = int(sum(p.numel() for p in model.parameters()))
            input_ids = torch.from_numpy(source).long()
            attention_mask = torch.ones_like(input_ids)

        for compute_type, beam in itertools.product(compute_types,
                                                    common.csv_list(args.beams, int)):
            if args.engine == "ctranslate2":
                translator = ctranslate2.Translator(
                    model_dir, device="cpu", compute_type=compute_type,
                    intra_threads=common.THREADS, inter_threads=1)
            lengths = []
            if args.engine == "ctranslate2":
                def run(beam=beam):
                    out = translator.translate_batch(
                        batch, beam_size=beam, num_hypotheses=1, max_decoding_length=length,
                        min_decoding_length=length, max_batch_size=0)
                    lengths[:] = [len(r.hypotheses[0]) for r in out]
            else:
                def run(beam=beam):
                    with torch.inference_mode():
                        out = model.generate(
                            input_ids=input_ids, attention_mask=attention_mask, num_beams=beam,
                            do_sample=False, max_new_tokens=length, min_new_tokens=length,
                            use_cache=True, num_return_sequences=1)
                    lengths[:] = [out.shape[1] - 1] * b  # minus the decoder start token

            result = {"shape": shape.name, "beam": beam, "batch": b,
                      "compute_type": compute_type,
                      "source_len": args.source_len, "output_len": length,
                      "model_params": model_params, "load_average_start": common.load_average()}
            timing = common.time_calls(run, args.repeats, warmup=args.warmup,
                                       max_seconds=args.max_seconds)
            if set(lengths) != {length}:
                raise SystemExit(
                    f"expected {length} output tokens, got lengths {sorted(set(lengths))}")
            result.update(timing)
            result.update(common.decoding_figures(
                timing, shape, b, args.source_len, length, beam))
            report["runs"].append(result)
    if scratch is not None:
        translator = None  # (released before its directory goes)
        scratch.cleanup()
    common.emit(report)


def ct2_models(shapes: str, out: Path) -> dict:
    """{shape: {"dir", "params", "vocabulary"}}: decode_tf.py's random-weight models as
    CTranslate2 models under `out`, written by bench/workers/ct2_model.py in a process of
    its own (TensorFlow never loads in the process that times CTranslate2)."""
    worker = Path(__file__).resolve().parent / "ct2_model.py"
    done = subprocess.run([sys.executable, str(worker), "--shapes", shapes, "--out", str(out)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{worker.name} failed (exit {done.returncode}):\n"
                         + "\n".join(done.stderr.strip().splitlines()[-15:]))
    return json.loads(done.stdout.strip().splitlines()[-1])["models"]


if __name__ == "__main__":
    main()
