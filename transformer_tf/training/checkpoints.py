"""Training checkpoints (tf.train.CheckpointManager) and checkpoint averaging.

Layout under a model directory:
    MDIR/checkpoints/ckpt-<step>.{index,data-*}  the last K training checkpoints
    MDIR/checkpoints/checkpoint                  the manager's state file

Each checkpoint holds the model, the optimizer (iteration count, Adam moments) and, from
the training driver, the number of training batches consumed (the data position; it is
not the step count when gradients are accumulated over several batches, or when loss
scaling skips a step), so a resumed run continues with the same step count, optimizer
state and data position. TensorFlow writes a
checkpoint's files under temporary names and renames them, and rewrites the state file
atomically, so a run killed during a save leaves the previous checkpoint intact.
"""
from __future__ import annotations

import dataclasses
import pathlib

import numpy as np
import tensorflow as tf

from transformer_tf.models.registry import build_model
from transformer_tf.training import model_dir as model_dir_lib

CHECKPOINT_SUBDIR = "checkpoints"


def checkpoint_dir(model_dir) -> pathlib.Path:
    return pathlib.Path(model_dir) / CHECKPOINT_SUBDIR


BATCHES_KEY = "batches/.ATTRIBUTES/VARIABLE_VALUE"


def make_manager(model, optimizer, model_dir, max_to_keep: int,
                 batches: tf.Variable | None = None,
                 training_state: dict | None = None) -> tf.train.CheckpointManager:
    """A manager saving model and optimizer as MDIR/checkpoints/ckpt-<step>.

    `batches`, if given, is an int64 variable counting the training batches consumed,
    saved (and restored by `restore_latest`) with them. `training_state` maps names to
    more variables of the run (e.g. the best dev loss of a plateau schedule), saved and
    restored the same way.
    """
    objects = {"model": model, "optimizer": optimizer, **(training_state or {})}
    if batches is not None:
        objects["batches"] = batches
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(**objects), str(checkpoint_dir(model_dir)),
        max_to_keep=max_to_keep, step_counter=optimizer.iterations, checkpoint_name="ckpt")
    manager.training_state = dict(training_state or {})
    return manager


def restore_latest(manager: tf.train.CheckpointManager) -> int:
    """Restore the newest checkpoint if there is one; returns the restored step (0 if none).

    Optimizer slot variables must exist before restoring: build the optimizer first. The
    batch counter keeps its value if the checkpoint has none (written before it existed).
    """
    latest = manager.latest_checkpoint
    if latest is None:
        return 0
    checkpoint = manager.checkpoint
    tf.train.Checkpoint(model=checkpoint.model, optimizer=checkpoint.optimizer) \
        .restore(latest).assert_existing_objects_matched().expect_partial()  # not `batches`
    batches = getattr(checkpoint, "batches", None)
    reader = tf.train.load_checkpoint(latest)
    if batches is not None and reader.has_tensor(BATCHES_KEY):
        batches.assign(reader.get_tensor(BATCHES_KEY))
    for name, variable in getattr(manager, "training_state", {}).items():
        key = f"{name}/.ATTRIBUTES/VARIABLE_VALUE"
        if reader.has_tensor(key):  # absent from checkpoints written before it existed
            variable.assign(reader.get_tensor(key))
    return int(checkpoint.optimizer.iterations.numpy())


# Averaging candidates come from the final part of training only: the last TAIL_FRACTION of
# the run's steps (the paper averages the last ~7% of a 12-hour run; a short run changes
# faster, so its tail is wider). Saves closer than MIN_GAP_FRACTION of the run apart (an
# end-of-training save a step after a periodic one) are the same point: the later counts.
TAIL_FRACTION = 0.2
MIN_GAP_FRACTION = 0.01


def checkpoint_step(path) -> int:
    """The step of a training checkpoint prefix `.../ckpt-<step>`."""
    return int(str(path).rsplit("-", 1)[1])


