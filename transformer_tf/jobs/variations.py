"""The paper's model variations (section 6.2, Table 3) as one resumable study: the rows
of `jobs.variation_rows` trained and scored, the tables and verdicts
(`jobs.variation_verdicts`) written.

Every row trains with the same data, batch, schedule and budget (minutes or steps), and is
scored on the development set as the paper did for this table: perplexity per target BPE
token and BLEU with beam 4, alpha 0.6, the final checkpoint (no averaging). With
`peak_learning_rate` every row's rate is scaled so that its schedule peaks there; the
informative plan takes the base row's own peak (`base_schedule_peak`), so that a row of
another width changes the model and not the rate (by d_model^-0.5 a d_model 128 row would
peak 1.4 times higher than the base, a d_model 512 row 1.4 times lower).
`extra_base_seeds` trains the base row again with other seeds: the spread of their
perplexities is the noise a row's difference must exceed (`verdict`); a study may add
base seeds when it resumes (its trained rows stay valid), not drop them. The study resumes:
a finished row is not retrained, a killed row continues from its last checkpoint with what
is left of its budget. Several processes may share a study directory (one per core): each
trains the rows no other process holds (a row is held, through its run directory's lock,
from training to its written result), and each rewrites the tables from every row
finished in the directory. With `results` (a file under results/, committed) the study also
spans machines and sittings: every finished row's result is kept in that file, with the
commit and machine it was trained on, and a study started afresh elsewhere keeps those
rows.
"""
from __future__ import annotations

import dataclasses
import json
import math
import pathlib
from typing import Callable

from transformer_tf.config import ModelConfig
from transformer_tf.jobs.variation_rows import (
    ROW_GROUPS,
    Row,
    define_rows,
    parameter_count,
    with_base_seeds,
)
from transformer_tf.jobs.variation_verdicts import (
    flattening_step,
    format_verdicts,
    perplexity,
    verdicts,
)
from transformer_tf.presets import get_preset
from transformer_tf.rundir.files import write_json_atomically
from transformer_tf.rundir.lock import describe_holder, hold_run_if_free
from transformer_tf.rundir.logged_scalars import median_logged_scalar
from transformer_tf.runtime.gc_freeze import set_aside_live_objects
from transformer_tf.runtime.provenance import (
    conditions_of,
    record_sitting,
    where_it_ran,
    where_this_runs,
)
from transformer_tf.training.rate_formula import peak_learning_rate, scale_for_peak

RESULTS_JSON = "variations.json"
STUDY_FILE = "study.json"
RESULTS_MD = "variations.md"
RESULTS_FILE = "results.json"  # the results/ format (results/README.md), for the docs
PROVENANCE = "provenance.json"  # commit, machine and date of the study's first run
ROW_RESULT = "result.json"
TABLES_LOCK = "tables.lock"  # held while a process of the study rewrites its tables
KEPT_ROWS = "row_results"  # the key of a results file's kept per-row results


@dataclasses.dataclass
class StudyOptions:
    data_dir: str
    out_dir: str
    base_preset: str = "multi30k"
    groups: tuple = ROW_GROUPS
    budget_minutes: float | None = None
    max_steps: int | None = None
    eval_every: int = 500
    precision: str = "auto"
    verbose: int = 1
    # Changes to the base preset before the rows are derived from it (ModelConfig fields),
    # and training changes every row shares (TrainingConfig fields, e.g. a smaller batch).
    model_overrides: dict = dataclasses.field(default_factory=dict)
    training_overrides: dict = dataclasses.field(default_factory=dict)
    plan: str = "full"
    # None: the preset's schedule; else every row's rate scaled to peak here.
    peak_learning_rate: float | None = None
    extra_base_seeds: tuple = ()
    command: str = "transformer-tf-variations"  # recorded in results.json
    # A results file (results/ format) that also keeps each finished row's result: a
    # study continued on another machine or in a fresh clone keeps the rows it holds.
    results: str | None = None
    # What else the machine runs meanwhile, in the user's words; each row trained now
    # records it ("trained_alongside") and the results file's conditions say it.
    alongside: str | None = None

    def defining_fields(self) -> dict:
        """What a study's results depend on; a resumed study must not change any of it.
        (The plan's fields only when set, so studies begun before they existed resume.)"""
        fields = {"base_preset": self.base_preset, "budget_minutes": self.budget_minutes,
                  "max_steps": self.max_steps, "model_overrides": dict(self.model_overrides),
                  "training_overrides": dict(self.training_overrides),
                  "data_dir": str(pathlib.Path(self.data_dir).resolve())}
        if self.plan != "full":
            fields["plan"] = self.plan
        if self.peak_learning_rate is not None:
            fields["peak_learning_rate"] = self.peak_learning_rate
        if self.extra_base_seeds:
            fields["extra_base_seeds"] = list(self.extra_base_seeds)
        return fields

    def portable_fields(self) -> dict:
        """The defining fields as a results file records them: the data directory as it
        was given (a committed file must not name one machine's absolute paths)."""
        return {**self.defining_fields(), "data_dir": str(self.data_dir)}


