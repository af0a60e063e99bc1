"""`Seq2SeqTrainer`: what `model.fit` drives — a sequence-to-sequence model (any family of
the contract in transformer_tf.models.contract) plus the paper's training objective.

The loss of a step is the label-smoothed cross-entropy summed over the real target
tokens of this replica's share of the batch, divided by the number of real target tokens
of the *global* batch (an all-reduce over replicas and workers; with gradient accumulation,
of all the micro-batches of the update, see training/accumulation.py). Keras' optimizer sums
the replicas' gradients, so the update is the gradient of the global per-token mean
whatever the number of replicas: not a mean of per-replica means, not diluted by padding.

Metrics (loss, nll, token accuracy, target token count) accumulate sums and counts in
sum-aggregated variables, so their results are global token-weighted means; the logged
perplexity is exp(nll), derived rather than accumulated a second time. Inside a step
(replica context) such a variable reads as this replica's share only, and Keras averages
the logs the replicas return: the logs would be a mean of per-replica means. So the step
all-reduces the accumulators and returns the global results.

Checkpoints hold the wrapped model (`trainer.network`) under the name "model", so their
layout is the model's own and inference never needs the trainer.
"""
from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from transformer_tf.training import multi_worker_fit
from transformer_tf.training.accumulation import real_token_count
from transformer_tf.training.losses import token_loss_sums
from transformer_tf.training.metrics import TokenAccuracy, TokenMean


def _global_sum(value):
    """Sum of `value` over all replicas (identity outside a distribution strategy)."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


class Seq2SeqTrainer(multi_worker_fit.MultiWorkerFitMixin, keras.Model):
    """Trains `network` with the label-smoothed cross-entropy over real target tokens.

    Args:
      network: a `Seq2SeqModel` (built or not).
      label_smoothing: eps_ls in [0, 1).
      accumulation_steps: k, micro-batches per update (1: none); with k > 1 each training
        element is a tuple of k batches (`accumulation.pack_micro_batches`).
      pooled_ids: None, or bool [V]: target ids the loss scores as one class
        (`losses.pool_classes`; the parsing task's word pieces, `TrainingConfig.word_loss`).

    Data: ((source_ids [B, S], target_input_ids [B, T]), labels [B, T]), PAD_ID-padded
    (training with accumulation: a tuple of k of them). Create it under the strategy's
    scope (metric variables).
    """

    def __init__(self, network, label_smoothing: float = 0.1, accumulation_steps: int = 1,
                 pooled_ids=None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= float(label_smoothing) < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
        self.network = network
        self.label_smoothing = float(label_smoothing)
        self.accumulation_steps = int(accumulation_steps)
        self.pooled_ids = None if pooled_ids is None else np.asarray(pooled_ids, bool)
        self.loss_metric = TokenMean(name="loss")
        self.nll_metric = TokenMean(name="nll")
        self.accuracy_metric = TokenAccuracy(name="token_accuracy")
        self.token_count_metric = keras.metrics.Sum(name="target_tokens")

    def build(self, input_shape=None):
        if not self.network.built:
            self.network.build()
        self.built = True

    def call(self, inputs, training=None):
        return self.network(inputs, training=training)

    @property
    def metrics(self):
        return [self.loss_metric, self.nll_metric, self.accuracy_metric,
                self.token_count_metric]

    def _forward_and_sums(self, data, training):
        inputs, labels = data[0], data[1]
        logits = self.network(inputs, training=training)
        return token_loss_sums(labels, logits, self.label_smoothing, pooled=self.pooled_ids)

    def loss_sums(self, data):
        """`TokenLossSums` of one batch in inference mode, touching no metric (for
        evaluations outside Keras' own, e.g. `plateau.mean_dev_nll`)."""
        return self._forward_and_sums(data, training=False)

    def _accumulate_metrics(self, sums):
        self.loss_metric.update_state(sums.loss_sum, sums.token_count)
        self.nll_metric.update_state(sums.nll_sum, sums.token_count)
        self.accuracy_metric.update_state(sums.correct_count, sums.token_count)
        self.token_count_metric.update_state(sums.token_count)

    def _logs(self):
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
        micro_batches = data if self.accumulation_steps > 1 else (data,)
        if len(micro_batches) != self.accumulation_steps:
            raise ValueError(f"expected {self.accumulation_steps} micro-batches per step "
                             f"(accumulation.pack_micro_batches), got {len(micro_batches)}")
        # Real target tokens of the whole update, over all replicas: every micro-batch's
        # loss sum is divided by it, so the summed gradients are the per-token mean's.
        global_tokens = tf.maximum(
            _global_sum(tf.add_n([real_token_count(batch[1]) for batch in micro_batches])), 1.0)
        gradients = None
        for batch in micro_batches:
            # One micro-batch at a time: the next forward pass waits for this gradient.
            with tf.control_dependencies([g for g in gradients or [] if g is not None]):
                with tf.GradientTape() as tape:
                    sums = self._forward_and_sums(batch, training=True)
                    # Loss scaling under mixed_float16 (the optimizer unscales the sum).
                    scaled_loss = self.optimizer.scale_loss(sums.loss_sum / global_tokens)
                batch_gradients = tape.gradient(scaled_loss, self.trainable_variables)
            gradients = batch_gradients if gradients is None else [
                part if total is None else total if part is None else total + part
                for total, part in zip(gradients, batch_gradients)]
            self._accumulate_metrics(sums)
        self.optimizer.apply_gradients(zip(gradients, self.trainable_variables))
        return self._logs()  # one all-reduce of the metrics per update

    def test_step(self, data):
        self._accumulate_metrics(self._forward_and_sums(data, training=False))
        return self._logs()
