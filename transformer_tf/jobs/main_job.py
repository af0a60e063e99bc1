"""The main job, end to end: prepare, train, average and choose on the dev set, choose
beam size and alpha on the dev set, decode, score, export, translate.

`scripts/main_job.py` (the README's first command) runs `run_main_job`. An existing prepared
directory is reused, and training resumes from the run's last checkpoint: steps, epochs
and minutes all count the whole run, so a finished run trains no further and a killed one
trains what is left of its plan (the training time is saved with each checkpoint).
Averaging, the dev-set choice among the latest, the averaged and the best checkpoint
(inference/selection.py), the choice of beam size and alpha on the dev set
(inference/decoding_choice.py), decoding, scoring and export are always redone.

Layout under `work_dir` (default runs/<dataset>_<src>_<tgt>):
    data/                      prepared corpus and shared BPE (scripts/prepare_data.py)
    model/                     checkpoints (best/ among them), averaged/, logs/ (TensorBoard),
                               run_config.json, validation.jsonl, chosen_*.json
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

import tensorflow as tf

from transformer_tf.data import bpe as bpe_lib
from transformer_tf.data.prepared_reader import METADATA_FILE, load_prepared
from transformer_tf.data.prepared_writer import prepare_dataset
from transformer_tf.data.text_lines import CorpusError
from transformer_tf.evaluation import evaluate
from transformer_tf.evaluation.hypothesis_files import read_lines
from transformer_tf.export.saved_model import export_model_dir
from transformer_tf.inference.batch import load_translator, translate_lines
from transformer_tf.inference.decoding_choice import choose_decoding, decoding_grid
from transformer_tf.inference.selection import DevScorer, average_and_choose
from transformer_tf.jobs.stages import JobStages, check_work_dir, export_version_dir
from transformer_tf.rundir.best_checkpoint import read_best
from transformer_tf.rundir.lock import hold_run
from transformer_tf.rundir.model_dir import read_run_config
from transformer_tf.rundir.validation_log import validation_log_path
from transformer_tf.training import averaging
from transformer_tf.training.fit import TrainOptions, train
from transformer_tf.training.recipe_plan import RecipePlan

logger = logging.getLogger(__name__)

# The job's files at the top of its work directory (the layout above).
HYPOTHESES, SCORES, SUMMARY = "test.hyp.{tgt}", "scores.json", "summary.json"


def output_names(target_language: str) -> tuple[str, ...]:
    """The names of the job's files at the top of its work directory (`check_work_dir`)."""
    return HYPOTHESES.format(tgt=target_language), SCORES, SUMMARY


DEMO_SENTENCES = {
    "en": ["A man in a blue shirt is riding a bicycle down the street.",
           "Two young children are playing with a dog in the park.",
           "A woman is sitting on a bench and reading a book."],
}


@dataclasses.dataclass
class MainJobOptions:
    """Options of the main job (see scripts/main_job.py --help)."""

    dataset: str = "multi30k"
    source_language: str = "en"
    target_language: str = "de"
    vocab_size: int = 8000
    subword: str = "bpe"
    data_dir: str | None = None
    work_dir: str | None = None
    preset: str = "multi30k"
    train_minutes: float | None = 60.0
    precision: str = "auto"
    epochs: float | None = None
    max_steps: int | None = None
    eval_every: int = 500
    average_last: int | None = None
    beam_size: int | None = None  # None: chosen on the dev set from beam_sizes
    alpha: float | None = None  # None: chosen on the dev set from alphas
    # The search settings tried on the dev set (beam 1 once: its alpha ranks nothing).
    beam_sizes: tuple = (1, 4, 6)
    alphas: tuple = (0.6, 1.0, 1.4)
    batch_size: int = 64
    test_limit: int | None = None
    dev_limit: int | None = None  # dev sentences decoded to choose the checkpoint (None: all)
    export_name: str | None = None
    export_version: int | None = None  # None: the next free version under the export name
    saved_models_dir: str = "saved_models"
    model_overrides: dict = dataclasses.field(default_factory=dict)
    training_overrides: dict = dataclasses.field(default_factory=dict)
    decoding_overrides: dict = dataclasses.field(default_factory=dict)
    validation_sentences: int = 200
    early_stopping: int | None = None  # patience in evaluations (None: the whole budget)
    verbose: int = 1
    # "planned": the budget-aware recipe (training/recipe_plan.py) sets what the user did
    # not; "preset": the preset's recipe as it is.
    recipe: str = "preset"