class StudyMismatch(ValueError):
    """A study directory was started with other settings than the ones given now."""


class ForeignOutput(StudyMismatch):
    """An output path (--out, --results) holds something this study did not write: the
    study would replace it or read it as its own. (A StudyMismatch, so that the command
    line reports it the same way, before anything is trained or written.)"""


def _refuse_foreign_out(out: pathlib.Path) -> None:
    """A missing or empty directory begins a study, and one with study.json is a study's
    (`_check_same_study` says whether this one's); any other existing path is refused: the
    study would replace its results.json and variations.* and read its provenance.json."""
    if not out.exists():
        return
    if not out.is_dir():
        raise ForeignOutput(f"{out}: is a file, not a study directory; give another --out "
                            "(a new or empty directory)")
    if (out / STUDY_FILE).exists() or not any(out.iterdir()):
        return
    raise ForeignOutput(f"{out}: holds files but no {STUDY_FILE}, so it is not a study "
                        "directory of this runner and the study would replace what it holds; "
                        "give another --out (a new or empty directory), or the study's own "
                        "directory to resume it")


def _check_same_study(out: pathlib.Path, options: StudyOptions) -> None:
    """Records the study's defining settings on its first run; later runs must match them
    (rows already trained under other settings would otherwise be mixed into the table)."""
    path = out / STUDY_FILE
    wanted = json.loads(json.dumps(options.defining_fields()))
    if not path.exists():
        write_json_atomically(path, wanted)  # read by a second process at any time
        return
    recorded = json.loads(path.read_text())
    details = _differences(recorded, wanted)
    if details:
        raise StudyMismatch(f"{path}: this study was started with other settings ({details}); "
                            "use another --out, or the same settings to resume it")
    if recorded != wanted:  # more base seeds than before
        write_json_atomically(path, wanted)


# Settings a resumed study may extend: a list that begins with the recorded one. More
# base seeds measure the noise better; the rows trained before are still the study's.
EXTENSIBLE = ("extra_base_seeds",)


def _differences(recorded: dict, wanted: dict) -> str:
    """The settings that differ, "name: was X, now Y; ..." ("" when none does, or when an
    EXTENSIBLE one only grew)."""
    def same(key):
        was, now = recorded.get(key), wanted.get(key)
        if key in EXTENSIBLE:  # grown: the recorded list begins the wanted one
            was = was or []
            now = (now or [])[:len(was)]
        return was == now

    changed = sorted(k for k in set(wanted) | set(recorded) if not same(k))
    return "; ".join(f"{k}: was {recorded.get(k)!r}, now {wanted.get(k)!r}" for k in changed)


def _rows_kept_in_results(options: StudyOptions) -> tuple[dict, dict | None]:
    """({row name: result} of the rows `options.results` holds, the provenance it records);
    ({}, None) without a results file or with one of this study that holds no kept rows.
    An existing file that is not this study's is refused (ForeignOutput, StudyMismatch):
    the study rewrites the file after every row, and would replace it."""
    if options.results is None or not pathlib.Path(options.results).exists():
        return {}, None
    path = pathlib.Path(options.results)
    document = _this_runners_results(path)
    details = _differences(document["study"], json.loads(json.dumps(options.portable_fields())))
    if details:
        raise StudyMismatch(f"{path}: holds a study of other settings ({details}); give "
                            "another --results, or the same settings to continue it")
    kept = document[KEPT_ROWS] or []
    if not kept:
        return {}, None
    return ({r["row"]: r for r in kept},
            {k: document[k] for k in ("commit", "machine", "date", "command")})


