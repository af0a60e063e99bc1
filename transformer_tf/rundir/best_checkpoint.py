"""The run's best checkpoint by dev BLEU, kept apart from the rolling window of training
checkpoints.

    MDIR/checkpoints/best/ckpt-<step>   the model weights (no optimizer state, like an
                                        averaged checkpoint)
    MDIR/checkpoints/best/best.json     {"checkpoint": "ckpt-<step>", "step", "dev_bleu",
                                        "dev_nll", "trained_seconds"}

Training's CheckpointManager lists and deletes only MDIR/checkpoints/ckpt-<step>, so its
`keep_checkpoints` window never removes the best one. A new best is saved in three
moves: its checkpoint is written, best.json is replaced (atomically), and only then are
the older checkpoint's files deleted. A kill at any point leaves best.json naming a whole
checkpoint (a leftover newer one is deleted by the next save).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import pathlib

import tensorflow as tf

from transformer_tf.rundir.checkpoints import checkpoint_dir
from transformer_tf.rundir.files import write_json_atomically

logger = logging.getLogger(__name__)

BEST_SUBDIR = "best"
BEST_RECORD = "best.json"


@dataclasses.dataclass(frozen=True)
class BestCheckpoint:
    """The best evaluation so far and the checkpoint of its weights.

    checkpoint: the checkpoint prefix (absolute).
    step: the optimizer step of the weights.
    dev_bleu, dev_nll: its validation scores (as in the validation log).
    trained_seconds: the run's training time at that step.
    """

    checkpoint: str
    step: int
    dev_bleu: float
    dev_nll: float
    trained_seconds: float


def best_dir(model_dir) -> pathlib.Path:
    return checkpoint_dir(model_dir) / BEST_SUBDIR


def save_best(model, model_dir, step: int, dev_bleu: float, dev_nll: float,
              trained_seconds: float) -> BestCheckpoint:
    """Write `model`'s weights as the run's best checkpoint (replacing the previous best)
    and record its scores; returns the record. Call only while holding the run's lock."""
    directory = best_dir(model_dir)
    directory.mkdir(parents=True, exist_ok=True)
    prefix = directory / f"ckpt-{step}"
    tf.train.Checkpoint(model=model).write(str(prefix))
    best = BestCheckpoint(checkpoint=str(prefix), step=step, dev_bleu=dev_bleu,
                          dev_nll=dev_nll, trained_seconds=trained_seconds)
    record = {**dataclasses.asdict(best), "checkpoint": prefix.name}
    write_json_atomically(directory / BEST_RECORD, record)
    for path in directory.glob("ckpt-*"):
        if path.is_file() and not path.name.startswith(prefix.name + "."):
            path.unlink()
    return best


def read_best(model_dir) -> BestCheckpoint | None:
    """The recorded best checkpoint of MDIR, or None when there is none (or its record is
    unreadable: logged, and treated as none). Its files are not checked here (see
    `checkpoints.checkpoint_problem`)."""
    path = best_dir(model_dir) / BEST_RECORD
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
        best = BestCheckpoint(**record)
        if not isinstance(best.checkpoint, str) or "/" in best.checkpoint:
            raise ValueError(f"checkpoint {best.checkpoint!r} is not a file name in {path.parent}")
    except (ValueError, TypeError) as error:
        logger.warning("%s: unreadable (%s); ignored", path, error)
        return None
    return dataclasses.replace(best, checkpoint=str(path.parent / best.checkpoint))
