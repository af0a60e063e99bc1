"""Where a fine-tuned run's first weights come from (`train --init-from`).

A fine-tuned run is a new run directory whose model starts from a checkpoint of another
run (the source) instead of random weights; its optimizer, schedule and step count start
afresh. Its run_config.json records the origin under "init_from" (`InitSource.get_config`):

    {"model_dir": the source run directory, "checkpoint": the checkpoint prefix,
     "step": the source's step at that checkpoint (null for an averaged one),
     "checkpoint_sha256": sha256 over the checkpoint's files (`data.text_lines.sha256_of_files`)}

The source run directory is needed (its run_config.json and tokenizer decide whether the
new run may start from it): a checkpoint is found in MDIR/checkpoints/ or MDIR/averaged/.
"""
from __future__ import annotations

import dataclasses
import pathlib
import re

import tensorflow as tf

from transformer_tf.data.text_lines import sha256_of_files
from transformer_tf.rundir import checkpoints
from transformer_tf.rundir import model_dir as model_dir_lib

_TRAINING_CHECKPOINT = re.compile(r"^ckpt-(\d+)$")
_OPTIMIZER_STEP_KEY = "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"


@dataclasses.dataclass(frozen=True)
class InitSource:
    """A checkpoint a new run starts from, and the run it belongs to (absolute paths)."""

    model_dir: str
    checkpoint: str
    step: int | None
    checkpoint_sha256: str

    def get_config(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_config(cls, config: dict) -> InitSource:
        return cls(**config)


def source_run_dir(checkpoint) -> pathlib.Path:
    """The run directory holding `checkpoint` (a prefix in MDIR/checkpoints/ or
    MDIR/averaged/, or MDIR/... itself). Raises FileNotFoundError naming the directories
    looked at when neither holds a run_config.json."""
    prefix = pathlib.Path(checkpoint).resolve()
    looked = [prefix.parent, prefix.parent.parent]
    for directory in looked:
        if (directory / model_dir_lib.RUN_CONFIG).is_file():
            return directory
    raise FileNotFoundError(
        f"{checkpoint}: no run directory around this checkpoint (no "
        f"{model_dir_lib.RUN_CONFIG} in {looked[0]} or {looked[1]}); fine-tuning needs "
        "the source run's configuration and tokenizer: give a checkpoint inside its run "
        "directory, or the run directory itself")


def describe(checkpoint) -> InitSource:
    """The `InitSource` of a readable checkpoint prefix (raises `CheckpointError` for a
    damaged or missing one, FileNotFoundError when no run directory holds it)."""
    prefix = str(pathlib.Path(checkpoint).resolve())
    checkpoints.check_readable(prefix)
    run_dir = source_run_dir(prefix)
    match = _TRAINING_CHECKPOINT.match(pathlib.Path(prefix).name)
    reader = tf.train.load_checkpoint(prefix)
    if match:
        step = int(match.group(1))
    elif reader.has_tensor(_OPTIMIZER_STEP_KEY):
        step = int(reader.get_tensor(_OPTIMIZER_STEP_KEY))
    else:  # an averaged checkpoint holds the model alone
        step = None
    return InitSource(model_dir=str(run_dir), checkpoint=prefix, step=step,
                      checkpoint_sha256=sha256_of_files(checkpoints.checkpoint_files(prefix)))


def check_unchanged(source: InitSource) -> None:
    """Raises ValueError when the recorded checkpoint is gone or its files changed since
    the run recorded it (before a resumed fine-tuned run with no checkpoint of its own
    starts from it again)."""
    checkpoints.check_readable(source.checkpoint)
    now = sha256_of_files(checkpoints.checkpoint_files(source.checkpoint))
    if now != source.checkpoint_sha256:
        raise ValueError(f"{source.checkpoint}: the checkpoint this run was to start from "
                         f"has changed since (sha256 {now[:12]}..., recorded "
                         f"{source.checkpoint_sha256[:12]}...); start the run again in a "
                         "new --model-dir")
