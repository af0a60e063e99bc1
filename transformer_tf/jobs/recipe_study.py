"""The preset's recipe against the planned one (training/recipe_plan.py) at equal steps, on the
development set: each arm trained for each step budget with each seed, scored with beam
search on the dev set: its latest checkpoint, the average of its final checkpoints, and
the one of the two the main job's dev-set rule keeps (inference/selection.py).

    for steps, arm, seed in STEPS x ARMS x SEEDS:
        train `arm` for `steps` steps with `seed`; score latest and averaged on dev

The arms (`ARMS`): "preset", the preset's own recipe; "planned", the budget-aware recipe;
"planned-inverse-sqrt", the planned recipe with the paper's decaying rate in place of its
held peak and cool-down (as a user who sets lr_schedule gets it): the shape's own share of
the gain; "preset-half-batch", the preset's recipe with half its tokens per batch for twice
the steps: the same target tokens (and, on a CPU, about the same time) in twice the updates.
A budget counts steps of `REFERENCE_TOKENS_PER_BATCH` target tokens, the batch every arm but
"preset-half-batch" trains with (whatever the preset's batch is now, so that rows of one
study stay comparable); an arm with a smaller batch makes more steps.

Every run of a smaller budget comes before the larger budget's, and an arm's seeds run
one after the other, so a study stopped part-way has paired rows of the small budget and,
after its first arm, two seeds of one recipe (an ensemble's members, issue 40).

The results file (the results/ format, results/README.md) is rewritten after every finished
run, so a killed study loses at most the run it was training; run again, it keeps the rows
it has, resumes the interrupted run from its checkpoint and goes on. The preset's recipe
does not depend on the budget, so its run of the larger budget continues the smaller one
(a resumed run is the run it would have been); every planned run is its own, since its
plan depends on its budget. Gains are paired by seed: each arm minus the preset, same seed
and steps, averaged over the seeds.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import pathlib
import statistics
from collections.abc import Callable

from transformer_tf.runtime.gc_freeze import set_aside_live_objects
from transformer_tf.runtime.provenance import current_commit, machine_description

DEFAULT_STEPS = (1000, 2000)
DEFAULT_SEEDS = (1, 2)


# The multi30k preset's batch when the study began (target tokens per step). Budgets count
# steps of it, and the arms train with it unless they say otherwise.
REFERENCE_TOKENS_PER_BATCH = 4096


@dataclasses.dataclass(frozen=True)
class Arm:
    """One way to train: the run's recipe, the training options it sets as a user would,
    and its tokens per batch (its steps scale by the inverse, so every arm of a budget
    sees the same target tokens)."""

    recipe: str
    settings: dict = dataclasses.field(default_factory=dict)
    tokens_per_batch: int = REFERENCE_TOKENS_PER_BATCH

    @property
    def batch_fraction(self) -> float:
        return self.tokens_per_batch / REFERENCE_TOKENS_PER_BATCH


ARMS = {"preset": Arm("preset"),
        "preset-half-batch": Arm("preset", tokens_per_batch=REFERENCE_TOKENS_PER_BATCH // 2),
        "planned": Arm("planned"),
        "planned-inverse-sqrt": Arm("planned", {"lr_schedule": "inverse_sqrt"})}


def arm_steps(arm: str, budget: int) -> int:
    """The steps `arm` trains for a budget of `budget` steps of the reference batch."""
    return round(budget / ARMS[arm].batch_fraction)
COLUMNS = [
    {"key": "recipe", "label": "recipe"}, {"key": "steps", "label": "steps"},
    {"key": "seed", "label": "seed"},
    {"key": "passes", "label": "passes", "format": "{:.1f}"},
    {"key": "tokens_per_batch", "label": "tokens/batch"},
    {"key": "warmup_steps", "label": "warm-up"},
    {"key": "learning_rate_scale", "label": "LR scale", "format": "{:.3f}"},
    {"key": "lr_schedule", "label": "rate after warm-up"},
    {"key": "dropout", "label": "P_drop"}, {"key": "attention_dropout", "label": "attention"},
    {"key": "ffn_dropout", "label": "ReLU"}, {"key": "label_smoothing", "label": "eps_ls"},
    {"key": "dev_bleu_latest", "label": "dev BLEU latest", "format": "{:.2f}"},
    {"key": "dev_bleu_averaged", "label": "dev BLEU averaged", "format": "{:.2f}"},
    {"key": "dev_nll_latest", "label": "dev NLL latest", "format": "{:.3f}"},
    {"key": "dev_nll_averaged", "label": "dev NLL averaged", "format": "{:.3f}"},
    {"key": "kept", "label": "kept"},
    {"key": "dev_bleu_kept", "label": "dev BLEU kept", "format": "{:.2f}"},
    {"key": "averaged_checkpoints", "label": "averaged"},
    {"key": "train_minutes", "label": "train min", "format": "{:.1f}"},
    {"key": "commit", "label": "commit"},
]


@dataclasses.dataclass
class RecipeStudyOptions:
    """Options of the study (see scripts/recipe_study.py --help).

    Attributes:
      data_dir: a prepared data directory (scripts/prepare_data.py).
      work_dir: where the runs' model directories go (work_dir/<run>/).
      results: the results file, rewritten after each finished run.
      preset: the Transformer preset every arm starts from.
      arms: the ARMS to train, in this order within a budget.
      steps, seeds: the step budgets and the seeds.
      dev_limit: dev sentences for BLEU (None: all); the NLL is the whole dev set's.
      command: the command line, recorded in the results file.
    """

    data_dir: str
    work_dir: str
    results: str
    preset: str = "multi30k"
    arms: tuple = tuple(ARMS)
    steps: tuple = DEFAULT_STEPS
    seeds: tuple = DEFAULT_SEEDS
    eval_every: int = 500
    precision: str = "auto"
    dev_limit: int | None = None
    beam_size: int = 4
    alpha: float = 0.6
    command: str = "python scripts/recipe_study.py"
    verbose: int = 1

    def defining_fields(self) -> dict:
        """What the rows depend on: a results file of other settings is not resumed. (The
        data directory as given: a committed file must not name one machine's paths.)"""
        return {"data_dir": str(self.data_dir), "preset": self.preset,
                "precision": self.precision, "dev_limit": self.dev_limit,
                "beam_size": self.beam_size, "alpha": self.alpha}


class StudyMismatch(ValueError):
    """The results file holds a study of other settings."""


def run_directory(work_dir, arm: str, steps: int, seed: int) -> pathlib.Path:
    """The model directory of one run: an arm of the preset's recipe shares one per seed
    (the larger budget continues the smaller), a planned arm's run has its own."""
    name = (f"{arm}-seed{seed}" if ARMS[arm].recipe == "preset"
            else f"{arm}-{steps}-seed{seed}")
    return pathlib.Path(work_dir) / name


def row_key(arm: str, steps: int, seed: int) -> str:
    return f"{arm}-{steps}-seed{seed}"


def gain_key(arm: str, metric: str, steps: int) -> str:
    """The results value of `arm`'s gain: "gain_<metric>_<steps>" for the planned recipe,
    "gain_<arm>_<metric>_<steps>" (dashes as underscores) for another arm."""
    prefix = "gain_" if arm == "planned" else f"gain_{arm.replace('-', '_')}_"
    return f"{prefix}{metric}_{steps}"


def _pairs(rows: list[dict], arm: str, budget: int, metric: str) -> list[tuple]:
    """(arm's `metric`, preset's `metric`) of each seed that has both at `budget`."""
    by_key = {row["key"]: row for row in rows}
    return [(by_key[row_key(arm, budget, r["seed"])][metric], r[metric])
            for r in rows if r["recipe"] == "preset" and r["steps"] == budget
            and metric in r and metric in by_key.get(row_key(arm, budget, r["seed"]), {})]


def paired_gains(rows: list[dict], steps, metric: str = "dev_bleu_kept") -> dict:
    """Per arm and step budget, the arm's `metric` minus the preset's, paired by seed and
    averaged over the seeds that have both: {gain_key(arm, metric, steps): mean, ...};
    arms and budgets with no pair (or rows without `metric`) are left out."""
    gains = {}
    for arm in ARMS:
        for budget in steps:
            pairs = _pairs(rows, arm, budget, metric) if arm != "preset" else []
            if pairs:
                gains[gain_key(arm, metric, budget)] = statistics.mean(p - q for p, q in pairs)
    return gains


def paired_seeds(rows: list[dict], steps) -> dict:
    """How many seeds each kept-checkpoint gain of `paired_gains` averages:
    {"seeds_<gain key without gain_>": count, ...}."""
    counts = {}
    for arm in ARMS:
        for budget in steps:
            count = len(_pairs(rows, arm, budget, "dev_bleu_kept")) if arm != "preset" else 0
            if count:
                counts["seeds_" + gain_key(arm, "dev_bleu_kept", budget)[5:]] = count
    return counts


def results_document(rows: list[dict], options: RecipeStudyOptions, started: dict) -> dict:
    """The results file's content for the rows so far (results/README.md's fields)."""
    values = {"runs": len(rows)}
    for metric in ("dev_bleu_kept", "dev_bleu_averaged", "dev_bleu_latest"):
        values.update({k: round(v, 2) for k, v in paired_gains(rows, options.steps,
                                                               metric).items()})
    shown = [f"{{{gain_key('planned', 'dev_bleu_kept', s)}:+.2f}} at {s:,} steps"
             for s in options.steps if gain_key("planned", "dev_bleu_kept", s) in values]
    headline = ("planned minus preset recipe, dev BLEU of the checkpoint each keeps: "
                + ", ".join(shown) if shown else "{runs} runs finished")
    values.update(paired_seeds(rows, options.steps))
    sentences = []
    for budget in options.steps:
        kept = [r["dev_bleu_kept"] for r in rows
                if r["recipe"] == "preset" and r["steps"] == budget and "dev_bleu_kept" in r]
        if len(kept) > 1:
            values[f"spread_preset_dev_bleu_kept_{budget}"] = round(max(kept) - min(kept), 2)
        for arm in ARMS:
            gain = gain_key(arm, "dev_bleu_kept", budget)
            if gain in values:
                fewer = ARMS[arm].batch_fraction != 1.0
                sentences.append(
                    f"At {budget:,} steps, {arm}"
                    + (f" ({arm_steps(arm, budget):,} steps of "
                       f"{ARMS[arm].tokens_per_batch:,} tokens)" if fewer else "")
                    + " minus preset on the checkpoint each keeps: "
                    f"{{{gain}:+.2f}} dev BLEU, the mean of {{seeds_{gain[5:]}}} seed(s)"
                    + (f"; the preset's own seeds differ by "
                       f"{{spread_preset_dev_bleu_kept_{budget}:.2f}}."
                       if len(kept) > 1 else "."))
    units = {k: "BLEU" for k in values if k.startswith(("gain_", "spread_"))}
    units.update({k: "seeds" for k in values if k.startswith("seeds_")})
    dev = "all dev sentences" if options.dev_limit is None else f"first {options.dev_limit}"
    return {
        "what": (f"Multi30k-style dev set ({dev}), beam {options.beam_size}, alpha "
                 f"{options.alpha}: the preset {options.preset!r} with its own recipe and "
                 f"{REFERENCE_TOKENS_PER_BATCH:,}-token batches, with half that batch for "
                 f"twice the steps, with the planned recipe (docs/training.md) and with the "
                 f"planned recipe keeping the paper's decaying rate (inverse_sqrt), at equal "
                 f"target tokens: budgets of {', '.join(f'{s:,}' for s in options.steps)} "
                 f"steps of {REFERENCE_TOKENS_PER_BATCH:,} tokens, seeds "
                 f"{', '.join(map(str, options.seeds))}; gains paired by seed"),
        "title": "Budget-aware recipe against the preset's, at equal tokens (dev BLEU)",
        "command": options.command, "short_command": "python scripts/recipe_study.py ...",
        "commit": started["commit"], "commit_role": "measured",
        "machine": started["machine"], "date": started["date"],
        "conditions": f"precision {options.precision}; {options.data_dir}",
        "source": "this file, written by transformer_tf/jobs/recipe_study.py",
        "study": options.defining_fields(),
        "values": values, "units": units, "headline": headline, "sentences": sentences,
        "columns": COLUMNS, "rows": rows,
    }


def _read_rows(path: pathlib.Path, options: RecipeStudyOptions) -> tuple[list[dict], dict]:
    """The rows and provenance of an earlier, interrupted study in `path` (none: [])."""
    started = {"commit": current_commit(), "machine": machine_description(),
               "date": datetime.date.today().isoformat()}
    if not path.exists():
        return [], started
    document = json.loads(path.read_text())
    recorded = document.get("study")
    if recorded != json.loads(json.dumps(options.defining_fields())):
        raise StudyMismatch(f"{path}: holds a study of other settings ({recorded}); give "
                            "another --results, or the same settings to resume it")
    return document["rows"], {k: document[k] for k in ("commit", "machine", "date")}


def _train_run(arm: str, steps: int, seed: int, options: RecipeStudyOptions):
    from transformer_tf.training.fit import TrainOptions, train

    chosen = ARMS[arm]
    settings = {"seed": seed, "tokens_per_batch": chosen.tokens_per_batch, **chosen.settings}
    return train(TrainOptions(
        data_dir=options.data_dir, model_dir=str(run_directory(options.work_dir, arm,
                                                               steps, seed)),
        preset=options.preset, training_overrides=settings,
        max_steps=arm_steps(arm, steps), eval_every=options.eval_every,
        validation_sentences=0, precision=options.precision, verbose=options.verbose,
        recipe=chosen.recipe))


def _score_run(model_dir: pathlib.Path, options: RecipeStudyOptions) -> dict:
    from transformer_tf.data.prepared_reader import load_prepared
    from transformer_tf.inference.loading import source_decoding
    from transformer_tf.inference.selection import average_and_choose
    from transformer_tf.rundir.model_dir import read_run_config

    run = read_run_config(model_dir)
    decoding = source_decoding(model_dir=model_dir).replace(beam_size=options.beam_size,
                                                             alpha=options.alpha)
    selection = average_and_choose(model_dir, load_prepared(options.data_dir),
                                   run.training.average_last, decoding=decoding,
                                   bleu_limit=options.dev_limit)
    scores = {score.name: score for score in selection.scores}
    averaged = scores.get("averaged", scores["latest"])
    return {"dev_bleu_latest": scores["latest"].bleu, "dev_nll_latest": scores["latest"].nll,
            "dev_bleu_averaged": averaged.bleu, "dev_nll_averaged": averaged.nll,
            "averaged_checkpoints": len(selection.averaged_sources),
            "kept": selection.chosen.name, "dev_bleu_kept": selection.chosen.bleu}


def _say(message: str) -> None:
    print(message, flush=True)  # progress shows at once when stdout goes to a file


def run_recipe_study(options: RecipeStudyOptions, train_run: Callable | None = None,
                     score_run: Callable | None = None, say: Callable = _say) -> dict:
    """Train and score every run not in the results file yet; returns the results document.

    `train_run(arm, steps, seed, options)` -> TrainResult and `score_run(model_dir,
    options)` -> dev scores default to real training and scoring (tests pass fakes)."""
    from transformer_tf.rundir.model_dir import read_run_config

    train_run, score_run = train_run or _train_run, score_run or _score_run
    path = pathlib.Path(options.results)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows, started = _read_rows(path, options)
    done = {row["key"] for row in rows}
    unknown = sorted(set(options.arms) - set(ARMS))
    if unknown:
        raise ValueError(f"arms: unknown {unknown}; expected some of {list(ARMS)}")
    plan = [(seed, steps, arm) for steps in sorted(options.steps) for arm in options.arms
            for seed in options.seeds]
    for index, (seed, steps, arm) in enumerate(plan, start=1):
        key = row_key(arm, steps, seed)
        if key in done:
            say(f"[{index}/{len(plan)}] {key}: done before, kept")
            continue
        say(f"[{index}/{len(plan)}] {key}: training")
        result = train_run(arm, steps, seed, options)
        set_aside_live_objects()  # runs train and trace in one process, one after another
        model_dir = run_directory(options.work_dir, arm, steps, seed)
        say(f"[{index}/{len(plan)}] {key}: scoring on the dev set")
        scores = score_run(model_dir, options)
        set_aside_live_objects()
        run = read_run_config(model_dir)
        plan_record = result.recipe_plan or {}
        rows.append({
            "key": key, "recipe": arm, "steps": result.step, "seed": seed,
            "passes": plan_record.get("passes"),
            "tokens_per_batch": run.training.tokens_per_batch,
            "warmup_steps": run.training.warmup_steps,
            "learning_rate_scale": run.training.learning_rate_scale,
            "lr_schedule": run.training.lr_schedule,
            "dropout": run.model.dropout, "attention_dropout": run.model.attention_dropout,
            "ffn_dropout": run.model.ffn_dropout,
            "label_smoothing": run.training.label_smoothing,
            "train_minutes": result.trained_seconds / 60.0, **scores,
            "commit": current_commit()})  # the code this row was trained and scored with
        document = results_document(rows, options, started)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(document, indent=1) + "\n")
        tmp.replace(path)
        say(f"[{index}/{len(plan)}] {key}: dev BLEU latest {scores['dev_bleu_latest']:.2f}, "
            f"averaged {scores['dev_bleu_averaged']:.2f}, kept {scores['kept']} -> {path}")
    return results_document(rows, options, started)
