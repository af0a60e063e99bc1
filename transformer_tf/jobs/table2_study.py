"""The Transformer paper's Table 2 at small scale, fair to both families: the Transformer
and ConvS2S on the same prepared data, each with its own paper schedule (warm-up and
inverse square root; Nesterov momentum with the rate shrunk once per pass), compared in
two arms, each with every seed:

    "time":   the same wall-clock training budget (`minutes`) for both;
    "tokens": the same number of target tokens for both: `passes` passes over the same
              training data.

    for seed in seeds, arm in arms, preset in presets:
        train (or resume) the run; score its latest checkpoint on the test set with the
        family's own decoding; rewrite the results file and the figure

Every run validates every `eval_every` steps (dev BLEU of greedy translations of the
first `validation_sentences` dev sentences, dev NLL: MDIR/validation.jsonl), which draws
the figure: dev BLEU against training minutes (time arm) and against passes (tokens
arm). Each row has test BLEU, steps, passes, target tokens, training tokens/s (median of
the logged windows), training FLOPs per target token (counted by the caller: bench/
counts FLOPs, a floor this package cannot import) and the run's training FLOPs.

The results file (results/README.md's format) and the figure are rewritten after each
finished run, so a killed study loses at most the run it was training; run the same
command again: finished runs are kept, the interrupted one resumes from its checkpoint
with what is left of its budget (`train` counts the budget across invocations), and
the summary (values, sentences) is brought up to this code's rules. A figure
file already there is replaced only if the results file records it as this study's: a
new study is refused before training rather than replace another study's figure.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
import pathlib
import statistics
from collections.abc import Callable

from transformer_tf.runtime.provenance import (
    conditions_of,
    current_commit,
    machine_description,
    record_sitting,
    where_it_ran,
    where_this_runs,
)
from transformer_tf.rundir.logged_scalars import median_logged_scalar
from transformer_tf.presets import get_preset
from transformer_tf.runtime.gc_freeze import set_aside_live_objects

ARMS = ("time", "tokens")
DEFAULT_PRESETS = ("multi30k", "convs2s_multi30k")
FAMILY_NAMES = {"transformer": "Transformer", "convs2s": "ConvS2S"}
COLUMNS = [
    {"key": "arm", "label": "arm"}, {"key": "family", "label": "family"},
    {"key": "seed", "label": "seed"}, {"key": "steps", "label": "steps", "format": "{:,}"},
    {"key": "train_minutes", "label": "train min", "format": "{:.1f}"},
    {"key": "passes", "label": "passes", "format": "{:.1f}"},
    {"key": "target_tokens_millions", "label": "target tokens (M)", "format": "{:.2f}"},
    {"key": "target_tokens_per_second", "label": "train target tok/s", "format": "{:,.0f}"},
    {"key": "gflop_per_target_token", "label": "train GFLOP / target tok",
     "format": "{:.3f}"},
    {"key": "training_pflop", "label": "training PFLOP", "format": "{:.3f}"},
    {"key": "dev_bleu_last", "label": "dev BLEU (last eval)", "format": "{:.2f}"},
    {"key": "test_bleu", "label": "test BLEU", "format": "{:.2f}"},
    {"key": "decoding", "label": "decoding"},
]

# What the results file keeps of each run beside its table row, under "run_details" (a
# row holds its columns only): the dev curve the figure is drawn from, how the run
# stopped, its last dev NLL and the load average when it started.
DETAIL_KEYS = ("preset", "stopped_by", "load_average_at_start", "dev_nll_last", "curve")


@dataclasses.dataclass
class Table2Options:
    """Options of the study (see bench/table2_study.py --help).

    Attributes:
      data_dir: a prepared data directory both families train on.
      work_dir: where the runs' model directories go (work_dir/<arm>-<preset>-seed<s>/).
      results: the results file, rewritten after each finished run.
      figure: the PNG of dev BLEU against training time and passes, redrawn after each
        finished run; a file already there is refused unless the results file records it
        as this study's figure (`FigureInUse`).
      presets: the runs' presets, one per family.
      arms: which of ARMS to run.
      minutes: the time arm's training budget per run.
      passes: the tokens arm's budget per run, in passes over the training data.
      seeds: the seeds.
      eval_every, validation_sentences: the validations the curves are drawn from.
      precision: both families' training precision, as the main job takes it ("auto",
        "float32", "mixed_bfloat16", ...); the study records it resolved.
      test_limit: test sentences decoded (None: all).
      command: the command line, recorded in the results file.
      alongside: what else the machine runs meanwhile (each run trained now records it).
    """

    data_dir: str
    work_dir: str
    results: str
    figure: str
    presets: tuple = DEFAULT_PRESETS
    arms: tuple = ARMS
    minutes: float = 90.0
    passes: float = 20.0
    seeds: tuple = (1, 2)
    eval_every: int = 200
    validation_sentences: int = 200
    precision: str = "auto"
    test_limit: int | None = None
    command: str = "python bench/table2_study.py"
    verbose: int = 1
    # TensorFlow threads of each run (the caller sets them before TensorFlow starts).
    threads: int = 2
    # The presets this process trains (None: both). Two processes, one per family, each
    # pinned to its own core, share the results file and work directory.
    train_only: tuple | None = None
    # What else the machine runs meanwhile, in the user's words (each run records it).
    alongside: str | None = None

    def defining_fields(self) -> dict:
        """What the rows depend on: a results file of other settings is not resumed. (The
        data directory as given: a committed file must not name one machine's paths.)"""
        return {"data_dir": str(self.data_dir),
                "presets": list(self.presets), "minutes": self.minutes, "passes": self.passes,
                "eval_every": self.eval_every,
                "validation_sentences": self.validation_sentences,
                "precision": self.precision, "test_limit": self.test_limit,
                "threads": self.threads}


class StudyMismatch(ValueError):
    """The results file holds a study of other settings."""


class FigureInUse(ValueError):
    """The figure's path holds a file this study did not draw."""


def run_key(arm: str, preset: str, seed: int) -> str:
    return f"{arm}-{preset}-seed{seed}"


def run_directory(work_dir, arm: str, preset: str, seed: int) -> pathlib.Path:
    return pathlib.Path(work_dir) / run_key(arm, preset, seed)


# ------------------------------------------------------------------------ the columns
def pass_size(data_dir: str, preset: str, precision: str) -> dict:
    """{"batches", "target_tokens"}: optimizer steps and real target tokens in one pass
    over the training split, batched as `preset` trains in `precision`, a Keras dtype
    policy (its token budget and length filter: `Preset.training_for`), counted by
    running the input pipeline once."""
    import tensorflow as tf

    from transformer_tf.config import PAD_ID
    from transformer_tf.data.datasets import make_training_dataset
    from transformer_tf.data.prepared_reader import load_prepared

    training = get_preset(preset).training_for(precision)
    dataset = make_training_dataset(
        load_prepared(data_dir), "train", tokens_per_batch=training.tokens_per_batch,
        max_length=training.max_length, shuffle=False, repeat=False)
    batches, tokens = dataset.reduce(
        (tf.constant(0, tf.int64), tf.constant(0, tf.int64)),
        lambda total, batch: (total[0] + 1, total[1] + tf.math.count_nonzero(
            tf.not_equal(batch[1], PAD_ID), dtype=tf.int64)))
    return {"batches": int(batches) / training.gradient_accumulation_steps,
            "target_tokens": int(tokens)}


def training_columns(steps: int, size: dict, gflop_per_target_token: float | None) -> dict:
    """Passes, target tokens (millions) and training PFLOP of a run of `steps` optimizer
    steps, with `size` its `pass_size`: passes = steps / steps per pass, tokens = passes x
    target tokens per pass, PFLOP = tokens x GFLOP per token / 10^6."""
    passes = steps / size["batches"]
    tokens = passes * size["target_tokens"]
    return {"passes": passes, "target_tokens_millions": tokens / 1e6,
            "training_pflop": (None if gflop_per_target_token is None
                               else tokens * gflop_per_target_token / 1e6)}


def curve_points(records, arm: str, steps_per_pass: float) -> tuple:
    """(x, dev BLEU) of a run's validation records: x = training minutes (time arm) or
    passes (tokens arm). A step logged twice (a resumed run redid it) keeps the later."""
    by_step = {r.step: r for r in records}
    return tuple(((r.trained_seconds / 60.0) if arm == "time" else r.step / steps_per_pass,
                  r.dev_bleu) for _, r in sorted(by_step.items()))


def summary_values(rows: list[dict]) -> dict:
    """Per arm and family: mean test BLEU over seeds and its spread (max - min), median
    tokens/s; keys `<arm>_<family>_test_bleu_mean`, `..._spread`, `..._seeds`,
    `<arm>_<family>_tokens_per_second`. Per arm both families ran: the gap between their
    means, `<arm>_gap_bleu` (>= 0), the family ahead, `<arm>_leader` ("transformer",
    "convs2s" or "neither"), the seeds both ran, `<arm>_paired_seeds`, and in how many of
    those the family ahead scored higher, `<arm>_leader_ahead_seeds` (none for "neither")."""
    values = {"runs": len(rows)}
    groups: dict = {}
    for row in rows:
        groups.setdefault((row["arm"], row["family"]), []).append(row)
    for (arm, family), group in sorted(groups.items()):
        bleus = [r["test_bleu"] for r in group]
        prefix = f"{arm}_{family}"
        values[f"{prefix}_test_bleu_mean"] = round(statistics.mean(bleus), 2)
        values[f"{prefix}_test_bleu_spread"] = round(max(bleus) - min(bleus), 2)
        values[f"{prefix}_seeds"] = len(group)
        speeds = [r["target_tokens_per_second"] for r in group
                  if r["target_tokens_per_second"] is not None]
        if speeds:
            values[f"{prefix}_tokens_per_second"] = round(statistics.median(speeds))
    for arm in ARMS:
        by_seed = {family: {r["seed"]: r["test_bleu"] for r in groups.get((arm, family), [])}
                   for family in FAMILY_NAMES}
        if not all(by_seed.values()):
            continue
        gap = round(values[f"{arm}_transformer_test_bleu_mean"]
                    - values[f"{arm}_convs2s_test_bleu_mean"], 2)
        leader = "transformer" if gap > 0 else "convs2s" if gap < 0 else "neither"
        other = {"transformer": "convs2s", "convs2s": "transformer"}.get(leader)
        paired = sorted(set(by_seed["transformer"]) & set(by_seed["convs2s"]))
        values[f"{arm}_gap_bleu"] = abs(gap)
        values[f"{arm}_leader"] = leader
        values[f"{arm}_paired_seeds"] = len(paired)
        if other is not None:
            values[f"{arm}_leader_ahead_seeds"] = sum(
                by_seed[leader][seed] > by_seed[other][seed] for seed in paired)
    return values


def findings(values: dict, options: Table2Options) -> list[str]:
    """Sentences (format strings over `values`) for the arms both families finished: each
    family's mean test BLEU with its number of seeds and their spread (none for one); the
    gap between the means, in how many of the shared seeds the family ahead is ahead,
    and, with two or more seeds of each, whether the gap exceeds both seed spreads (the
    noise the study can see) or not."""
    budget = {"time": f"{options.minutes:g} minutes of training",
              "tokens": f"{options.passes:g} passes over the same training data"}
    sentences = []
    for arm in ARMS:
        prefixes = [f"{arm}_{family}" for family in FAMILY_NAMES]
        if not all(f"{p}_test_bleu_mean" in values for p in prefixes):
            continue
        parts = []
        for family in FAMILY_NAMES:
            prefix = f"{arm}_{family}"
            seeds = values[f"{prefix}_seeds"]
            spread = ("one seed" if seeds == 1 else
                      f"mean of {seeds} seeds, spread {{{prefix}_test_bleu_spread:.2f}}")
            parts.append(f"{FAMILY_NAMES[family]} {{{prefix}_test_bleu_mean:.2f}} ({spread})")
        sentences.append(f"After {budget[arm]}, test BLEU: " + " against ".join(parts)
                         + _gap_clause(values, arm) + ".")
    return sentences


def _gap_clause(values: dict, arm: str) -> str:
    """": Transformer ahead by 2.14 BLEU, in 2 of 2 seeds, more than ..." (`findings`)."""
    leader = values[f"{arm}_leader"]
    if leader == "neither":
        return ": no gap between the means"
    clause = (f": {FAMILY_NAMES[leader]} ahead by {{{arm}_gap_bleu:.2f}} BLEU, in "
              f"{{{arm}_leader_ahead_seeds}} of {{{arm}_paired_seeds}} seeds")
    if all(values[f"{arm}_{f}_seeds"] >= 2 for f in FAMILY_NAMES):
        spread = max(values[f"{arm}_{f}_test_bleu_spread"] for f in FAMILY_NAMES)
        beyond = values[f"{arm}_gap_bleu"] > spread
        clause += (", more than either family's seed spread" if beyond
                   else ", within the larger seed spread")
    return clause


def results_document(rows: list[dict], options: Table2Options, started: dict) -> dict:
    values = summary_values(rows)
    shown = [f"{arm}: Transformer {{{arm}_transformer_test_bleu_mean:.2f}} vs ConvS2S "
             f"{{{arm}_convs2s_test_bleu_mean:.2f}}" for arm in ARMS
             if all(f"{arm}_{f}_test_bleu_mean" in values for f in FAMILY_NAMES)]
    units = {k: "BLEU" for k in values if "bleu" in k}
    units.update({k: "target tokens/s" for k in values if k.endswith("tokens_per_second")})
    test = "all test sentences" if options.test_limit is None else f"first {options.test_limit}"
    return {
        "what": (f"Table 2 at small scale: {' and '.join(options.presets)} on the same "
                 f"prepared data ({options.data_dir}), each with its own paper schedule; "
                 f"equal time ({options.minutes:g} min) and equal target tokens "
                 f"({options.passes:g} passes), seeds {', '.join(map(str, options.seeds))}; "
                 f"test BLEU ({test}) of the latest checkpoint, each family's own decoding"),
        "title": "Table 2, budget-fair: Transformer vs ConvS2S (test BLEU)",
        "command": options.command, "short_command": "python bench/table2_study.py ...",
        "commit": started["commit"], "commit_role": "measured",
        "machine": started["machine"], "date": started["date"],
        "conditions": (f"precision {options.precision}; {options.threads} TensorFlow "
                       "thread(s) per run; load average at each run's start in its "
                       "run_details; "
                       + conditions_of(rows, "key", "run")),
        "source": "this file, written by transformer_tf/jobs/table2_study.py",
        "study": options.defining_fields(), "figure": options.figure,
        "values": values, "units": units,
        "headline": "; ".join(shown) if shown else "{runs} runs finished",
        "sentences": findings(values, options),
        "columns": COLUMNS,
        "rows": [{k: v for k, v in row.items() if k not in DETAIL_KEYS} for row in rows],
        "run_details": {row["key"]: {k: row[k] for k in DETAIL_KEYS if k in row}
                        for row in rows},
    }


# ------------------------------------------------------------------------ running it
def _train_run(arm: str, preset: str, seed: int, options: Table2Options):
    from transformer_tf.training.fit import TrainOptions, train

    budget = ({"max_minutes": options.minutes} if arm == "time"
              else {"epochs": options.passes})
    return train(TrainOptions(
        data_dir=options.data_dir, model_dir=str(run_directory(options.work_dir, arm, preset,
                                                               seed)),
        preset=preset, training_overrides={"seed": seed}, eval_every=options.eval_every,
        validation_sentences=options.validation_sentences, precision=options.precision,
        verbose=options.verbose, **budget))


def _test_bleu(model_dir: pathlib.Path, options: Table2Options) -> dict:
    """Test BLEU of the run's latest checkpoint with its own decoding settings."""
    from transformer_tf.data.prepared_reader import load_prepared
    from transformer_tf.evaluation.scoring import evaluate
    from transformer_tf.evaluation.hypothesis_files import read_lines
    from transformer_tf.inference.batch import load_translator, translate_lines
    from transformer_tf.rundir import checkpoints

    prepared = load_prepared(options.data_dir)
    test = prepared.files("test")
    sources, references = read_lines(test.source), read_lines(test.target)
    if options.test_limit:
        sources, references = sources[:options.test_limit], references[:options.test_limit]
    latest = checkpoints.newest_readable(model_dir)
    translator = load_translator(model_dir=str(model_dir), checkpoint=str(latest))
    outputs, _ = translate_lines(translator, sources, progress=False)
    decoding = translator.owner.decoding
    scores = evaluate([o[0] for o in outputs], references, lang=prepared.target_language)
    return {"test_bleu": scores.to_dict()["bleu"],
            "decoding": f"beam {decoding.beam_size}, {decoding.length_penalty}"
                        + (f" alpha {decoding.alpha:g}" if decoding.length_penalty == "gnmt"
                           else "")}


def _read_document(path: pathlib.Path, options: Table2Options) -> tuple[list[dict], dict]:
    started = {"commit": current_commit(), "machine": machine_description(),
               "date": datetime.date.today().isoformat(), "pass_sizes": {}}
    if not path.exists():
        return [], started
    document = json.loads(path.read_text())
    if document.get("study") != json.loads(json.dumps(options.defining_fields())):
        raise StudyMismatch(f"{path}: holds a study of other settings "
                            f"({document.get('study')}); give another --results, or the "
                            "same settings to resume it")
    started = {k: document[k] for k in ("commit", "machine", "date")}
    started["pass_sizes"] = document.get("pass_sizes", {})
    started["figure"] = document.get("figure")
    details = document.get("run_details", {})
    return [{**row, **details.get(row["key"], {})} for row in document["rows"]], started


def _refuse_foreign_figure(path: pathlib.Path, options: Table2Options,
                           recorded: str | None) -> None:
    """Raises FigureInUse when `options.figure` exists but is not the figure the results
    file at `path` records (`recorded`, read by `_read_document`): a new study (no results
    file yet), or one resumed with another --figure, would replace a file it did not draw
    (e.g. the committed figure of a study on another CPU kind). A resumed study keeps
    redrawing its own figure."""
    figure = pathlib.Path(options.figure)
    if not figure.exists():
        return
    if recorded is not None and os.path.normpath(recorded) == os.path.normpath(figure):
        return
    whose = (f"{path} records {recorded or 'no figure'}" if path.exists()
             else f"{path} does not exist yet: this is a new study")
    raise FigureInUse(f"{figure}: exists and is not this study's figure ({whose}); give "
                      "another --figure, or remove the file")


def _write_json(path: pathlib.Path, document: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(document, indent=1) + "\n")
    tmp.replace(path)


def _record_run(path: pathlib.Path, row: dict | None, pass_sizes: dict,
                options: Table2Options) -> list[dict]:
    """Add a finished run to the results file and redraw the figure; returns every row.
    With `row` None, only bring the file's summary (values, sentences) up to this code's
    rules: rewritten, with the figure, only where it differs.

    Another process of the same study (`train_only`) may have added runs since this one
    read the file: under a lock in the work directory the file is read again and this
    run joins the rows it holds."""
    import filelock  # the lock rundir/lock.py takes, blocking here

    lock_path = pathlib.Path(options.work_dir) / "results.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(lock_path)):
        rows, recorded = _read_document(path, options)
        if row is not None:
            rows = [r for r in rows if r["key"] != row["key"]] + [row]
        order = _plan_order(options)
        rows.sort(key=lambda r: order.get(r["key"], len(order)))
        sizes = {**recorded.pop("pass_sizes"), **pass_sizes}
        document = {**results_document(rows, options, recorded), "pass_sizes": sizes}
        if row is None and _same_summary(json.loads(path.read_text()), document):
            return rows
        _write_json(path, document)
        draw_figure(rows, options)
    return rows


def _same_summary(written: dict, document: dict) -> bool:
    """Whether a results file as read holds `document`'s summary (compared as JSON)."""
    keys = ("values", "units", "headline", "sentences")
    return all(written.get(k) == json.loads(json.dumps(document[k])) for k in keys)


def _plan(options: Table2Options) -> list[tuple]:
    """The study's runs in order: (seed, arm, preset)."""
    return [(seed, arm, preset) for seed in options.seeds for arm in options.arms
            for preset in options.presets]


def _plan_order(options: Table2Options) -> dict:
    return {run_key(arm, preset, seed): index
            for index, (seed, arm, preset) in enumerate(_plan(options))}


def draw_figure(rows: list[dict], options: Table2Options) -> None:
    """The figure of every finished run's dev curve (its row's `curve`, kept in the
    results file's run_details, so a study continued in a fresh clone draws every run):
    one panel per arm this process runs or any finished run ran (a process given one
    --arms keeps the other arm's panel)."""
    from transformer_tf.visualization.curves import Curve, Panel, save_curves_png

    titles = {"time": ("Equal training time", "training minutes"),
              "tokens": ("Equal target tokens", "passes over the training data")}
    panels = []
    arms_drawn = set(options.arms) | {row["arm"] for row in rows}
    for arm in (a for a in ARMS if a in arms_drawn):
        curves = tuple(Curve(row["family"], row["seed"], tuple(map(tuple, row["curve"])))
                       for row in rows if row["arm"] == arm)
        panels.append(Panel(titles[arm][0], titles[arm][1], curves))
    save_curves_png(panels, options.figure, title="Dev BLEU during training "
                    f"({', '.join(options.presets)})")


def run_table2_study(options: Table2Options, flops_per_target_token: Callable | None = None,
                     train_run: Callable | None = None, score_run: Callable | None = None,
                     say: Callable = print) -> dict:
    """Train and score every run not in the results file yet; returns the results document.

    `flops_per_target_token(preset, vocab_size)` -> training FLOPs per target token (None:
    the column stays empty). `train_run(arm, preset, seed, options)` -> TrainResult and
    `score_run(model_dir, options)` -> {"test_bleu", "decoding"} default to real training
    and test scoring (tests pass fakes)."""
    from transformer_tf.data.prepared_reader import load_prepared
    from transformer_tf.rundir import checkpoints
    from transformer_tf.rundir.model_dir import read_run_config
    from transformer_tf.rundir.validation_log import read_validation_log
    from transformer_tf.training.precision import resolve_precision

    unknown = sorted(set(options.arms) - set(ARMS))
    if unknown:
        raise ValueError(f"arms: unknown {unknown}; choose from {ARMS}")
    families = [get_preset(p).family for p in options.presets]
    if sorted(families) != sorted(FAMILY_NAMES):
        raise ValueError(f"presets: one Transformer and one ConvS2S preset are compared, got "
                         f"{list(options.presets)} ({', '.join(families)})")
    train_run, score_run = train_run or _train_run, score_run or _test_bleu
    # Recorded resolved: a resume on a machine where "auto" resolves otherwise is refused.
    options = dataclasses.replace(options, precision=resolve_precision(options.precision)[0])
    path = pathlib.Path(options.results)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows, recorded = _read_document(path, options)
    # Before any training: nothing to lose yet.
    _refuse_foreign_figure(path, options, recorded.get("figure"))
    pass_sizes = recorded["pass_sizes"]
    for preset in options.presets:
        if preset not in pass_sizes:
            pass_sizes[preset] = pass_size(options.data_dir, preset, options.precision)
    vocab_size = load_prepared(options.data_dir).vocab_size
    done = {row["key"] for row in rows}
    plan = _plan(options)
    here = where_this_runs(options.alongside)
    for index, (seed, arm, preset) in enumerate(plan, start=1):
        key = run_key(arm, preset, seed)
        if key in done:
            say(f"[{index}/{len(plan)}] {key}: done before, kept")
            continue
        if options.train_only is not None and preset not in options.train_only:
            say(f"[{index}/{len(plan)}] {key}: left to the process that trains {preset}")
            continue
        model_dir = run_directory(options.work_dir, arm, preset, seed)
        say(f"[{index}/{len(plan)}] {key}: training")
        load = os.getloadavg()[0]
        record_sitting(model_dir, here, checkpoints.resume_step(model_dir))
        result = train_run(arm, preset, seed, options)
        set_aside_live_objects()  # runs train and trace in one process, one after another
        say(f"[{index}/{len(plan)}] {key}: decoding the test set")
        scores = score_run(model_dir, options)
        set_aside_live_objects()
        run = read_run_config(model_dir)
        gflop = (None if flops_per_target_token is None
                 else flops_per_target_token(preset, vocab_size) / 1e9)
        records = read_validation_log(model_dir)
        row = {
            "key": key, "arm": arm, "family": run.family, "preset": preset, "seed": seed,
            "steps": result.step, "train_minutes": result.trained_seconds / 60.0,
            "stopped_by": result.stopped_by, "load_average_at_start": round(load, 2),
            **training_columns(result.step, pass_sizes[preset], gflop),
            "target_tokens_per_second": median_logged_scalar(
                model_dir / "logs" / "train", "target_tokens_per_second"),
            "gflop_per_target_token": gflop,
            "dev_bleu_last": records[-1].dev_bleu if records else None,
            "dev_nll_last": records[-1].dev_nll if records else None,
            **scores, **where_it_ran(model_dir, here, result.step),
            "curve": [list(point) for point in curve_points(
                records, arm, pass_sizes[preset]["batches"])]}
        rows = _record_run(path, row, pass_sizes, options)
        say(f"[{index}/{len(plan)}] {key}: test BLEU {scores['test_bleu']:.2f} -> {path}, "
            f"{options.figure}")
    if path.exists():  # with the runs of other processes, this code's summary
        _record_run(path, None, pass_sizes, options)
    rows, recorded = _read_document(path, options)
    return {**results_document(rows, options, recorded),
            "pass_sizes": {**recorded.pop("pass_sizes"), **pass_sizes}}
