"""The parsing ablation (issue 41): the paper's configuration, the engineered system
(`parsing_cpu`, beyond the paper) and the engineered system with each of its additions
taken away, each scored on the dev set by EVALB's COLLINS.prm rules.

    row            preset         leaves  cursor  grammar   trains
    paper          parsing_paper  slot    off     none      its own model
    engineered     parsing_cpu    words   on      tree      its own model
    no_grammar     parsing_cpu    words   on      none      engineered's model
    no_cursor      parsing_cpu    words   off     tree      its own model
    no_copy        parsing_cpu    slot    off     tree      its own model
    no_additions   parsing_cpu    slot    off     none      no_copy's model

Every row trains on the sample's schedule, `parsing_cpu`'s (`SAMPLE_SCHEDULE`: 2,048-token
batches, warm-up 400, its checkpoint cadence), so the rows differ in model, leaves and
search only: the paper's own 25,000-token batches and 4,000-step warm-up were set for
4.5 million translation pairs on GPUs, and in the study's 45 minutes on a CPU they would
give its model a few dozen steps, all inside the warm-up. `--training-option` still wins.

The cursor moves only over output tokens that occur in the source, so with `slot` leaves
(XX never occurs in a sentence) it has nothing to count: the copied leaves and the cursor
are taken away together in `no_copy`, and `no_copy` against `no_cursor` measures the
copied leaves alone. Every row keeps its preset's alpha (the paper's 0.3, parsing_cpu's
5.0); `no_additions` is the paper's method at parsing_cpu's size.

Each row's checkpoint is chosen as the parsing job chooses it (`choose_checkpoint`), then
dev is parsed with the row's beam search. Rows of one leaf convention share a prepared
treebank (WORK/data-<leaves>); rows of one model share its training (WORK/<model>/).
Each row is compared with `engineered` by a paired bootstrap over the dev sentences.

The results file (results/README.md's format) lists every row, the ones not run yet
marked so, and is rewritten after each finished row: a killed study loses at most the row
it was on; run again, it keeps the finished rows and resumes the interrupted training.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
import pathlib

from transformer_tf.data.treebank_reader import treebank_identity
from transformer_tf.data.treebank_to_prepared import gold_path
from transformer_tf.evaluation.evalb import evalb
from transformer_tf.evaluation.paired_bootstrap import paired_bootstrap
from transformer_tf.evaluation.hypothesis_files import read_lines
from transformer_tf.jobs.parse_job import (
    choose_checkpoint,
    parse_and_score,
    prepare_or_reuse,
)
from transformer_tf.runtime.provenance import (
    conditions_of,
    current_commit,
    machine_description,
    record_sitting,
    where_it_ran,
    where_this_runs,
)
from transformer_tf.presets import get_preset
from transformer_tf.runtime.gc_freeze import set_aside_live_objects

COMPARED_WITH = "engineered"
NOT_RUN = "not run yet"
# The TrainingConfig fields every row takes from the engineered system's preset.
SAMPLE_SCHEDULE = ("tokens_per_batch", "warmup_steps", "max_length",
                   "checkpoint_every_minutes", "keep_checkpoints", "average_last")


@dataclasses.dataclass(frozen=True)
class AblationRow:
    """One system of the ablation: its preset, leaves, cursor and output grammar."""

    key: str
    label: str
    preset: str
    leaves: str
    cursor: bool
    grammar: str

    @property
    def model_name(self) -> str:
        """Its training's directory under WORK: rows differing only in grammar share it."""
        return f"{self.preset}-{self.leaves}-cursor-{'on' if self.cursor else 'off'}"


ROWS = (
    AblationRow("paper", "the paper's configuration (parsing_paper)", "parsing_paper",
                "slot", False, "none"),
    AblationRow("engineered", "beyond the paper (parsing_cpu): copied leaves, cursor, "
                "tree grammar", "parsing_cpu", "words", True, "tree"),
    AblationRow("no_grammar", "parsing_cpu without the tree grammar", "parsing_cpu", "words",
                True, "none"),
    AblationRow("no_cursor", "parsing_cpu without the source cursor", "parsing_cpu", "words",
                False, "tree"),
    AblationRow("no_copy", "parsing_cpu without copied leaves (XX slots) and so without "
                "the cursor", "parsing_cpu", "slot", False, "tree"),
    AblationRow("no_additions", "parsing_cpu's size with none of the three (the paper's "
                "method)", "parsing_cpu", "slot", False, "none"),
)
ROW_KEYS = tuple(row.key for row in ROWS)