def _this_runners_results(path: pathlib.Path) -> dict:
    """The document of an existing --results file that this runner wrote (it records the
    study's settings and its kept rows); any other file is refused (ForeignOutput), e.g. a
    results file of another kind, or a Table 3 results file that keeps no rows."""
    if path.is_dir():
        raise ForeignOutput(f"{path}: is a directory, not a results file; give another "
                            "--results (a new file, or the study's own)")
    try:
        document = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError):
        document = None
    if (not isinstance(document, dict) or not isinstance(document.get("study"), dict)
            or KEPT_ROWS not in document):
        raise ForeignOutput(f"{path}: is not a results file of this runner's study (it keeps "
                            f"no '{KEPT_ROWS}' and 'study'), and the study would replace it; "
                            "give another --results (a new file, or the study's own)")
    return document


def base_of_study(options: StudyOptions, vocab_size: int) -> tuple[ModelConfig, float]:
    """(the base model config, the base label smoothing) the rows are derived from."""
    preset = get_preset(options.base_preset)
    model = preset.model.replace(**options.model_overrides, vocab_size=vocab_size)
    smoothing = options.training_overrides.get("label_smoothing",
                                               preset.training.label_smoothing)
    return model, smoothing


def _row_budget_left(row_dir: pathlib.Path, options: StudyOptions) -> float | None:
    """Minutes left of a row's time budget: the budget minus the row's training time up
    to its newest checkpoint (saved with it; a killed row loses at most one checkpoint
    period). None for a study planned by steps."""
    if options.budget_minutes is None:
        return None
    from transformer_tf.rundir import checkpoints

    try:
        newest = checkpoints.newest_readable(row_dir / "model")
    except (FileNotFoundError, checkpoints.CheckpointError):
        return options.budget_minutes
    return max(0.0, options.budget_minutes - checkpoints.trained_seconds(newest) / 60.0)


def base_schedule_peak(base_preset: str, model_overrides: dict | None = None,
                       training_overrides: dict | None = None) -> float:
    """The largest rate of the base row's schedule: the preset's (d_model, warm-up and
    learning_rate_scale) with the study's changes; multi30k: (256 x 1000)^-0.5 = 1.98e-3."""
    preset = get_preset(base_preset)
    model = preset.model.replace(**(model_overrides or {})).resolved()
    training = {"warmup_steps": preset.training.warmup_steps,
                "learning_rate_scale": preset.training.learning_rate_scale,
                **(training_overrides or {})}
    return peak_learning_rate(model.d_model, training["warmup_steps"],
                              training["learning_rate_scale"])


def row_training_overrides(row: Row, options: StudyOptions) -> dict:
    """The TrainingConfig changes a row trains with: the study's, the row's label
    smoothing and seed, and with `peak_learning_rate` the scale that makes the row's
    schedule (its d_model, the study's warm-up) peak there."""
    changes = {**options.training_overrides, "label_smoothing": row.label_smoothing}
    if row.seed is not None:
        changes["seed"] = row.seed
    if options.peak_learning_rate is not None:
        warmup = changes.get("warmup_steps",
                             get_preset(options.base_preset).training.warmup_steps)
        changes["learning_rate_scale"] = scale_for_peak(row.model.d_model, warmup,
                                                        options.peak_learning_rate)
    return changes