def _resolved_work_dir(options: MainJobOptions) -> pathlib.Path:
    """runs/<dataset>_<src>_<tgt>, with _<preset> added for any preset but the default
    one (so `--model convs2s` does not land in the Transformer's run), unless given."""
    name = f"{options.dataset}_{options.source_language}_{options.target_language}"
    if options.preset != MainJobOptions.preset:
        name += f"_{options.preset}"
    return pathlib.Path(options.work_dir or pathlib.Path("runs") / name)


def run_main_job(options: MainJobOptions) -> dict:
    """Run every step, holding the run directory's lock (`rundir.lock.hold_run`) throughout;
    returns (and writes to summary.json) the summary."""
    work_dir = _resolved_work_dir(options)
    name = options.export_name or work_dir.name  # one export name per run directory
    export_version_dir(pathlib.Path(options.saved_models_dir) / name,
                       options.export_version)  # refused now, not after training
    check_work_dir(work_dir, output_names(options.target_language))
    with hold_run(work_dir / "model", create=True):
        return _run_main_job(options, work_dir, name)


def _run_main_job(options: MainJobOptions, work_dir: pathlib.Path, name: str) -> dict:
    stages = JobStages()
    data_dir, model_dir = work_dir / "data", work_dir / "model"
    src, tgt = options.source_language, options.target_language

    subword_name = {"bpe": "BPE", "wordpiece": "word-piece vocabulary"}[options.subword]
    stages.begin(f"1/7 prepare {options.dataset} {src}->{tgt} with a shared {subword_name} of "
                 f"{options.vocab_size} pieces -> {data_dir}")
    if (data_dir / METADATA_FILE).exists():
        prepared = load_prepared(data_dir)
        prepared_subword = prepared.metadata["bpe"]["model_type"]
        if prepared_subword != options.subword:
            raise CorpusError(f"{data_dir / METADATA_FILE}: prepared with {prepared_subword}, "
                              f"not {options.subword}; choose another --work-dir")
        print(f"already prepared: {data_dir}")
    else:
        prepared = prepare_dataset(options.dataset, src, tgt, data_dir,
                                   bpe_options=bpe_lib.BpeOptions(vocab_size=options.vocab_size,
                                                                  subword=options.subword),
                                   data_dir=options.data_dir)
    stages.done("prepare")

    stages.begin(f"2/7 train preset {options.preset!r} -> {model_dir} "
                 f"(TensorBoard: tensorboard --logdir {model_dir / 'logs'})")
    result = train(TrainOptions(
        data_dir=str(data_dir), model_dir=str(model_dir), preset=options.preset,
        model_overrides=options.model_overrides, training_overrides=options.training_overrides,
        decoding_overrides=options.decoding_overrides,
        max_steps=options.max_steps, epochs=options.epochs, max_minutes=options.train_minutes,
        eval_every=options.eval_every, validation_sentences=options.validation_sentences,
        precision=options.precision, verbose=options.verbose, recipe=options.recipe,
        early_stopping=options.early_stopping))
    print(f"trained to step {result.step}, precision {result.precision} "
          f"({result.precision_reason}); stopped: {result.stop_reason}")
    print(f"recipe {describe_recipe(result.recipe_plan)}")
    run = read_run_config(model_dir)
    stages.done("train")

    average_last = options.average_last or run.training.average_last
    stages.begin(f"3/7 average the final checkpoints (up to {average_last}, from the last "
                 f"{averaging.TAIL_FRACTION:.0%} of training) and keep it only if it is better "
                 "than the latest on the dev set; the same for the best checkpoint by dev BLEU")
    # The search every later stage uses: the run's, with the beam size and alpha given.
    decoding = run.decoding.with_overrides(beam_size=options.beam_size, alpha=options.alpha)
    selection = average_and_choose(model_dir, prepared, average_last, decoding=decoding,
                                   bleu_limit=options.dev_limit)
    chosen, scores = selection.chosen, selection.scores
    print(selection.note)
    for score in scores:
        print(f"  {score.describe()}")
    print(f"chosen: {chosen.name} ({pathlib.Path(chosen.checkpoint).name}): {selection.reason}")
    stages.done("average_and_select")

    grid = decoding_grid((options.beam_size,) if options.beam_size else options.beam_sizes,
                         (options.alpha,) if options.alpha is not None else options.alphas,
                         decoding.length_penalty)
    stages.begin(f"4/7 choose beam size and alpha on the dev set: {len(grid)} setting(s)")
    if len(grid) > 1:
        scorer = DevScorer(model_dir, prepared, chosen.checkpoint, bleu_limit=options.dev_limit)
        choice = choose_decoding(model_dir, scorer, chosen.checkpoint, grid, known={
            (decoding.beam_size, decoding.alpha): chosen.bleu})
        for row in choice.scores:
            print(f"  beam {row['beam_size']}, alpha {row['alpha']:g}: dev BLEU "
                  f"{row['dev_bleu']:.2f}")
        decoding = decoding.replace(**choice.overrides())
        decoding_reason, decoding_scores = choice.reason, choice.scores
    else:
        decoding_reason = ("given on the command line" if options.beam_size
                           and options.alpha is not None else "the only setting of the grid")
        decoding_scores = []
    print(f"decoding: beam {decoding.beam_size}, alpha {decoding.alpha:g} "
          f"({decoding_reason})")
    stages.done("choose_decoding")

    test_files = prepared.files("test")
    sources = read_lines(test_files.source)
    references = read_lines(test_files.target)
    if options.test_limit:
        sources, references = sources[:options.test_limit], references[:options.test_limit]
    stages.begin(f"5/7 translate {len(sources)} test sentences (beam {decoding.beam_size}, "
                 f"alpha {decoding.alpha}) and score them")
    translator = load_translator(model_dir=str(model_dir), checkpoint=chosen.checkpoint,
                                 decoding=decoding)
    translations, _ = translate_lines(translator, sources, options.batch_size,
                                      progress=options.verbose > 0)
    hypotheses = [row[0] for row in translations]
    hyp_path = work_dir / HYPOTHESES.format(tgt=tgt)
    hyp_path.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    report = evaluate(hypotheses, references, lang=tgt)
    (work_dir / SCORES).write_text(report.to_json())
    print(report.format_text())
    stages.done("test_decode_and_score")

    export_dir = export_version_dir(pathlib.Path(options.saved_models_dir) / name,
                                    options.export_version)
    stages.begin(f"6/7 export the SavedModel -> {export_dir}")
    export_model_dir(model_dir, export_dir, checkpoint=chosen.checkpoint, decoding=decoding)
    stages.done("export")

    stages.begin("7/7 translate through the exported serving_default signature")
    loaded = tf.saved_model.load(str(export_dir))
    demo = DEMO_SENTENCES.get(src, sources[:3])
    outputs = loaded.signatures["serving_default"](text=tf.constant(demo))
    demo_pairs = [(s, t.decode("utf-8")) for s, t in zip(demo, outputs["translation"].numpy())]
    for s, t in demo_pairs:
        print(f"  {s}\n  -> {t}")
    stages.done("serve_demo")

    scores_dict = report.to_dict()
    best = read_best(model_dir)
    summary = {
        "dataset": options.dataset, "direction": f"{src}-{tgt}", "preset": options.preset,
        "family": run.family, "beam_size": decoding.beam_size, "alpha": decoding.alpha,
        "model_config": run.model.get_config(), "training_config": run.training.get_config(),
        "parameters": int(translator.owner.model.count_params()), "train_steps": result.step,
        "resumed_from_step": result.start_step,
        "train_seconds_this_invocation": round(result.seconds, 1),
        "recipe_plan": result.recipe_plan,
        "stopped_by": result.stopped_by, "stop_reason": result.stop_reason,
        "best_checkpoint": (None if best is None else {
            "checkpoint": best.checkpoint, "step": best.step, "dev_bleu": best.dev_bleu,
            "dev_nll": best.dev_nll}),
        "precision": result.precision, "precision_reason": result.precision_reason,
        "averaged_checkpoints": [str(p) for p in selection.averaged_sources],
        "averaging": selection.note,
        "dev_scores": [score.as_dict() for score in scores],
        "chosen": chosen.name, "chosen_checkpoint": chosen.checkpoint,
        "choice_reason": selection.reason,
        "decoding_reason": decoding_reason, "decoding_scores": decoding_scores,
        "test_sentences": len(sources),
        "sacrebleu": scores_dict.get("bleu"), "sacrebleu_signature": scores_dict.get("signature"),
        "chrf": scores_dict.get("chrf"),
        "bleu_lowercase_tokenized": scores_dict.get("bleu_lowercase_tokenized"),
        "bleu_paper_tokenized": scores_dict.get("bleu_paper_tokenized"),
        "stage_seconds": stages.seconds,
        "paths": {"work_dir": str(work_dir), "data_dir": str(data_dir),
                  "model_dir": str(model_dir), "tensorboard_logdir": str(model_dir / "logs"),
                  "validation_log": str(validation_log_path(model_dir)),
                  "chosen_checkpoint": chosen.checkpoint, "hypotheses": str(hyp_path),
                  "scores": str(work_dir / SCORES), "saved_model": str(export_dir)},
        "demo_translations": demo_pairs,
        "total_seconds": stages.total_seconds(),
    }
    (work_dir / SUMMARY).write_text(json.dumps(summary, indent=2, ensure_ascii=False))
    return summary


