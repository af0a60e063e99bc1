"""The main job, end to end: prepare, train, average, decode, score, export, translate.

`scripts/main_job.py` (the README's first command) runs `run_recipe`. An existing prepared
directory is reused, and training resumes from the run's last checkpoint: with a step or
epoch plan a finished run trains no further; with a time budget each invocation trains for
another budget. Averaging, decoding, scoring and export are always redone.

Layout under `work_dir` (default runs/<dataset>_<src>_<tgt>):
    data/                      prepared corpus and shared BPE (scripts/prepare_data.py)
    model/                     checkpoints, averaged/, logs/ (TensorBoard), run_config.json
    test.hyp.<tgt>             beam-search translations of the test set
    scores.json                sacreBLEU, chrF, tokenized BLEU variants
    summary.json               where everything went, and the figures
and the SavedModel under saved_models/<name>/<version>.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import pathlib
import time

logger = logging.getLogger(__name__)

DEMO_SENTENCES = {
    "en": ["A man in a blue shirt is riding a bicycle down the street.",
           "Two young children are playing with a dog in the park.",
           "A woman is sitting on a bench and reading a book."],
}


@dataclasses.dataclass
class RecipeOptions:
    """Options of the main job (see scripts/main_job.py --help)."""

    dataset: str = "multi30k"
    source_language: str = "en"
    target_language: str = "de"
    vocab_size: int = 8000
    data_dir: str | None = None
    work_dir: str | None = None
    preset: str = "multi30k"
    train_minutes: float | None = 20.0
    epochs: float | None = None
    max_steps: int | None = None
    eval_every: int = 500
    average_last: int | None = None
    beam_size: int = 4
    alpha: float = 0.6
    batch_size: int = 64
    test_limit: int | None = None
    export_name: str | None = None
    export_version: int = 1
    saved_models_dir: str = "saved_models"
    model_overrides: dict = dataclasses.field(default_factory=dict)
    training_overrides: dict = dataclasses.field(default_factory=dict)
    validation_sentences: int = 200
    verbose: int = 1


def _resolved_work_dir(options: RecipeOptions) -> pathlib.Path:
    name = f"{options.dataset}_{options.source_language}_{options.target_language}"
    return pathlib.Path(options.work_dir or pathlib.Path("runs") / name)


def _step(message: str):
    print(f"\n==> {message}", flush=True)


def run_recipe(options: RecipeOptions) -> dict:
    """Run every step; returns (and writes to summary.json) the summary."""
    from transformer_tf.data.prepare import load_prepared, prepare_dataset
    from transformer_tf.data import bpe as bpe_lib
    from transformer_tf.evaluation import evaluate
    from transformer_tf.evaluation.textfiles import read_lines
    from transformer_tf.export.batch_translate import load_translator, translate_lines
    from transformer_tf.export.saved_model import export_model_dir
    from transformer_tf.training import checkpoints
    from transformer_tf.training.fit import TrainOptions, train
    from transformer_tf.training.model_dir import averaged_prefix, read_run_config

    started = time.monotonic()
    work_dir = _resolved_work_dir(options)
    data_dir, model_dir = work_dir / "data", work_dir / "model"
    src, tgt = options.source_language, options.target_language

    _step(f"1/6 prepare {options.dataset} {src}->{tgt} with a shared BPE of "
          f"{options.vocab_size} pieces -> {data_dir}")
    if (data_dir / "prepared.json").exists():
        prepared = load_prepared(data_dir)
        print(f"already prepared: {data_dir}")
    else:
        prepared = prepare_dataset(options.dataset, src, tgt, data_dir,
                                   bpe_options=bpe_lib.BpeOptions(vocab_size=options.vocab_size),
                                   data_dir=options.data_dir)

    _step(f"2/6 train preset {options.preset!r} -> {model_dir} "
          f"(TensorBoard: tensorboard --logdir {model_dir / 'logs'})")
    result = train(TrainOptions(
        data_dir=str(data_dir), model_dir=str(model_dir), preset=options.preset,
        model_overrides=options.model_overrides, training_overrides=options.training_overrides,
        max_steps=options.max_steps, epochs=options.epochs, max_minutes=options.train_minutes,
        eval_every=options.eval_every, validation_sentences=options.validation_sentences,
        verbose=options.verbose))
    run = read_run_config(model_dir)

    _step(f"3/6 average the last checkpoints -> {averaged_prefix(model_dir)}")
    averaged = checkpoints.average_run(model_dir, options.average_last, allow_fewer=True)
    print(f"averaged {[pathlib.Path(p).name for p in averaged.sources]} -> {averaged.path}")

    test_files = prepared.files("test")
    sources = read_lines(test_files.source)
    references = read_lines(test_files.target)
    if options.test_limit:
        sources, references = sources[:options.test_limit], references[:options.test_limit]
    _step(f"4/6 translate {len(sources)} test sentences (beam {options.beam_size}, "
          f"alpha {options.alpha}) and score them")
    translator = load_translator(model_dir=str(model_dir), checkpoint=averaged.path,
                                 beam_size=options.beam_size, alpha=options.alpha)
    decode_start = time.monotonic()
    translations, _ = translate_lines(translator, sources, options.batch_size,
                                      progress=options.verbose > 0)
    decode_seconds = time.monotonic() - decode_start
    hypotheses = [row[0] for row in translations]
    hyp_path = work_dir / f"test.hyp.{tgt}"
    hyp_path.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    report = evaluate(hypotheses, references, lang=tgt)
    (work_dir / "scores.json").write_text(report.to_json())
    print(report.format_text())

    name = options.export_name or f"{options.dataset}_{src}_{tgt}"
    export_dir = pathlib.Path(options.saved_models_dir) / name / str(options.export_version)
    _step(f"5/6 export the SavedModel -> {export_dir}")
    export_model_dir(model_dir, export_dir, checkpoint=averaged.path, overwrite=True,
                     beam_size=options.beam_size, alpha=options.alpha)

    _step("6/6 translate through the exported serving_default signature")
    import tensorflow as tf
    loaded = tf.saved_model.load(str(export_dir))
    demo = DEMO_SENTENCES.get(src, sources[:3])
    outputs = loaded.signatures["serving_default"](text=tf.constant(demo))
    demo_pairs = [(s, t.decode("utf-8")) for s, t in zip(demo, outputs["translation"].numpy())]
    for s, t in demo_pairs:
        print(f"  {s}\n  -> {t}")

    scores = report.to_dict()
    summary = {
        "dataset": options.dataset, "direction": f"{src}-{tgt}", "preset": options.preset,
        "model_config": run.model.get_config(), "training_config": run.training.get_config(),
        "parameters": averaged.parameters, "train_steps": result.step,
        "resumed_from_step": result.start_step,
        "train_seconds_this_invocation": round(result.seconds, 1),
        "stopped_by": result.stopped_by,
        "averaged_checkpoints": [str(p) for p in averaged.sources],
        "test_sentences": len(sources), "decode_seconds": round(decode_seconds, 1),
        "sacrebleu": scores.get("bleu"), "sacrebleu_signature": scores.get("signature"),
        "chrf": scores.get("chrf"),
        "bleu_lowercase_tokenized": scores.get("bleu_lowercase_tokenized"),
        "bleu_paper_tokenized": scores.get("bleu_paper_tokenized"),
        "paths": {"work_dir": str(work_dir), "data_dir": str(data_dir),
                  "model_dir": str(model_dir), "tensorboard_logdir": str(model_dir / "logs"),
                  "averaged_checkpoint": str(averaged.path), "hypotheses": str(hyp_path),
                  "scores": str(work_dir / "scores.json"), "saved_model": str(export_dir)},
        "demo_translations": demo_pairs,
        "total_seconds": round(time.monotonic() - started, 1),
    }
    (work_dir / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False))
    return summary


def format_summary(summary: dict) -> str:
    paths = summary["paths"]
    lines = [
        "", "=" * 72, f"transformer_tf main job: {summary['dataset']} {summary['direction']}",
        "=" * 72,
        f"trained      to step {summary['train_steps']} (steps {summary['resumed_from_step']}"
        f"-{summary['train_steps']} in {summary['train_seconds_this_invocation']} s) "
        f"({summary['parameters']:,} parameters, preset {summary['preset']})",
        f"sacreBLEU    {summary['sacrebleu']}  ({summary['sacrebleu_signature']})",
        f"BLEU (lowercased, tokenized, Multi30k style)  {summary['bleu_lowercase_tokenized']}",
        f"BLEU (paper-style tokenized)                  {summary['bleu_paper_tokenized']}",
        f"chrF         {summary['chrf']}",
        f"model dir    {paths['model_dir']}",
        f"TensorBoard  tensorboard --logdir {paths['tensorboard_logdir']}",
        f"averaged     {paths['averaged_checkpoint']}",
        f"hypotheses   {paths['hypotheses']}",
        f"SavedModel   {paths['saved_model']}",
        f"summary      {paths['work_dir']}/summary.json",
    ]
    return "\n".join(lines)