def _train_row(row: Row, row_dir: pathlib.Path, options: StudyOptions, minutes_left):
    """Train (or resume) one row; `train` counts the row's budget across resumptions, so
    `minutes_left` is only shown, not passed."""
    from transformer_tf.training.fit import TrainOptions, train

    base = get_preset(options.base_preset)
    model_changes = {k: v for k, v in row.model.get_config().items()
                     if k != "vocab_size" and v != getattr(base.model, k)}
    return train(TrainOptions(
        data_dir=options.data_dir, model_dir=str(row_dir / "model"), preset=options.base_preset,
        model_overrides=model_changes,
        training_overrides=row_training_overrides(row, options),
        max_steps=options.max_steps, max_minutes=options.budget_minutes,
        eval_every=options.eval_every, precision=options.precision, verbose=options.verbose))


def _evaluate_row(row: Row, row_dir: pathlib.Path, options: StudyOptions):
    from transformer_tf.data.prepared_reader import load_prepared
    from transformer_tf.inference.loading import source_decoding
    from transformer_tf.inference.selection import score_on_dev
    from transformer_tf.rundir import checkpoints

    model_dir = row_dir / "model"
    latest = checkpoints.newest_readable(model_dir)  # FileNotFoundError without one
    paper = source_decoding(model_dir=model_dir).replace(beam_size=4, alpha=0.6)
    score = score_on_dev("latest", model_dir, latest, load_prepared(options.data_dir), paper)
    steps = checkpoints.checkpoint_step(latest)
    tokens_per_s = median_logged_scalar(model_dir / "logs" / "train", "target_tokens_per_second")
    from transformer_tf.rundir.validation_log import read_validation_log

    records = read_validation_log(model_dir)
    return {"row": row.name, "group": row.group, "model": row.model.get_config(),
            "seed": row.seed,
            "dev_nll_flattened_at_step": flattening_step(
                [(r.step, r.dev_nll) for r in records]),
            "label_smoothing": row.label_smoothing, "parameters": parameter_count(row.model),
            "steps": steps, "dev_perplexity": perplexity(score.nll), "dev_bleu": score.bleu,
            "target_tokens_per_second": tokens_per_s,
            # Over every sitting, up to the checkpoint scored: a resumed row's too.
            "train_seconds": round(checkpoints.trained_seconds(latest), 1),
            "checkpoint": score.checkpoint}


def run_study(options: StudyOptions, train_row: Callable | None = None,
              evaluate_row: Callable | None = None, say: Callable = print,
              plan_only: bool = False) -> list[dict]:
    """Train and score every row (resuming), write variations.{json,md}; returns results.
    With `plan_only` nothing is trained: the tables and the results file are written
    from the rows finished before.

    `train_row(row, row_dir, options, minutes_left)` and `evaluate_row(row, row_dir,
    options)` default to the real training and dev scoring (tests pass fakes).
    """
    if (options.budget_minutes is None) == (options.max_steps is None):
        raise ValueError("give exactly one of budget_minutes and max_steps")
    train_row = train_row or _train_row
    evaluate_row = evaluate_row or _evaluate_row
    base = get_preset(options.base_preset)
    if base.family != "transformer":
        raise ValueError(f"{options.base_preset!r} is a {base.family} preset; the study varies "
                         "the Transformer")
    from transformer_tf.data.prepared_reader import load_prepared
    from transformer_tf.rundir import checkpoints

    base_model, base_smoothing = base_of_study(options,
                                               load_prepared(options.data_dir).vocab_size)
    rows = with_base_seeds(define_rows(base_model, base_smoothing, options.groups,
                                       options.plan), options.extra_base_seeds)
    out = pathlib.Path(options.out_dir)
    # Both outputs refused before anything is written if they hold what others made.
    _refuse_foreign_out(out)
    kept, recorded = _rows_kept_in_results(options)
    out.mkdir(parents=True, exist_ok=True)
    _check_same_study(out, options)
    here = where_this_runs(options.alongside)
    if recorded is not None and not (out / PROVENANCE).exists():
        (out / PROVENANCE).write_text(json.dumps(
            {k: recorded[k] for k in ("commit", "machine", "date")}, indent=2))
    if plan_only and recorded is not None:  # the file keeps the command that trains
        options = dataclasses.replace(options, command=recorded["command"])
    for index, row in enumerate(rows, start=1):
        row_dir = out / "rows" / row.directory_name
        result_path = row_dir / ROW_RESULT
        if not result_path.exists() and row.name in kept:
            row_dir.mkdir(parents=True, exist_ok=True)
            result_path.write_text(json.dumps(kept[row.name], indent=2))
            say(f"[{index}/{len(rows)}] {row.name}: done before, kept in {options.results}")
            continue
        if result_path.exists():
            say(f"[{index}/{len(rows)}] {row.name}: done before, kept")
            continue
        if plan_only:
            say(f"[{index}/{len(rows)}] {row.name}: not trained yet")
            continue
        # Held until the row's result is written; train() holds it again (re-entrant).
        with hold_run_if_free(row_dir / "model") as mine:
            if not mine:
                say(f"[{index}/{len(rows)}] {row.name}: another process trains it "
                    f"({describe_holder(row_dir / 'model')}); left to it")
                continue
            if result_path.exists():  # finished by another process since the check above
                say(f"[{index}/{len(rows)}] {row.name}: done by another process, kept")
                continue
            minutes_left = _row_budget_left(row_dir, options)
            plan = (f"{minutes_left:.1f} of {options.budget_minutes:g} min left"
                    if minutes_left is not None else f"{options.max_steps} steps")
            say(f"[{index}/{len(rows)}] {row.name}: training ({plan})")
            if minutes_left is None or minutes_left > 0:
                record_sitting(row_dir, here, checkpoints.resume_step(row_dir / "model"))
                train_row(row, row_dir, options, minutes_left)
            set_aside_live_objects()  # rows train and trace in one process, one after another
            say(f"[{index}/{len(rows)}] {row.name}: scoring on the dev set")
            result = evaluate_row(row, row_dir, options)
            result.update(where_it_ran(row_dir, here, result["steps"]))
            set_aside_live_objects()
            result_path.write_text(json.dumps(result, indent=2))
        _write_shared_tables(out, options, rows)
    return _write_shared_tables(out, options, rows)


