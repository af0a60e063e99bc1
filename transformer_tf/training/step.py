"""`train_step` / `test_step` for sequence-to-sequence models trained with `model.fit`.

The loss of a step is the label-smoothed cross-entropy summed over the real target
tokens of this replica's share of the batch, divided by the number of real target tokens
of the *global* batch (an all-reduce over replicas and workers). Keras' optimizer sums the
replicas' gradients, so the update is the gradient of the global per-token mean whatever
the number of replicas: not a mean of per-replica means, not diluted by padding.

Metrics (loss, nll, token accuracy, target token count) accumulate sums and counts in
sum-aggregated variables, so their results are global token-weighted means; the logged
perplexity is exp(nll), derived rather than accumulated a second time. Inside a step
(replica context) such a variable reads as this replica's share only, and Keras averages
the logs the replicas return: the logs would be a mean of per-replica means. So the step
all-reduces the accumulators and returns the global results.
"""
from __future__ import annotations

import keras
import tensorflow as tf

from transformer_tf.training import keras_workarounds
from transformer_tf.training.losses import token_loss_sums
from transformer_tf.training.metrics import TokenAccuracy, TokenMean


def _global_sum(value):
    """Sum of `value` over all replicas (identity outside a distribution strategy)."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


class Seq2SeqTrainingMixin(keras_workarounds.MultiWorkerFitMixin):
    """Adds the paper's training objective to a keras.Model taking (source, target_input).

    The model must define `self.config.label_smoothing` and call `_create_token_metrics()`
    in its constructor (so the metric variables are created under the strategy scope).
    Data: ((source_ids [B, S], target_input_ids [B, T]), labels [B, T]), PAD_ID-padded.
    """

    def _create_token_metrics(self):
        self.loss_metric = TokenMean(name="loss")
        self.nll_metric = TokenMean(name="nll")
        self.accuracy_metric = TokenAccuracy(name="token_accuracy")
        self.token_count_metric = keras.metrics.Sum(name="target_tokens")

    @property
    def metrics(self):
        return [self.loss_metric, self.nll_metric, self.accuracy_metric,
                self.token_count_metric]

    def _forward_and_sums(self, data, training):
        inputs, labels = data[0], data[1]
        logits = self(inputs, training=training)
        return token_loss_sums(labels, logits, self.config.label_smoothing)

    def _update_metrics(self, sums):
        self.loss_metric.update_state(sums.loss_sum, sums.token_count)
        self.nll_metric.update_state(sums.nll_sum, sums.token_count)
        self.accuracy_metric.update_state(sums.correct_count, sums.token_count)
        self.token_count_metric.update_state(sums.token_count)
        return self.shape_logs_for_strategy(self._global_metric_results())

    def _global_metric_results(self):
        """The metrics' results over all replicas, from inside a step (see module doc),
        plus perplexity = exp(nll)."""
        means = [self.loss_metric, self.nll_metric, self.accuracy_metric]
        counter = self.token_count_metric.variables[0]
        local = tf.stack([tf.convert_to_tensor(v) for m in means for v in (m.total, m.count)]
                         + [tf.convert_to_tensor(counter)])
        totals = tf.unstack(_global_sum(local))
        results = {m.name: tf.math.divide_no_nan(totals[2 * i], totals[2 * i + 1])
                   for i, m in enumerate(means)}
        results[self.token_count_metric.name] = totals[-1]
        results["perplexity"] = tf.exp(results[self.nll_metric.name])
        return results

    def train_step(self, data):
        with tf.GradientTape() as tape:
            sums = self._forward_and_sums(data, training=True)
            global_tokens = _global_sum(sums.token_count)
            loss = sums.loss_sum / tf.maximum(global_tokens, 1.0)
            scaled_loss = self.optimizer.scale_loss(loss)  # loss scaling under mixed_float16
        gradients = tape.gradient(scaled_loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(gradients, self.trainable_variables))
        return self._update_metrics(sums)

    def test_step(self, data):
        return self._update_metrics(self._forward_and_sums(data, training=False))