COLUMNS = [
    {"key": "key", "label": "row"}, {"key": "label", "label": "system"},
    {"key": "leaves", "label": "leaves"}, {"key": "cursor", "label": "cursor"},
    {"key": "grammar", "label": "grammar"}, {"key": "alpha", "label": "alpha"},
    {"key": "status", "label": "status"},
    {"key": "steps", "label": "steps", "format": "{:,}"},
    {"key": "train_minutes", "label": "train min", "format": "{:.1f}"},
    {"key": "load_average_at_start", "label": "load at start", "format": "{:.2f}"},
    {"key": "chosen", "label": "checkpoint"},
    {"key": "dev_f1", "label": "dev F1", "format": "{:.2f}"},
    {"key": "dev_recall", "label": "recall", "format": "{:.2f}"},
    {"key": "dev_precision", "label": "precision", "format": "{:.2f}"},
    {"key": "dev_complete_match", "label": "complete match", "format": "{:.2f}"},
    {"key": "dev_error_sentences", "label": "errors"},
    {"key": "repairs", "label": "repairs", "format": "{:,}"},
    {"key": "vs_engineered", "label": "vs engineered (95% interval)"},
]


@dataclasses.dataclass
class AblationOptions:
    """Options of the ablation (see scripts/parse_ablation.py --help).

    Attributes:
      treebank_dir: directory of .mrg files.
      work_dir: prepared data and the rows' model directories.
      results: the results file, rewritten after each finished row.
      rows: the row keys to run now (the file lists all of ROWS).
      train_minutes / max_steps: each model's training budget (exactly one).
      model_overrides, training_overrides: applied to every row's preset (a row's own
        cursor setting wins), e.g. a tiny model for a smoke run.
      beam_size, max_extra_length: None: each row's preset's.
      command: the command line, recorded in the results file.
      alongside: what else the machine runs meanwhile (each row run now records it).
    """

    treebank_dir: str
    work_dir: str
    results: str
    rows: tuple = ROW_KEYS
    vocab_size: int = 4000
    subword: str = "bpe"
    train_minutes: float | None = 45.0
    max_steps: int | None = None
    eval_every: int = 200
    model_overrides: dict = dataclasses.field(default_factory=dict)
    training_overrides: dict = dataclasses.field(default_factory=dict)
    beam_size: int | None = None
    max_extra_length: int | None = None
    batch_size: int = 32
    precision: str = "auto"
    command: str = "python scripts/parse_ablation.py"
    verbose: int = 1
    # What else the machine runs meanwhile, in the user's words (each row records it).
    alongside: str | None = None

    def defining_fields(self) -> dict:
        """What the rows depend on: a results file of other settings is not resumed. (The
        treebank by its contents, not its path: a committed file must not name one
        machine's paths.)"""
        return {"treebank": treebank_identity(self.treebank_dir),
                "vocab_size": self.vocab_size, "subword": self.subword,
                "train_minutes": self.train_minutes, "max_steps": self.max_steps,
                "model_overrides": dict(self.model_overrides),
                "training_overrides": dict(self.training_overrides),
                "beam_size": self.beam_size, "max_extra_length": self.max_extra_length,
                "precision": self.precision}


class AblationMismatch(ValueError):
    """The results file holds an ablation of other settings."""


def row_search(row: AblationRow, options: AblationOptions) -> dict:
    """The row's beam-search overrides (its grammar; beam and length if given)."""
    return {"beam_size": options.beam_size, "max_extra_length": options.max_extra_length,
            "grammar": row.grammar}


def row_trees(options: AblationOptions, row: AblationRow) -> pathlib.Path:
    """Where the row's dev trees are written."""
    return pathlib.Path(options.work_dir) / row.model_name / row.key / "valid.trees"


def planned_row(row: AblationRow) -> dict:
    """The row as the results file shows it before it has run."""
    return {"key": row.key, "label": row.label, "leaves": row.leaves,
            "cursor": "on" if row.cursor else "off", "grammar": row.grammar,
            "alpha": get_preset(row.preset).decoding.alpha, "status": NOT_RUN}