def _write_shared_tables(out: pathlib.Path, options: StudyOptions, rows: list[Row]) -> list[dict]:
    """Write the tables and results files from every planned row finished in `out`, by
    this process or another one sharing the study (each trains the rows the others do
    not hold), under a lock in `out`; returns those rows' results in plan order."""
    import filelock  # the lock rundir/lock.py takes, blocking here

    with filelock.FileLock(str(out / TABLES_LOCK)):
        results = [json.loads(path.read_text()) for path in
                   (out / "rows" / row.directory_name / ROW_RESULT for row in rows)
                   if path.exists()]
        write_tables(results, out, options, rows)
    return results


def _cell(value, digits):
    return "" if value is None else f"{value:.{digits}f}"


def format_table(results: list[dict], options: StudyOptions | None = None) -> str:
    """The paper's layout: one line per row, the knobs, params x 10^6, dev PPL and BLEU,
    plus steps reached and training tokens/s."""
    header = ("| row | N | d_model | d_ff | h | d_k | d_v | P_drop | eps_ls | positions | "
              "params x10^6 | steps | dev PPL | dev BLEU | tokens/s |")
    lines = [header, "|" + " --- |" * 15]
    for r in results:
        m = r["model"]
        lines.append(
            f"| {r['row']} | {m['num_layers']} | {m['d_model']} | {m['d_ff']} | "
            f"{m['num_heads']} | {m['key_dim']} | {m['value_dim']} | {m['dropout']} | "
            f"{r['label_smoothing']} | {m['position_encoding']} | {r['parameters'] / 1e6:.1f} | "
            f"{r['steps']} | {_cell(r['dev_perplexity'], 2)} | {_cell(r['dev_bleu'], 2)} | "
            f"{_cell(r.get('target_tokens_per_second'), 0)} |")
    if options is not None:
        budget = (f"{options.budget_minutes:g} minutes" if options.budget_minutes is not None
                  else f"{options.max_steps} steps")
        parts = [f"{kind} {', '.join(f'{k}={v}' for k, v in sorted(values.items()))}"
                 for kind, values in (("model", options.model_overrides),
                                      ("training", options.training_overrides)) if values]
        changes = f" changed by {'; '.join(parts)}" if parts else ""
        lines += ["", f"Base preset `{options.base_preset}`{changes}, {budget} per row, dev "
                      "set, beam 4, alpha 0.6, final checkpoint (no averaging). Rows scaled "
                      f"around the base as in transformer_tf/jobs/variation_rows.py ({options.plan} "
                      "plan)."
                  + ("" if options.peak_learning_rate is None else
                     f" Every row's learning rate peaks at {options.peak_learning_rate:.3g}.")]
    return "\n".join(lines) + "\n"


