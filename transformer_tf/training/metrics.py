"""Padding-aware token metrics that accumulate sums and counts.

The metrics take per-batch *sums* over real (non-pad) target tokens and the number of real
tokens, e.g. the fields of `transformer_tf.training.losses.token_loss_sums`, never
per-batch means. Their state variables are created with `aggregation="sum"`, so under
`tf.distribute` each replica adds its own sums and `result()` reads the totals over all
replicas: the result is the ratio of global sums (a token-weighted mean), not a mean of
per-replica or per-batch means.

    TokenMean:     result = total / count
    TokenAccuracy: result = correct_tokens / real_tokens
    Perplexity:    result = exp(nll_sum / real_tokens)

All results are 0 (TokenMean, TokenAccuracy) or 1 (Perplexity, exp(0)) before any token has
been counted.
"""
from __future__ import annotations

import keras
from keras import ops

from transformer_tf.config import PAD_ID

__all__ = ["TokenMean", "TokenAccuracy", "Perplexity", "count_correct_tokens"]


def count_correct_tokens(labels, logits, pad_id: int = PAD_ID):
    """(correct_count, token_count) over real tokens, both float32 scalars.

    Args:
      labels: int tensor [B, T]; positions equal to `pad_id` are ignored.
      logits: float tensor [B, T, V] (or probabilities: only the argmax matters).
      pad_id: the padding id.
    """
    mask = ops.cast(ops.not_equal(labels, pad_id), "float32")               # (B, T)
    predictions = ops.argmax(logits, axis=-1)                                 # (B, T)
    correct = ops.cast(ops.equal(predictions, ops.cast(labels, predictions.dtype)), "float32")
    return ops.sum(correct * mask), ops.sum(mask)


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
    Use `count_correct_tokens(labels, logits)` or `token_loss_sums(...)` to get them.
    """

    def __init__(self, name: str = "token_accuracy", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def update_state(self, correct_count, token_count):
        super().update_state(correct_count, token_count)


@keras.saving.register_keras_serializable(package="transformer_tf")
class Perplexity(TokenMean):
    """exp(mean negative log-likelihood per real target token), NLL in nats.

    Call arguments (`update_state`):
      nll_sum: sum over real tokens of -log p(label) (label smoothing NOT included).
      token_count: number of real tokens in the batch.
    """

    def __init__(self, name: str = "perplexity", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def update_state(self, nll_sum, token_count):
        super().update_state(nll_sum, token_count)

    def result(self):
        # perplexity = exp(sum(-log p(y)) / N)
        return ops.exp(self._mean())
