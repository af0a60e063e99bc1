"""Learning rate shrunk when the development loss stops improving (ConvS2S's schedule)."""
from __future__ import annotations

import logging
import math

import keras
import numpy as np
import tensorflow as tf

logger = logging.getLogger(__name__)

MONITOR = "val_nll"  # the dev-set per-token NLL: log perplexity, as ConvS2S monitors


class ShrinkOnPlateau(keras.callbacks.Callback):
    """After each validation ("epoch" end): if `val_nll` did not improve on the best seen,
    multiply the optimizer's learning rate by `shrink`; once it falls below `min_rate`,
    stop training (the run is finished, as in fairseq's `--min-lr`).

    The best loss lives in `best` (a variable the training checkpoints save) and the
    learning rate in the optimizer's own checkpointed variable, so a resumed run keeps
    its place in the schedule.

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

    def on_epoch_end(self, epoch, logs=None):
        loss = (logs or {}).get(MONITOR)
        if loss is None:
            return
        # Multi-worker logs have shape [1]; compare in the float32 that `best` stores.
        loss = float(np.asarray(loss, np.float32).reshape(-1)[0])
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