RESULT_COLUMNS = [
    {"key": "row", "label": "row"}, {"key": "N", "label": "N"},
    {"key": "d_model", "label": "d_model"}, {"key": "h", "label": "h"},
    {"key": "d_k", "label": "d_k"}, {"key": "P_drop", "label": "P_drop"},
    {"key": "eps_ls", "label": "eps_ls"}, {"key": "positions", "label": "positions"},
    {"key": "steps", "label": "steps", "format": "{:,}"},
    {"key": "dev_perplexity", "label": "dev PPL", "format": "{:.2f}"},
    {"key": "dev_bleu", "label": "dev BLEU", "format": "{:.2f}"},
    {"key": "flattened_at", "label": "dev NLL flat from step", "format": "{:,}"},
    {"key": "paper", "label": "paper (PPL, base 4.92)"},
    {"key": "verdict", "label": "direction"},
]


NOT_TRAINED = "not trained yet"
AWAITING_BASE = "waits for the base seeds"


def results_document(results: list[dict], options: StudyOptions, provenance: dict,
                     planned: list[Row] | None = None) -> dict:
    """The study in the results/ format (results/README.md): a row per trained row with
    its verdict, the base rows' mean and spread, and sentences counting the verdicts.

    With `planned` (the study's rows, in order) a study part-way shows every planned row,
    the untrained ones marked so, and gives no verdict before all its base seeds are
    trained: the noise a verdict needs is their spread."""
    planned = planned or []
    trained = {r["row"] for r in results}
    bases_planned = sum(row.group == "base" for row in planned)
    bases_trained = sum(r["group"] == "base" for r in results)
    judged = bases_trained >= max(1, bases_planned)
    summary = verdicts(results)
    by_row = {v["row"]: v for v in summary["rows"]} if judged else {}
    rows = [{"row": r["row"], "N": r["model"]["num_layers"], "d_model": r["model"]["d_model"],
             "h": r["model"]["num_heads"], "d_k": r["model"]["key_dim"],
             "P_drop": r["model"]["dropout"], "eps_ls": r["label_smoothing"],
             "positions": r["model"]["position_encoding"], "steps": r["steps"],
             "dev_perplexity": r["dev_perplexity"], "dev_bleu": r["dev_bleu"],
             "flattened_at": r.get("dev_nll_flattened_at_step"),
             "paper": by_row.get(r["row"], {}).get("paper"),
             "verdict": by_row.get(r["row"], {}).get(
                 "verdict", None if judged or r["group"] == "base" else AWAITING_BASE)}
            for r in results]
    rows += [{"row": row.name, "N": row.model.num_layers, "d_model": row.model.d_model,
              "h": row.model.num_heads, "d_k": row.model.key_dim, "P_drop": row.model.dropout,
              "eps_ls": row.label_smoothing, "positions": row.model.position_encoding,
              "verdict": NOT_TRAINED} for row in planned if row.name not in trained]
    counts = {name: sum(v["verdict"] == name for v in by_row.values())
              for name in ("reproduced", "not reproduced", "within noise")}
    values = {"rows_compared": len(by_row), "reproduced": counts["reproduced"],
              "not_reproduced": counts["not reproduced"],
              "within_noise": counts["within noise"],
              "base_perplexity": round(summary.get("base_perplexity", math.nan), 3),
              "base_seed_spread": round(summary.get("noise", math.nan), 3),
              "rows_trained": len(results), "rows_planned": max(len(planned), len(results)),
              "base_seeds_trained": bases_trained,
              "base_seeds_planned": max(bases_planned, bases_trained)}
    budget = (f"{options.budget_minutes:g} minutes" if options.budget_minutes is not None
              else f"{options.max_steps:,} steps")
    if judged and by_row:
        rows_word = "row" if len(by_row) == 1 else "rows"
        one = counts["reproduced"] == 1  # "1 of 11 rows reproduces", "8 of 11 ... reproduce"
        headline = ("{reproduced} of {rows_compared} " + rows_word
                    + (" reproduces" if one else " reproduce") + " the paper's direction")
        sentence = (
            "Compared with the paper's Table 3, {reproduced} of {rows_compared} " + rows_word
            + (" changes" if one else " change")
            + " dev perplexity in its direction, {not_reproduced} the opposite way "
            "and {within_noise} by no more than the base seeds' spread ({base_seed_spread:.3f} "
            "PPL around {base_perplexity:.2f}).")
    elif judged:  # only base rows so far
        headline = "{rows_trained} of {rows_planned} rows trained"
        sentence = ("The study has trained {rows_trained} of its {rows_planned} rows, its "
                    "{base_seeds_trained} base seeds: their spread ({base_seed_spread:.3f} "
                    "PPL around {base_perplexity:.2f}) is the noise a row's change must "
                    "exceed.")
    else:
        headline = "{rows_trained} of {rows_planned} rows trained"
        sentence = ("The study has trained {rows_trained} of its {rows_planned} rows and "
                    "{base_seeds_trained} of its {base_seeds_planned} base seeds: the "
                    "verdicts wait for every base seed, whose spread is the noise a row's "
                    "change must exceed.")
    if by_row and len(results) < len(planned):
        sentence += " The study has trained {rows_trained} of its {rows_planned} rows."
    return {
        "what": (f"Table 3 rows ({options.plan} plan) around the {options.base_preset} "
                 f"model, {budget} per row"
                 + ("" if options.peak_learning_rate is None else
                    f", every row's learning rate peaking at {options.peak_learning_rate:.3g}")
                 + "; dev set, PPL per target BPE token, sacreBLEU with beam 4, alpha 0.6, "
                   "final checkpoint; direction against the paper's beyond the base seeds' "
                   "spread"),
        "title": "Table 3: the paper's directions at small scale",
        "command": options.command, "commit": provenance["commit"],
        "commit_role": "measured", "machine": provenance["machine"],
        "date": provenance["date"], "source": "written by transformer_tf/jobs/variations.py",
        "conditions": conditions_of(results, "row", "row"),
        "values": values, "units": {"base_perplexity": "PPL", "base_seed_spread": "PPL"},
        "headline": headline, "sentences": [sentence],
        "columns": RESULT_COLUMNS, "rows": rows,
    }


