"""Checkpoint averaging (the paper's section 6.1): which checkpoints of a run are fit to
average, and writing their element-wise mean.

A run's candidates are its readable training checkpoints and its best checkpoint by dev
BLEU (MDIR/checkpoints/best/, rundir/best_checkpoint.py), which the rolling window may no
longer hold (`candidate_checkpoints`).

    MDIR/averaged/ckpt   the average `average_run` writes by default (`average_into_run`
                         also records it as the run's choice, rundir/model_dir.py)
"""
from __future__ import annotations

import dataclasses
import pathlib

import numpy as np
import tensorflow as tf

from transformer_tf.models.registry import build_model
from transformer_tf.rundir import checkpoints
from transformer_tf.rundir import model_dir as model_dir_lib
from transformer_tf.rundir.best_checkpoint import read_best

# Averaging candidates come from the final part of training only: the last TAIL_FRACTION of
# the run's steps (the paper averages the last ~7% of a 12-hour run; a short run changes
# faster, so its tail is wider). Saves closer than MIN_GAP_FRACTION of the run apart (an
# end-of-training save a step after a periodic one) are the same point: the later counts.
TAIL_FRACTION = 0.2
MIN_GAP_FRACTION = 0.01


def candidate_checkpoints(model_dir) -> list[str]:
    """The checkpoints of MDIR fit to average, oldest first: the readable training
    checkpoints, and the best checkpoint (when readable and no training checkpoint has
    its step: the weights would be the same)."""
    found = checkpoints.readable_checkpoints(checkpoints.list_checkpoints(model_dir))
    best = read_best(model_dir)
    if best is not None and best.step not in {checkpoints.checkpoint_step(p) for p in found}:
        found += checkpoints.readable_checkpoints([best.checkpoint])
    return sorted(found, key=checkpoints.checkpoint_step)


def tail_checkpoints(paths: list[str], last: int) -> list[str]:
    """Up to `last` of `paths` (oldest first) fit for averaging: from the final
    TAIL_FRACTION of the steps, near-duplicate saves counted once; oldest first."""
    if not paths:
        return []
    final = checkpoints.checkpoint_step(paths[-1])
    in_tail = [p for p in paths if checkpoints.checkpoint_step(p) >= (1.0 - TAIL_FRACTION) * final]
    min_gap = MIN_GAP_FRACTION * final
    distinct = [p for p, later in zip(in_tail, in_tail[1:] + [None])
                if later is None or checkpoints.checkpoint_step(later) - checkpoints.checkpoint_step(p) >= min_gap]
    return distinct[-last:]


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
    for path in checkpoint_paths:
        checkpoints.check_readable(path)
    sums = [np.zeros(w.shape, np.float64) for w in model.weights]
    checkpoint = tf.train.Checkpoint(model=model)
    for path in checkpoint_paths:
        checkpoints.load_weights(model, path)
        for total, weight in zip(sums, model.weights):
            total += weight.numpy()
    for total, weight in zip(sums, model.weights):
        weight.assign(tf.cast(total / len(checkpoint_paths), weight.dtype))
    checkpoints.refresh_inference_weights(model)
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
      last: how many of the newest checkpoints (`candidate_checkpoints`; default: the
        run's training.average_last).
      out: checkpoint prefix to write (default MDIR/averaged/ckpt, which a new average
        replaces). A prefix of its own must be new, and outside MDIR/checkpoints/ (the
        training checkpoints, which a resumed run reads): else ValueError, before anything
        is read or written.
      allow_fewer: with fewer than `last` checkpoints, average those (the result's
        `requested` tells) instead of raising ValueError.
      tail_only: candidates only from the final part of training (`tail_checkpoints`).

    Holds the run's lock (`model_dir.hold_existing_run`): a run being trained is not averaged.
    """
    with model_dir_lib.hold_existing_run(model_dir):
        return _average_run(model_dir, last, out, allow_fewer, tail_only)


def _check_output_prefix(model_dir, out) -> None:
    """Refuses (ValueError) an averaged checkpoint's own `out` prefix that would replace
    a checkpoint, or write among the run's training checkpoints."""
    prefix = pathlib.Path(out).resolve()
    training = checkpoints.checkpoint_dir(model_dir).resolve()
    if prefix.is_relative_to(training):
        raise ValueError(f"--out {out}: inside {checkpoints.checkpoint_dir(model_dir)}, the "
                         "run's training checkpoints (a resumed run reads them); write the "
                         "average elsewhere, e.g. the default MDIR/averaged/ckpt")
    existing = checkpoints.checkpoint_files(prefix)
    if existing:
        raise ValueError(f"--out {out}: a checkpoint already exists there "
                         f"({pathlib.Path(existing[0]).name}); it was left as it is. Choose "
                         "a new prefix")


def _average_run(model_dir, last, out, allow_fewer, tail_only) -> AveragedCheckpoint:
    if out is not None and pathlib.Path(out).resolve() != pathlib.Path(
            model_dir_lib.averaged_prefix(model_dir)).resolve():
        _check_output_prefix(model_dir, out)
    run = model_dir_lib.read_run_config(model_dir)
    last = last or run.training.average_last
    available = candidate_checkpoints(model_dir)
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


def average_into_run(model_dir, last: int | None = None,
                     allow_fewer: bool = False) -> AveragedCheckpoint:
    """`average_run` into MDIR/averaged/, recorded as the run's choice
    (`model_dir.write_chosen`): averaging on request is the user's choice, so export and
    translate use the average until the run trains on or another choice is made."""
    with model_dir_lib.hold_existing_run(model_dir):
        averaged = average_run(model_dir, last, allow_fewer=allow_fewer)
        names = ", ".join(pathlib.Path(p).name for p in averaged.sources)
        model_dir_lib.write_chosen(model_dir, model_dir_lib.ChosenCheckpoint(
            checkpoint=averaged.path, name="averaged",
            reason=f"the average of {names}, made on request (no dev-set choice)",
            newest_step=checkpoints.checkpoint_step(checkpoints.newest_readable(model_dir))))
    return averaged
