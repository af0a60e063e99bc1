"""The run's validation log: one JSON line per evaluation during training.

    MDIR/validation.jsonl   {"step", "trained_seconds", "dev_bleu", "dev_nll", "checkpoint"}

Append-only: each evaluation adds one line and flushes it to disk before training goes
on, so a killed run loses none of the lines already written, and a resumed run appends to
the same file. A resumed run goes back to its last checkpoint and redoes the evaluations
after it: the file may then hold a step twice, in the order evaluated (the later line is
the run's history from then on).

A line cut short by a kill mid-write (not JSON) is skipped with a warning when the file is
read, and the next append starts on a new line; a JSON line with a missing or wrong field
is an error naming the file, the line number and the field.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import pathlib

logger = logging.getLogger(__name__)

VALIDATION_LOG = "validation.jsonl"


@dataclasses.dataclass(frozen=True)
class ValidationRecord:
    """One evaluation of the model during training.

    step: the optimizer step evaluated.
    trained_seconds: the run's training time (seconds, all invocations) at the evaluation.
    dev_bleu: cased sacreBLEU of the dev subset's greedy translations.
    dev_nll: nats per real target token, teacher forced, over the whole dev set.
    checkpoint: a checkpoint holding exactly these weights, relative to MDIR (the best
      checkpoint when this evaluation became the best, else the training checkpoint saved
      at this step), or None when none was saved at this step.
    """

    step: int
    trained_seconds: float
    dev_bleu: float
    dev_nll: float
    checkpoint: str | None = None


_TYPES = {"step": (int,), "trained_seconds": (int, float), "dev_bleu": (int, float),
          "dev_nll": (int, float), "checkpoint": (str, type(None))}


def validation_log_path(model_dir) -> pathlib.Path:
    return pathlib.Path(model_dir) / VALIDATION_LOG


def append_validation(model_dir, record: ValidationRecord) -> None:
    """Append `record` as one line and flush it to disk (fsync) before returning."""
    path = validation_log_path(model_dir)
    line = json.dumps(dataclasses.asdict(record), sort_keys=True)
    with open(path, "a+b") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() > 0:  # a line cut short by a kill: start a new one after it
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                line = "\n" + line
        handle.write((line + "\n").encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())


def _parse(text: str, where: str) -> ValidationRecord | None:
    """The record of one line; None for a line that is not JSON (cut short by a kill)."""
    try:
        raw = json.loads(text)
    except ValueError as error:
        logger.warning("%s: not JSON, cut short by an interrupted write? (%s); skipped",
                       where, error)
        return None
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: not a JSON object")
    for field, types in _TYPES.items():
        if field not in raw:
            raise ValueError(f"{where}: field {field!r} is missing")
        value = raw[field]
        if isinstance(value, bool) or not isinstance(value, types):
            raise ValueError(f"{where}: field {field!r} is {value!r}, not "
                             f"{' or '.join(t.__name__ for t in types)}")
        if field in ("dev_bleu", "dev_nll") and not math.isfinite(value):
            raise ValueError(f"{where}: field {field!r} is {value!r}, not a finite number")
    return ValidationRecord(**{field: raw[field] for field in _TYPES})


def read_validation_log(model_dir) -> list[ValidationRecord]:
    """The records of MDIR/validation.jsonl in the order written ([] without the file).

    A line that is not JSON (what a kill mid-write leaves) is skipped with a warning; a
    JSON line with a missing or wrong field raises ValueError "<file>:<line>: field ..."."""
    path = validation_log_path(model_dir)
    if not path.exists():
        return []
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if line.strip():
            record = _parse(line, f"{path}:{number}")
            if record is not None:
                records.append(record)
    return records
