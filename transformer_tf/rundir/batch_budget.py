"""The token budget a run lowered when a batch did not fit in memory.

    MDIR/batch_budget.json  {"tokens_per_batch": the budget in force,
                             "lowered": [{"step": ..., "from": ..., "to": ..., "time": ...,
                                          "error": the allocator's message}, ...]}

Training writes it each time it halves its tokens per batch (`training.fit`); a later
resume of the run uses the lowered budget unless told another one.
"""
from __future__ import annotations

import datetime
import json
import pathlib

from transformer_tf.rundir.files import write_json_atomically

BUDGET_FILE = "batch_budget.json"


def budget_path(model_dir) -> pathlib.Path:
    return pathlib.Path(model_dir) / BUDGET_FILE


def read_budget(model_dir) -> dict | None:
    """MDIR's record (see the module docstring), or None when the run never lowered it."""
    path = budget_path(model_dir)
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
        int(record["tokens_per_batch"])
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a valid batch budget record ({error}); delete it to "
                         "train with the configured budget") from None
    return record


def record_lowered(model_dir, step: int, old: int, new: int, error: str) -> dict:
    """Append one lowering to MDIR's record (written atomically); returns the record."""
    record = read_budget(model_dir) or {"lowered": []}
    record["tokens_per_batch"] = new
    record["lowered"].append({
        "step": step, "from": old, "to": new, "error": error,
        "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")})
    write_json_atomically(budget_path(model_dir), record)
    return record