def _provenance(out: pathlib.Path) -> dict:
    """Commit, machine and date of the study's first write (kept across resumptions)."""
    import datetime

    from transformer_tf.runtime.provenance import current_commit, machine_description

    path = out / PROVENANCE
    if path.exists():
        return json.loads(path.read_text())
    provenance = {"commit": current_commit(), "machine": machine_description(),
                  "date": datetime.date.today().isoformat()}
    path.write_text(json.dumps(provenance, indent=2))
    return provenance


def write_tables(results: list[dict], out: pathlib.Path, options: StudyOptions,
                 planned: list[Row] | None = None) -> None:
    summary = verdicts(results)
    (out / RESULTS_JSON).write_text(json.dumps(
        {"options": dataclasses.asdict(options), "rows": results, "verdicts": summary},
        indent=2))
    (out / RESULTS_MD).write_text(format_table(results, options) + format_verdicts(summary))
    # One form in both places, so a copy of OUT/results.json continues the study as a
    # --results file does.
    document = {**results_document(results, options, _provenance(out), planned),
                "study": options.portable_fields(), KEPT_ROWS: results}
    text = json.dumps(document, indent=1) + "\n"
    (out / RESULTS_FILE).write_text(text)
    if options.results is not None:
        path = pathlib.Path(options.results)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


__all__ = ["ForeignOutput", "StudyMismatch", "StudyOptions", "base_of_study",
           "base_schedule_peak", "format_table", "results_document", "row_training_overrides",
           "run_study", "write_tables"]
