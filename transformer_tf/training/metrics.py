"""Padding-aware token metrics that accumulate sums and counts.

The metrics take per-batch *sums* over real (non-pad) target tokens and the number of real
tokens, e.g. the fields of `transformer_tf.training.losses.token_loss_sums`, never
per-batch means. Their state variables are created with `aggregation="sum"`, so under
`tf.distribute` each replica adds its own sums and `result()` reads the totals over all
replicas: the result is the ratio of global sums (a token-weighted mean), not a mean of
per-replica or per-batch means.

    TokenMean:     result = total / count
    TokenAccuracy: result = correct_tokens / real_tokens

Both are 0 before any token has been counted. (Perplexity is exp of the nll TokenMean; the
train step derives it, see training/trainer.py.)
"""
from __future__ import annotations

import keras
from keras import ops

__all__ = ["TokenMean", "TokenAccuracy"]


@keras.saving.register_keras_serializable(package="transformer_tf")
class TokenMean(keras.metrics.Metric):
    """Token-weighted mean: accumulates (sum, count) pairs; result = sum_total / count_total.

    Args:
      name: metric name.
      dtype: dtype of the accumulators and result (default float32).

    Call arguments (`update_state`):
      total: scalar (or any-shape tensor, summed), the per-batch sum over real tokens.
      count: scalar (or any-shape tensor, summed), the number of real tokens it covers.

    Example:
    ```python
    loss_metric = TokenMean(name="loss")
    sums = token_loss_sums(labels, logits, 0.1)
    loss_metric.update_state(sums.loss_sum, sums.token_count)
    loss_metric.result()  # per-token label-smoothed loss so far
    ```
    """

    def __init__(self, name: str = "token_mean", dtype=None):
        super().__init__(name=name, dtype=dtype or "float32")
        self.total = self.add_variable(shape=(), initializer="zeros", dtype=self.dtype,
                                       aggregation="sum", name="total")
        self.count = self.add_variable(shape=(), initializer="zeros", dtype=self.dtype,
                                       aggregation="sum", name="count")

    def update_state(self, total, count):
        self.total.assign_add(ops.sum(ops.cast(total, self.dtype)))
        self.count.assign_add(ops.sum(ops.cast(count, self.dtype)))

    def _mean(self):
        return ops.divide_no_nan(self.total, self.count)

    def result(self):
        return self._mean()

    def get_config(self) -> dict:
        return {"name": self.name, "dtype": self.dtype}


@keras.saving.register_keras_serializable(package="transformer_tf")
class TokenAccuracy(TokenMean):
    """Fraction of real (non-pad) target tokens predicted correctly (argmax == label).

    Call arguments (`update_state`):
      correct_count: number of correctly predicted real tokens in the batch.
      token_count: number of real tokens in the batch.
    `token_loss_sums(...)` gives them.
    """

    def __init__(self, name: str = "token_accuracy", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def update_state(self, correct_count, token_count):
        super().update_state(correct_count, token_count)