def _comparison(row: AblationRow, result: dict, options: AblationOptions,
                gold: list[str]) -> str | None:
    """"+d.dd [lo, hi]" of the row's dev F1 minus COMPARED_WITH's, by paired bootstrap over
    the dev sentences (the recorded one when either row's trees are not at hand)."""
    if row.key == COMPARED_WITH:
        return None
    reference = next(r for r in ROWS if r.key == COMPARED_WITH)
    paths = [row_trees(options, r) for r in (row, reference)]
    if not all(p.is_file() for p in paths):
        return result.get("vs_engineered")
    scores = [evalb(gold, read_lines(p)).sentences for p in paths]
    compared = paired_bootstrap(*scores)
    low, high = compared.interval
    return f"{compared.difference:+.2f} [{low:+.2f}, {high:+.2f}]"


def results_document(finished: dict, options: AblationOptions, started: dict,
                     gold: list[str] | None = None) -> dict:
    """The results file's content: every row of ROWS, finished ones with their scores."""
    rows = []
    for row in ROWS:
        result = dict(finished.get(row.key) or planned_row(row))
        if row.key in finished and gold is not None:
            result["vs_engineered"] = _comparison(row, result, options, gold)
        rows.append(result)
    values = {"rows_run": len(finished), "rows": len(ROWS)}
    values.update({f"dev_f1_{key}": round(result["dev_f1"], 2)
                   for key, result in finished.items()})
    units = {key: "F1" for key in values if key.startswith("dev_f1_")}
    budget = (f"{options.train_minutes:g} minutes" if options.train_minutes is not None
              else f"{options.max_steps:,} steps")
    treebank = pathlib.Path(options.treebank_dir).name
    headline = ("dev F1: paper's configuration {dev_f1_paper:.2f}, engineered "
                "{dev_f1_engineered:.2f}" if {"paper", "engineered"} <= set(finished)
                else "{rows_run} of {rows} rows run")
    return {
        "what": (f"parsing ablation on the dev split of {treebank}: the paper's "
                 "configuration, the engineered parser and the engineered parser without "
                 f"each of its additions; {budget} of training per model; EVALB "
                 "COLLINS.prm, all dev sentences"),
        "title": "Parsing: the paper's configuration and the ablation of each addition",
        "command": options.command, "short_command": "python scripts/parse_ablation.py ...",
        "commit": started["commit"], "commit_role": "measured" if finished else "recorded",
        "machine": started["machine"], "date": started["date"],
        "conditions": (f"precision {options.precision}; beam "
                       f"{options.beam_size or 'of the preset (21)'}; the load average "
                       "(1 minute) when each row started, in its row; "
                       + conditions_of(list(finished.values()), "key", "row")),
        "source": "this file, written by transformer_tf/jobs/parse_ablation.py",
        "study": options.defining_fields(),
        "values": values, "units": units, "headline": headline,
        "reference": "paper (WSJ sections 02-21, section 23, 4 layers, d_model 1024): 91.3 F1",
        "columns": COLUMNS, "rows": rows,
    }


def _read_finished(path: pathlib.Path, options: AblationOptions) -> tuple[dict, dict]:
    """({row key: result} of the rows an earlier run finished, its provenance); a file
    without finished rows (a plan) is started afresh, with any settings."""
    started = {"commit": current_commit(), "machine": machine_description(),
               "date": datetime.date.today().isoformat()}
    if not path.exists():
        return {}, started
    document = json.loads(path.read_text())
    finished = {r["key"]: r for r in document["rows"] if r.get("status") != NOT_RUN}
    if not finished:  # a plan: nothing measured to keep
        return {}, started
    recorded = document.get("study")
    if recorded != json.loads(json.dumps(options.defining_fields())):
        raise AblationMismatch(f"{path}: holds an ablation of other settings ({recorded}); "
                               "give another --results, or the same settings to resume it")
    return finished, {k: document[k] for k in ("commit", "machine", "date", "command")}


