"""The paper's model variations (section 6.2, Table 3) as one resumable study.

Each row changes one thing around a base configuration (a Transformer preset): (A) heads at
constant d_model, (B) smaller d_k alone, (C) depth, width and feed-forward size, (D) dropout
and label smoothing, (E) learned positions, and "big". At the paper's scale the base is the
`base` preset and the rows are exactly the paper's; around a smaller base (e.g. `multi30k`)
every row is scaled by the same rule, relative to the base's own values:

    A  h in {1, h/2, 2h, 4h}, d_k = d_v = d_model / h       (paper: 1, 4, 16, 32)
    B  d_k in {d_k/4, d_k/2}, d_v unchanged                  (paper: 16, 32)
    C  N in {N/3, 2N/3, 4N/3} (rounded, >= 1)                (paper: 2, 4, 8)
       d_model in {d/2, 2d}, d_k = d_v = d_model / h, d_ff unchanged
       d_ff in {d_ff/2, 2 d_ff}
    D  P_drop in {0, 2 P_drop}; eps_ls in {0, 2 eps_ls}      (paper: 0.0 / 0.2 both)
    E  learned positions instead of sinusoids
    big  d_model, d_ff and h doubled, P_drop + 0.2           (paper: 1024, 4096, 16, 0.3)

Every row trains with the same data, batch, schedule and budget (minutes or steps), and is
scored on the development set as the paper did for this table: perplexity per target BPE
token and BLEU with beam 4, alpha 0.6, the final checkpoint (no averaging). The study
resumes: a finished row is not retrained, a killed row continues from its last checkpoint
with what is left of its budget.
"""
from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import time
from typing import Callable

from transformer_tf.config import ModelConfig
from transformer_tf.presets import get_preset
from transformer_tf.runtime.gc_freeze import set_aside_live_objects

ROW_GROUPS = ("A", "B", "C", "D", "E", "big")
RESULTS_JSON = "variations.json"
STUDY_FILE = "study.json"
RESULTS_MD = "variations.md"
ROW_RESULT = "result.json"

