"""The Transformer paper's Table 2, measured here: two main-job runs (e.g. the Transformer
and ConvS2S, trained for the same time on the same machine) side by side.

For each run directory (a `scripts/main_job.py --work-dir`): parameters, training steps
and time, training target tokens/s (median of the logged windows), training FLOPs per
target token (bench/model_flops.py: one counting rule for every family), test BLEU at the
model's own beam (the main job's decode) and at beam 4, and beam-search sentences/s of
the exported SavedModel's `serving_default` (raw text in and out, batches of 64, every
test sentence; the runs alternate, best of `--speed-rounds`).

    .venv/bin/python bench/table2.py runs/compare/transformer runs/compare/convs2s \\
        --out runs/bench/table2
"""
from __future__ import annotations

import argparse
import json
import pathlib
import time

import common
import model_flops


def _serving_speed(saved_model: str, sentences: list[str], batch_size: int) -> float:
    """Sentences/s of `serving_default` over `sentences` (one untimed warm-up batch)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

    signature = tf.saved_model.load(saved_model).signatures["serving_default"]
    signature(text=tf.constant(sentences[:batch_size]))
    started = time.perf_counter()
    for start in range(0, len(sentences), batch_size):
        signature(text=tf.constant(sentences[start:start + batch_size]))
    return len(sentences) / (time.perf_counter() - started)


def describe_run(work_dir: pathlib.Path) -> dict:
    """Everything but the speed: from summary.json, the logs and the model itself."""
    from transformer_tf.data.prepared_reader import load_prepared
    from transformer_tf.evaluation.hypothesis_files import read_lines
    from transformer_tf.evaluation.scoring import evaluate
    from transformer_tf.inference.batch import load_translator, translate_lines
    from transformer_tf.inference.loading import load_trained, source_decoding
    from transformer_tf.rundir.logged_scalars import median_logged_scalar
    from transformer_tf.rundir.model_dir import read_run_config

    summary = json.loads((work_dir / "summary.json").read_text())
    paths = summary["paths"]
    run = read_run_config(paths["model_dir"])
    model = load_trained(paths["model_dir"], paths["chosen_checkpoint"])[0]
    prepared = load_prepared(paths["data_dir"])
    test = prepared.files("test")
    sources, references = read_lines(test.source), read_lines(test.target)
    tokens_per_s = median_logged_scalar(pathlib.Path(paths["tensorboard_logdir"]) / "train",
                                        "target_tokens_per_second")
    row = {
        "run": str(work_dir), "family": run.family, "preset": summary["preset"],
        "parameters": summary["parameters"], "train_steps": summary["train_steps"],
        "train_minutes": summary["stage_seconds"]["train"] / 60.0,
        "train_target_tokens_per_s": tokens_per_s,
        "training_flops_per_target_token": model_flops.training_flops_per_target_token(model),
        "checkpoint": summary["chosen"], "own_beam": run.decoding.beam_size,
        "own_alpha": run.decoding.alpha,
        "test_bleu_own_beam": summary["sacrebleu"],
        "test_bleu_lc_tok_own_beam": summary["bleu_lowercase_tokenized"],
        "saved_model": paths["saved_model"], "sentences": sources,
    }
    if run.decoding.beam_size == 4:
        row["test_bleu_beam4"] = row["test_bleu_own_beam"]
        row["test_bleu_lc_tok_beam4"] = row["test_bleu_lc_tok_own_beam"]
    else:
        paper = source_decoding(model=paths["saved_model"]).replace(beam_size=4, alpha=0.6)
        beam4 = load_translator(model=paths["saved_model"], decoding=paper)
        outputs, _ = translate_lines(beam4, sources, progress=False)
        scores = evaluate([o[0] for o in outputs], references, lang=prepared.target_language)
        row["test_bleu_beam4"] = scores.to_dict()["bleu"]
        row["test_bleu_lc_tok_beam4"] = scores.to_dict()["bleu_lowercase_tokenized"]
    return row


def format_table(rows: list[dict]) -> str:
    def number(value, digits=1):
        return "n/a" if value is None else f"{value:,.{digits}f}"

    lines = [
        "| model | params | steps in time | train target tok/s | train GFLOP / target tok | "
        "test BLEU own beam (lc tok) | test BLEU beam 4 (lc tok) | SavedModel sent/s (own beam) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['family']} (`{r['preset']}`) | {r['parameters'] / 1e6:.1f} M | "
            f"{r['train_steps']} in {r['train_minutes']:.0f} min | "
            f"{number(r['train_target_tokens_per_s'], 0)} | "
            f"{r['training_flops_per_target_token'] / 1e9:.3f} | "
            f"{number(r['test_bleu_own_beam'], 2)} ({number(r['test_bleu_lc_tok_own_beam'], 2)}), "
            f"beam {r['own_beam']} | {number(r['test_bleu_beam4'], 2)} "
            f"({number(r['test_bleu_lc_tok_beam4'], 2)}) | {number(r['serving_sentences_per_s'])} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("work_dirs", nargs="+", help="main-job work directories")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--speed-rounds", type=int, default=2)
    parser.add_argument("--out", help="write OUT.md and OUT.json (neither may exist yet)")
    args = parser.parse_args(argv)
    if args.out:
        common.refuse_existing_outputs(parser, [args.out + ".md", args.out + ".json"])
    common.set_thread_env()
    rows = [describe_run(pathlib.Path(d)) for d in args.work_dirs]
    for row in rows:
        row["serving_sentences_per_s_rounds"] = []
    for _ in range(args.speed_rounds):  # alternate the models: the machine's load drifts
        for row in rows:
            row["serving_sentences_per_s_rounds"].append(
                _serving_speed(row["saved_model"], row["sentences"], args.batch_size))
    for row in rows:
        row["serving_sentences_per_s"] = max(row["serving_sentences_per_s_rounds"])
        row["test_sentences"] = len(row.pop("sentences"))
    table = format_table(rows)
    print(table)
    if args.out:
        pathlib.Path(args.out + ".md").write_text(table + "\n")
        pathlib.Path(args.out + ".json").write_text(json.dumps(
            {"machine": {"load_average": common.load_average()}, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
