"""Keep the best, stop when done: after each validation, the evaluation goes into the run's
validation log, the best weights by dev BLEU into MDIR/checkpoints/best/, and early
stopping ends a run whose dev BLEU has stopped improving.

Keras' own `EarlyStopping` and `ModelCheckpoint(save_best_only=True)` do not fit: their
state (the best score, the evaluations waited) is lost when a killed run resumes, their
checkpoint would sit in the rolling window's directory, and under a multi-worker strategy
only the chief computes dev BLEU, while every worker must stop at the same step.
"""
from __future__ import annotations

import logging
import pathlib

import keras
import numpy as np

from transformer_tf.rundir import checkpoints
from transformer_tf.rundir.best_checkpoint import BestCheckpoint, read_best, save_best
from transformer_tf.rundir.validation_log import (
    ValidationRecord,
    append_validation,
    read_validation_log,
)
from transformer_tf.training.callbacks import any_worker

logger = logging.getLogger(__name__)


def is_better(bleu: float, nll: float, best: BestCheckpoint | None) -> bool:
    """Whether an evaluation (dev BLEU, dev NLL) beats `best`: a higher BLEU, or the same
    BLEU with a lower NLL (None: anything beats no evaluation)."""
    if best is None:
        return True
    return bleu > best.dev_bleu or (bleu == best.dev_bleu and nll < best.dev_nll)


def _scalar(value) -> float:
    """A log value as a float (multi-worker logs have shape [1])."""
    return float(np.asarray(value, np.float64).reshape(-1)[0])


def _relative(model_dir, prefix) -> str:
    return str(pathlib.Path(prefix).relative_to(pathlib.Path(model_dir)))


class KeepBest(keras.callbacks.Callback):
    """After each validation that has a dev BLEU (`val_bleu` in the logs, put there by
    `validation.ValidationTranslations`, which must come before this callback) and a dev
    NLL (`val_nll`): appends the evaluation to MDIR/validation.jsonl and, when it beats the
    best so far (`is_better`), saves the network's weights as the run's best checkpoint
    (MDIR/checkpoints/best/, out of the rolling window).

    The dev-set choice after training (inference/selection.py) also weighs a BLEU lead
    against the dev set's noise; here every lead counts, and early stopping's patience
    absorbs the noise.

    State survives a resume: the best so far is read back from best.json, and the
    evaluations since it from the validation log (its lines after the best's).

    Args:
      network: the model whose weights are kept (`trainer.network`).
      model_dir: the run directory (only the chief, holding its lock, writes).
      run_seconds: () -> the run's training time so far in seconds
        (`callbacks.PeriodicCheckpoint.run_seconds`).

    Attributes:
      best: the best evaluation so far (a `BestCheckpoint`), or None.
      evaluations_since_best: evaluations since the best one (0 right after a new best).
    """

    def __init__(self, network, model_dir, run_seconds):
        super().__init__()
        self.network = network
        self.model_dir = pathlib.Path(model_dir)
        self.run_seconds = run_seconds
        self.best = read_best(self.model_dir)
        self.evaluations_since_best = self._evaluations_since(self.best)

    def _evaluations_since(self, best: BestCheckpoint | None) -> int:
        records = read_validation_log(self.model_dir)
        if best is None:
            return len(records)
        name = _relative(self.model_dir, best.checkpoint)
        for index in range(len(records) - 1, -1, -1):
            if records[index].checkpoint == name:
                return len(records) - 1 - index
        return 0  # the log does not have the best's line (deleted?): count from now

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if "val_bleu" not in logs or "val_nll" not in logs:
            return
        bleu, nll = _scalar(logs["val_bleu"]), _scalar(logs["val_nll"])
        step = int(self.model.optimizer.iterations.numpy())
        seconds = self.run_seconds()
        if is_better(bleu, nll, self.best):
            self.best = save_best(self.network, self.model_dir, step, bleu, nll, seconds)
            self.evaluations_since_best = 0
            checkpoint = _relative(self.model_dir, self.best.checkpoint)
            logger.info("step %d: dev BLEU %.2f, the best so far: saved %s", step, bleu,
                        checkpoint)
        else:
            self.evaluations_since_best += 1
            rolling = checkpoints.checkpoint_dir(self.model_dir) / f"ckpt-{step}"
            checkpoint = (_relative(self.model_dir, rolling)
                          if pathlib.Path(f"{rolling}.index").exists() else None)
            logger.info("step %d: dev BLEU %.2f, not better than %.2f at step %d (%d "
                        "evaluation(s) without a new best)", step, bleu, self.best.dev_bleu,
                        self.best.step, self.evaluations_since_best)
        append_validation(self.model_dir, ValidationRecord(
            step=step, trained_seconds=round(seconds, 3), dev_bleu=bleu, dev_nll=nll,
            checkpoint=checkpoint))


class EarlyStopping(keras.callbacks.Callback):
    """Ends training after a validation once `keep_best` has seen `patience` evaluations
    in a row without a new best (put it after `keep_best`).

    Args:
      patience: evaluations without improvement that end the run (>= 1).
      keep_best: the run's `KeepBest`; None on workers that do not validate (a
        multi-worker run's non-chief workers), which follow the chief.
      strategy: a multi-worker strategy, or None. With one, every worker asks every
        other after each validation (`callbacks.any_worker`), so all stop at the same step.

    Attributes:
      stopped_at_step: the step where it stopped training (None: it did not).
      reason: why, in one line ("" until it stops).
    """

    def __init__(self, patience: int, keep_best: KeepBest | None, strategy=None):
        super().__init__()
        if patience < 1:
            raise ValueError(f"early stopping patience must be at least 1, got {patience}")
        self.patience = patience
        self.keep_best = keep_best
        self.strategy = strategy
        self.stopped_at_step = None
        self.reason = ""

    def exhausted(self) -> bool:
        """Whether the patience has run out (on any worker: a collective call with a
        strategy, so every worker must make it at the same point)."""
        waited = self.keep_best is not None and \
            self.keep_best.evaluations_since_best >= self.patience
        if self.strategy is not None:
            waited = any_worker(self.strategy, waited)
        if waited and not self.reason:
            best = self.keep_best.best if self.keep_best is not None else None
            self.reason = (f"early stopping: dev BLEU has not improved for {self.patience} "
                           "evaluation(s)" + (f" (best {best.dev_bleu:.2f} at step {best.step})"
                                              if best is not None else ""))
        return waited

    def on_epoch_end(self, epoch, logs=None):
        if self.exhausted():
            self.stopped_at_step = int(self.model.optimizer.iterations.numpy())
            self.model.stop_training = True
            logger.info("%s; stopping at step %d", self.reason, self.stopped_at_step)