# Table 3's parameter column (x 10^6) where the paper gives one; rows without a figure
# there have the base's count.
PAPER_PARAMETERS_MILLIONS = {
    "base": 65, "B: d_k=16": 58, "B: d_k=32": 60, "C: N=2": 36, "C: N=4": 50, "C: N=8": 80,
    "C: d_model=256": 28, "C: d_model=1024": 168, "C: d_ff=1024": 53, "C: d_ff=4096": 90,
    "big": 213,
}
PAPER_VOCABULARY = 37000


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the table: a name ("C: N=2"), its group and the configs it trains."""

    name: str
    group: str
    model: ModelConfig
    label_smoothing: float

    @property
    def directory_name(self) -> str:
        return "".join(c if c.isalnum() or c in "-_=." else "_" for c in self.name).replace(
            "__", "_")


def _positive_int(value: float) -> int:
    return max(1, int(round(value)))


def define_rows(base: ModelConfig, label_smoothing: float, groups=ROW_GROUPS) -> list[Row]:
    """The base row and the rows of `groups` around `base` (the rule of the module doc)."""
    base = base.resolved()
    h, d, d_ff, n = base.num_heads, base.d_model, base.d_ff, base.num_layers
    rows = [Row("base", "base", base, label_smoothing)]

    def add(name, group, smoothing=label_smoothing, **changes):
        rows.append(Row(name, group, base.replace(**changes).resolved(), smoothing))

    def heads(count):
        return dict(num_heads=count, key_dim=d // count, value_dim=d // count)

    if "A" in groups:
        for count in sorted({1, max(1, h // 2), 2 * h, 4 * h} - {h}):
            if d % count == 0:
                add(f"A: h={count}", "A", **heads(count))
    if "B" in groups:
        for key_dim in (base.key_dim // 4, base.key_dim // 2):
            add(f"B: d_k={key_dim}", "B", key_dim=max(1, key_dim))
    if "C" in groups:
        for layers in sorted({_positive_int(n / 3), _positive_int(2 * n / 3),
                              _positive_int(4 * n / 3)} - {n}):
            add(f"C: N={layers}", "C", num_layers=layers, num_decoder_layers=layers)
        for width in (d // 2, 2 * d):
            add(f"C: d_model={width}", "C", d_model=width, key_dim=width // h,
                value_dim=width // h)
        for inner in (d_ff // 2, 2 * d_ff):
            add(f"C: d_ff={inner}", "C", d_ff=inner)
    if "D" in groups:
        for dropout in (0.0, min(0.9, round(2 * base.dropout, 3))):
            add(f"D: P_drop={dropout}", "D", dropout=dropout)
        for smoothing in (0.0, min(0.9, round(2 * label_smoothing, 3))):
            add(f"D: eps_ls={smoothing}", "D", smoothing=smoothing)
    if "E" in groups:
        add("E: learned positions", "E", position_encoding="learned")
    if "big" in groups:
        add("big", "big", d_model=2 * d, d_ff=2 * d_ff, num_heads=2 * h, key_dim=base.key_dim,
            value_dim=base.value_dim, dropout=min(0.9, round(base.dropout + 0.2, 3)))
    return rows


def parameter_count(config: ModelConfig) -> int:
    """Parameters of a Transformer built from `config` (shared embeddings counted once),
    without building it: embeddings, attention projections and biases, FFNs, LayerNorms
    (and position tables when learned, final LayerNorms when pre-norm)."""
    c = config.resolved()
    d, h = c.d_model, c.num_heads
    attention = (d * h * c.key_dim * 2 + h * c.key_dim * 2 + d * h * c.value_dim
                 + h * c.value_dim + h * c.value_dim * d + d)
    ffn = 2 * d * c.d_ff + c.d_ff + d
    norm = 2 * d
    total = (c.num_layers * (attention + ffn + 2 * norm)
             + c.num_decoder_layers * (2 * attention + ffn + 3 * norm))
    vocab, target_vocab = c.vocab_size, c.target_vocab_size
    tables = {"all": vocab, "target": vocab + target_vocab,
              "none": vocab + 2 * target_vocab}[c.embedding_sharing]
    total += tables * d
    if c.position_encoding == "learned":
        total += 2 * c.max_position * d
    if c.norm_position == "pre":
        total += 2 * norm
    return total


def count_rows(groups=ROW_GROUPS) -> list[dict]:
    """The parameter column at the paper's scale (base preset, vocabulary 37,000) with the
    paper's figure and both differences from the base row."""
    base = get_preset("base")
    rows = define_rows(base.model.replace(vocab_size=PAPER_VOCABULARY),
                       base.training.label_smoothing, groups)
    ours_base = parameter_count(rows[0].model)
    table = []
    for row in rows:
        ours = parameter_count(row.model)
        paper = PAPER_PARAMETERS_MILLIONS.get(row.name, PAPER_PARAMETERS_MILLIONS["base"])
        table.append({"row": row.name, "parameters": ours,
                      "difference_from_base_millions": (ours - ours_base) / 1e6,
                      "paper_millions": paper,
                      "paper_difference_from_base_millions": paper - PAPER_PARAMETERS_MILLIONS["base"]})
    return table


# ------------------------------------------------------------------------ running the study
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

    def defining_fields(self) -> dict:
        """What a study's results depend on; a resumed study must not change any of it."""
        return {"base_preset": self.base_preset, "budget_minutes": self.budget_minutes,
                "max_steps": self.max_steps, "model_overrides": dict(self.model_overrides),
                "training_overrides": dict(self.training_overrides),
                "data_dir": str(pathlib.Path(self.data_dir).resolve())}


class StudyMismatch(ValueError):
    """A study directory was started with other settings than the ones given now."""


def _check_same_study(out: pathlib.Path, options: StudyOptions) -> None:
    """Records the study's defining settings on its first run; later runs must match them
    (rows already trained under other settings would otherwise be mixed into the table)."""
    path = out / STUDY_FILE
    wanted = json.loads(json.dumps(options.defining_fields()))
    if not path.exists():
        path.write_text(json.dumps(wanted, indent=2))
        return
    recorded = json.loads(path.read_text())
    changed = sorted(k for k in set(wanted) | set(recorded) if wanted.get(k) != recorded.get(k))
    if changed:
        details = "; ".join(f"{k}: was {recorded.get(k)!r}, now {wanted.get(k)!r}"
                            for k in changed)
        raise StudyMismatch(f"{path}: this study was started with other settings ({details}); "
                            "use another --out, or the same settings to resume it")


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
        training_overrides={**options.training_overrides,
                            "label_smoothing": row.label_smoothing},
        max_steps=options.max_steps, max_minutes=options.budget_minutes,
        eval_every=options.eval_every, precision=options.precision, verbose=options.verbose))