def _write(path: pathlib.Path, document: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")


def write_plan(options: AblationOptions) -> dict:
    """Write the results file with every row not run yet (or keep a started one, with the
    command that trained its rows)."""
    path = pathlib.Path(options.results)
    finished, started = _read_finished(path, options)
    if finished:
        options = dataclasses.replace(options, command=started["command"])
    document = results_document(finished, options, started)
    _write(path, document)
    return document


def row_training_overrides(options: AblationOptions) -> dict:
    """The training fields every row is given: the sample's schedule (`SAMPLE_SCHEDULE`,
    from the engineered row's preset), then the command's --training-option."""
    sample = get_preset(next(r for r in ROWS if r.key == COMPARED_WITH).preset).training
    return {**{field: getattr(sample, field) for field in SAMPLE_SCHEDULE},
            **options.training_overrides}


def _train_model(row: AblationRow, data_dir: pathlib.Path, model_dir: pathlib.Path,
                 options: AblationOptions):
    from transformer_tf.training.fit import TrainOptions, train

    return train(TrainOptions(
        data_dir=str(data_dir), model_dir=str(model_dir), preset=row.preset,
        model_overrides={**options.model_overrides, "source_cursor": row.cursor},
        training_overrides=row_training_overrides(options), max_steps=options.max_steps,
        max_minutes=options.train_minutes, eval_every=options.eval_every,
        validation_sentences=0, precision=options.precision, verbose=options.verbose))


def _score_row(row: AblationRow, model_dir: pathlib.Path, prepared,
               options: AblationOptions) -> dict:
    """Choose the row's checkpoint as the parsing job does and parse dev with the row's
    search into `row_trees`: the row's scores."""
    from transformer_tf.rundir.model_dir import read_run_config

    run = read_run_config(model_dir)
    decoding = run.decoding.with_overrides(**row_search(row, options))
    trees = row_trees(options, row)
    row_work = trees.parent
    row_work.mkdir(parents=True, exist_ok=True)
    progress = options.verbose > 0
    choice = choose_checkpoint(model_dir, prepared, row_work, decoding,
                               run.training.average_last, options.batch_size, progress)
    scored = parse_and_score(model_dir, choice["checkpoint"], prepared, "valid",
                             trees, options.batch_size, progress, decoding)
    scores = scored["evalb"]["all"]
    return {"alpha": decoding.alpha, "chosen": choice["chosen"],
            "dev_f1": scores["f1"], "dev_recall": scores["recall"],
            "dev_precision": scores["precision"],
            "dev_complete_match": scores["complete_match"],
            "dev_error_sentences": scores["error_sentences"],
            "repairs": scored["repairs"]["total"]}


def _run_row(row: AblationRow, options: AblationOptions, trained: dict,
             here: dict) -> tuple[dict, list[str]]:
    """Train the row's model unless `trained` (model name -> TrainResult) has it, then
    score the row: (its result with where it ran; the dev gold trees)."""
    from transformer_tf.rundir import checkpoints

    work = pathlib.Path(options.work_dir)
    prepared = prepare_or_reuse(options.treebank_dir, work / f"data-{row.leaves}",
                                options.vocab_size, options.subword, row.leaves)
    model_dir = work / row.model_name / "model"
    load = os.getloadavg()[0]  # other work on the machine shortens a time budget's steps
    if row.model_name not in trained:
        record_sitting(model_dir.parent, here, checkpoints.resume_step(model_dir))
        trained[row.model_name] = _train_model(row, prepared.directory, model_dir, options)
        set_aside_live_objects()
    result = trained[row.model_name]
    scores = _score_row(row, model_dir, prepared, options)
    set_aside_live_objects()
    return ({**planned_row(row), "status": "run", "steps": result.step,
             "train_minutes": round(result.trained_seconds / 60, 1),
             "load_average_at_start": round(load, 2), **scores,
             **where_it_ran(model_dir.parent, here, result.step)},
            read_lines(gold_path(prepared, "valid")))


def run_ablation(options: AblationOptions, say=print) -> dict:
    """Run the rows in `options.rows` not finished before (resuming), rewriting the
    results file after each; returns the final document."""
    if (options.train_minutes is None) == (options.max_steps is None):
        raise ValueError("give exactly one of train_minutes and max_steps")
    unknown = sorted(set(options.rows) - set(ROW_KEYS))
    if unknown:
        raise ValueError(f"unknown ablation rows {unknown}; known: {list(ROW_KEYS)}")
    path = pathlib.Path(options.results)
    finished, started = _read_finished(path, options)
    here = where_this_runs(options.alongside)
    trained: dict = {}
    gold = None
    wanted = [row for row in ROWS if row.key in options.rows]
    for index, row in enumerate(wanted, start=1):
        if row.key in finished:
            say(f"[{index}/{len(wanted)}] {row.key}: done before, kept")
            continue
        say(f"[{index}/{len(wanted)}] {row.key}: {row.label}")
        finished[row.key], gold = _run_row(row, options, trained, here)
        say(f"[{index}/{len(wanted)}] {row.key}: dev F1 {finished[row.key]['dev_f1']:.2f}")
        _write(path, results_document(finished, options, started, gold))
    document = results_document(finished, options, started, gold)
    _write(path, document)
    return document