def tail_checkpoints(paths: list[str], last: int) -> list[str]:
    """Up to `last` of `paths` (oldest first) fit for averaging: from the final
    TAIL_FRACTION of the steps, near-duplicate saves counted once; oldest first."""
    if not paths:
        return []
    final = checkpoint_step(paths[-1])
    in_tail = [p for p in paths if checkpoint_step(p) >= (1.0 - TAIL_FRACTION) * final]
    min_gap = MIN_GAP_FRACTION * final
    distinct = [p for p, later in zip(in_tail, in_tail[1:] + [None])
                if later is None or checkpoint_step(later) - checkpoint_step(p) >= min_gap]
    return distinct[-last:]


def list_checkpoints(model_dir) -> list[str]:
    """Checkpoint prefixes of MDIR, oldest first."""
    state = tf.train.get_checkpoint_state(str(checkpoint_dir(model_dir)))
    if state is None:
        return []
    return list(state.all_model_checkpoint_paths)


def average_checkpoints(model, checkpoint_paths: list[str], output_prefix) -> str:
    """Average the model weights of `checkpoint_paths` into a new checkpoint.

    Args:
      model: a built model of the same architecture (its weights are overwritten with the
        average).
      checkpoint_paths: prefixes written by the training manager (or by this function).
      output_prefix: where to write, e.g. MDIR/averaged/ckpt.

    Returns:
      The written checkpoint's path (a prefix readable with
      `tf.train.Checkpoint(model=...).read(path)`).
    """
    if not checkpoint_paths:
        raise ValueError("no checkpoints to average")
    sums = [np.zeros(w.shape, np.float64) for w in model.weights]
    checkpoint = tf.train.Checkpoint(model=model)
    for path in checkpoint_paths:
        checkpoint.read(path).expect_partial().assert_existing_objects_matched()
        for total, weight in zip(sums, model.weights):
            total += weight.numpy()
    for total, weight in zip(sums, model.weights):
        weight.assign(tf.cast(total / len(checkpoint_paths), weight.dtype))
    pathlib.Path(output_prefix).parent.mkdir(parents=True, exist_ok=True)
    return checkpoint.write(str(output_prefix))


@dataclasses.dataclass(frozen=True)
class AveragedCheckpoint:
    path: str  # the written checkpoint prefix
    sources: list  # the checkpoint prefixes averaged, oldest first
    requested: int  # how many were asked for (more than len(sources) with allow_fewer)
    parameters: int  # the model's parameter count


def average_run(model_dir, last: int | None = None, out=None,
                allow_fewer: bool = False, tail_only: bool = False) -> AveragedCheckpoint:
    """Average the last `last` checkpoints of a training run (what the paper evaluates).

    Args:
      model_dir: the run's directory (its run_config.json rebuilds the model).
      last: how many of the newest checkpoints (default: the run's training.average_last).
      out: checkpoint prefix to write (default MDIR/averaged/ckpt).
      allow_fewer: with fewer than `last` checkpoints, average those (the result's
        `requested` tells) instead of raising ValueError.
      tail_only: candidates only from the final part of training (`tail_checkpoints`).
    """
    run = model_dir_lib.read_run_config(model_dir)
    last = last or run.training.average_last
    available = list_checkpoints(model_dir)
    if tail_only:
        available = tail_checkpoints(available, last)
    if not available:
        raise ValueError(f"{model_dir} has no checkpoints to average")
    if len(available) < last and not allow_fewer:
        names = ", ".join(pathlib.Path(p).name for p in available)
        raise ValueError(f"{model_dir} has {len(available)} checkpoint(s) ({names}), fewer "
                         f"than --last {last}")
    selected = available[-last:]
    model = build_model(run.family, run.model)
    path = average_checkpoints(model, selected, out or model_dir_lib.averaged_prefix(model_dir))
    return AveragedCheckpoint(path=path, sources=selected, requested=last,
                              parameters=model.count_params())


def load_weights(model, checkpoint_path) -> None:
    """Load model weights from a training or averaged checkpoint (optimizer state ignored)."""
    tf.train.Checkpoint(model=model).read(str(checkpoint_path)).expect_partial() \
        .assert_existing_objects_matched()