def _evaluate_row(row: Row, row_dir: pathlib.Path, options: StudyOptions, seconds: float):
    from transformer_tf.data.prepared_reader import load_prepared
    from transformer_tf.inference.loading import source_decoding
    from transformer_tf.inference.selection import score_on_dev
    from transformer_tf.rundir import checkpoints

    model_dir = row_dir / "model"
    latest = checkpoints.newest_readable(model_dir)  # FileNotFoundError without one
    paper = source_decoding(model_dir=model_dir).replace(beam_size=4, alpha=0.6)
    score = score_on_dev("latest", model_dir, latest, load_prepared(options.data_dir), paper)
    steps = checkpoints.checkpoint_step(latest)
    tokens_per_s = _median_logged(model_dir / "logs" / "train", "target_tokens_per_second")
    return {"row": row.name, "group": row.group, "model": row.model.get_config(),
            "label_smoothing": row.label_smoothing, "parameters": parameter_count(row.model),
            "steps": steps, "dev_perplexity": math.exp(score.nll), "dev_bleu": score.bleu,
            "target_tokens_per_second": tokens_per_s, "train_seconds": round(seconds, 1),
            "checkpoint": score.checkpoint}


def _median_logged(logdir: pathlib.Path, tag: str) -> float | None:
    import statistics

    import tensorflow as tf

    values = []
    for path in sorted(logdir.glob("events.out.tfevents.*")):
        for record in tf.data.TFRecordDataset(str(path)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            values += [float(tf.make_ndarray(v.tensor)) for v in event.summary.value
                       if v.tag == tag]
    return statistics.median(values) if values else None


def run_study(options: StudyOptions, train_row: Callable | None = None,
              evaluate_row: Callable | None = None, say: Callable = print) -> list[dict]:
    """Train and score every row (resuming), write variations.{json,md}; returns results.

    `train_row(row, row_dir, options, minutes_left)` and `evaluate_row(row, row_dir,
    options, seconds)` default to the real training and dev scoring (tests pass fakes).
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

    base_model, base_smoothing = base_of_study(options,
                                               load_prepared(options.data_dir).vocab_size)
    rows = define_rows(base_model, base_smoothing, options.groups)
    out = pathlib.Path(options.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _check_same_study(out, options)
    results = []
    for index, row in enumerate(rows, start=1):
        row_dir = out / "rows" / row.directory_name
        result_path = row_dir / ROW_RESULT
        if result_path.exists():
            say(f"[{index}/{len(rows)}] {row.name}: done before, kept")
            results.append(json.loads(result_path.read_text()))
            continue
        row_dir.mkdir(parents=True, exist_ok=True)
        minutes_left = _row_budget_left(row_dir, options)
        plan = (f"{minutes_left:.1f} of {options.budget_minutes:g} min left"
                if minutes_left is not None else f"{options.max_steps} steps")
        say(f"[{index}/{len(rows)}] {row.name}: training ({plan})")
        started = time.monotonic()
        if minutes_left is None or minutes_left > 0:
            train_row(row, row_dir, options, minutes_left)
        set_aside_live_objects()  # rows train and trace in one process, one after another
        say(f"[{index}/{len(rows)}] {row.name}: scoring on the dev set")
        result = evaluate_row(row, row_dir, options, time.monotonic() - started)
        set_aside_live_objects()
        result_path.write_text(json.dumps(result, indent=2))
        results.append(result)
        write_tables(results, out, options)
    write_tables(results, out, options)
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
                      "around the base as in transformer_tf/jobs/variations.py."]
    return "\n".join(lines) + "\n"


def write_tables(results: list[dict], out: pathlib.Path, options: StudyOptions) -> None:
    (out / RESULTS_JSON).write_text(json.dumps(
        {"options": dataclasses.asdict(options), "rows": results}, indent=2))
    (out / RESULTS_MD).write_text(format_table(results, options))


def format_counts(counts: list[dict]) -> str:
    lines = ["| row | params (ours) | ours - base | paper | paper - base |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for c in counts:
        lines.append(f"| {c['row']} | {c['parameters'] / 1e6:.1f} M | "
                     f"{c['difference_from_base_millions']:+.1f} M | {c['paper_millions']} M | "
                     f"{c['paper_difference_from_base_millions']:+d} M |")
    return "\n".join(lines) + "\n"


__all__ = ["Row", "StudyOptions", "StudyMismatch", "base_of_study", "define_rows",
           "parameter_count", "count_rows", "run_study", "format_table", "format_counts"]