def describe_recipe(plan: dict | None) -> str:
    """A run's recipe in one paragraph: its recorded plan, or the preset's recipe."""
    if plan is None:
        return "the preset's (not planned)"
    return RecipePlan.from_dict(plan).describe()


def _two_decimals(value) -> str:
    return "n/a" if value is None else f"{float(value):.2f}"


def format_summary(summary: dict) -> str:
    paths = summary["paths"]
    dev = "; ".join(f"{s['name']} BLEU {s['bleu']:.2f} NLL {s['nll']:.3f}"
                    for s in summary["dev_scores"])
    stages = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in summary["stage_seconds"].items())
    lines = [
        "", "=" * 72, f"transformer_tf main job: {summary['dataset']} {summary['direction']}",
        "=" * 72,
        f"trained      to step {summary['train_steps']} (steps {summary['resumed_from_step']}"
        f"-{summary['train_steps']} in {summary['train_seconds_this_invocation']} s, "
        f"{summary['precision']}) ({summary['parameters']:,} parameters, {summary['family']} "
        f"preset {summary['preset']})",
        f"recipe       {describe_recipe(summary.get('recipe_plan'))}",
        f"stopped      {summary['stop_reason']}",
        f"checkpoints  {summary['averaging']}",
        f"dev set      {dev}; kept {summary['chosen']}",
        f"             ({summary['choice_reason']})",
        f"decoding     beam {summary['beam_size']}, alpha {summary['alpha']} "
        f"({summary['decoding_reason']})",
        f"sacreBLEU    {_two_decimals(summary['sacrebleu'])}  ({summary['sacrebleu_signature']})",
        f"BLEU (lowercased, tokenized, Multi30k style)  "
        f"{_two_decimals(summary['bleu_lowercase_tokenized'])}",
        f"BLEU (paper-style tokenized)                  "
        f"{_two_decimals(summary['bleu_paper_tokenized'])}",
        f"chrF         {_two_decimals(summary['chrf'])}",
        f"wall time    {stages}",
        f"model dir    {paths['model_dir']}",
        f"TensorBoard  tensorboard --logdir {paths['tensorboard_logdir']}",
        f"validation   {paths['validation_log']}",
        f"checkpoint   {paths['chosen_checkpoint']}",
        f"hypotheses   {paths['hypotheses']}",
        f"SavedModel   {paths['saved_model']}",
        f"summary      {paths['work_dir']}/summary.json",
    ]
    return "\n".join(lines)
