"""Learning rate shrunk when the development loss stops improving (ConvS2S's schedule)."""
from __future__ import annotations

import logging
import math
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from transformer_tf.training.callbacks import current_step

logger = logging.getLogger(__name__)

MONITOR = "val_nll"  # the dev-set per-token NLL: log perplexity, as ConvS2S monitors


def compiled_loss_sums(trainer):
    """`trainer.loss_sums` as one tf.function for any batch shape (traced without
    AutoGraph: its code has no Python control flow over tensors)."""
    return tf.function(trainer.loss_sums, reduce_retracing=True, autograph=False)


def mean_dev_nll(trainer, dataset: tf.data.Dataset, step_fn=None) -> float:
    """Per-token negative log-likelihood in nats (log perplexity) of `trainer`'s network
    over every batch of `dataset` (((source, target_in), labels), PAD-padded): the sum of
    -log p(label) over real target tokens divided by their count. Reads no metric and
    updates none, so it may run in the middle of a Keras epoch. `step_fn`: a compiled
    `trainer.loss_sums` to reuse (None: compiled here)."""
    step_fn = step_fn or compiled_loss_sums(trainer)
    nll = tokens = 0.0
    for batch in dataset:
        sums = step_fn(batch)
        nll += float(sums.nll_sum)
        tokens += float(sums.token_count)
    return nll / max(tokens, 1.0)


class ShrinkOnPlateau(keras.callbacks.Callback):
    """After each check of the dev loss: if it did not improve on the best seen, multiply
    the optimizer's learning rate by `shrink`; once it falls below `min_rate`, stop
    training (the run is finished, as in fairseq's `--min-lr`).

    When the dev loss is checked:
      * by default after each validation ("epoch" end, every `eval_every` steps), from
        the `val_nll` that `fit` logs;
      * after `check_every_pass(steps_per_pass, dev_nll)`, once per pass over the
        training data, as the ConvS2S paper did ("after each epoch"): at the first step
        >= k * steps_per_pass for k = 1, 2, ..., calling `dev_nll()` (the validations
        then do not count).

    The best loss lives in `best` (a variable the training checkpoints save) and the
    learning rate in the optimizer's own checkpointed variable, so a resumed run keeps
    its place in the schedule; the passes already checked follow from the resumed step.

    Args:
      shrink: factor in (0, 1).
      min_rate: stop when the learning rate is below this.
    """

    def __init__(self, shrink: float, min_rate: float):
        super().__init__()
        self.shrink = shrink
        self.min_rate = min_rate
        self.best = tf.Variable(math.inf, dtype=tf.float32, trainable=False,
                                name="plateau_best_dev_nll")
        self.finished = False
        self.steps_per_pass: float | None = None
        self._dev_nll: Callable[[], float] | None = None
        self._passes_checked = 0

    def check_every_pass(self, steps_per_pass: float, dev_nll: Callable[[], float]) -> None:
        """Check at pass boundaries: `steps_per_pass` optimizer steps per pass over the
        training data (> 0, may be fractional), `dev_nll()` the dev loss in nats/token."""
        if not steps_per_pass > 0:
            raise ValueError(f"steps_per_pass must be positive, got {steps_per_pass!r}")
        self.steps_per_pass, self._dev_nll = float(steps_per_pass), dev_nll

    def _passes_done(self) -> int:
        return math.floor(current_step(self.model) / self.steps_per_pass)

    def on_train_begin(self, logs=None):
        if self.steps_per_pass is not None:
            self._passes_checked = self._passes_done()

    def on_train_batch_end(self, batch, logs=None):
        if self.steps_per_pass is None:
            return
        passes = self._passes_done()
        if passes > self._passes_checked:
            self._passes_checked = passes
            loss = self._dev_nll()
            logger.info("pass %d over the training data ended: dev nll %.4f", passes, loss)
            self.judge(loss)

    def on_epoch_end(self, epoch, logs=None):
        if self.steps_per_pass is not None:
            return
        loss = (logs or {}).get(MONITOR)
        if loss is None:
            return
        # Multi-worker logs have shape [1]; compare in the float32 that `best` stores.
        self.judge(float(np.asarray(loss, np.float32).reshape(-1)[0]))

    def judge(self, loss: float) -> None:
        """Apply the rule to one dev loss (nats per target token)."""
        loss = float(np.float32(loss))
        if loss < float(self.best.numpy()):
            self.best.assign(loss)
            return
        optimizer = self.model.optimizer
        rate = float(keras.ops.convert_to_numpy(optimizer.learning_rate)) * self.shrink
        optimizer.learning_rate = rate
        logger.info("dev nll %.4f did not improve on %.4f: learning rate -> %.3g", loss,
                    float(self.best.numpy()), rate)
        if rate < self.min_rate:
            logger.info("learning rate below %.3g: training finished", self.min_rate)
            self.finished = True
            self.model.stop_training = True
