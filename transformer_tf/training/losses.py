"""Label-smoothed cross-entropy summed over real target tokens (paper section 5.4).

Every function here returns *sums* and a *count of real tokens*, never a mean: under
`tf.distribute` each replica computes its own sums, and the train step divides the summed
loss by the GLOBAL number of real target tokens (all-reduced across replicas). A mean of
per-replica means, or a mean over padded positions, gives a different (wrong) gradient.

Conventions
-----------
* Padding: positions whose label is `pad_id` (PAD_ID = 0) contribute nothing to any sum and
  are not counted. Masks are explicit; Keras `_keras_mask`s are ignored.
* Label smoothing (tensor2tensor convention, the code behind the paper's numbers): with
  vocabulary size V and smoothing eps, the target distribution for a label y is

      q(v) = 1 - eps            if v == y
      q(v) = eps / (V - 1)      otherwise, for every other id -- the pad id included.

  The pad id receives its eps/(V-1) share like any other token. That is what tensor2tensor
  and fairseq do, it keeps q a simple function of (y, eps, V), and its effect is negligible
  (eps/(V-1) ~ 3e-6 for V = 37000): the model learns to give padding a tiny probability,
  which costs nothing because padding is never decoded. (The Annotated Transformer instead
  zeroes q(pad) and spreads eps over V - 2 tokens.)
* The value is the cross-entropy H(q, p) = -sum_v q(v) log p(v), not the KL divergence
  KL(q || p) = H(q, p) - H(q) that tensor2tensor reports; they differ by the constant H(q)
  (see `label_smoothing_entropy`), and have the same gradient. With eps = 0 it is the
  ordinary negative log-likelihood.
* Computation is in float32 whatever the logits' dtype (float16 / bfloat16 under mixed
  precision): logits are cast before the log-softmax.
* Pooled ids (`pooled`, optional): a set of ids scored as ONE class, "any of them", with
  log-probability log sum_{v pooled} p(v); every other id stays its own class, and label
  smoothing spreads eps over the C = V - |pooled| + 1 classes (eps / (C - 1) each). The
  parsing task with `words` leaves pools the word pieces (`TrainingConfig.word_loss`):
  the grammar copies the words from the source and scores each copied piece as any word
  (`decoding.constraints.CopyBracketGrammar`), so this is the loss of exactly what the
  search decides, where the words and brackets go; which word comes is not learnt.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from transformer_tf.config import PAD_ID

__all__ = [
    "TokenLossSums",
    "label_smoothed_cross_entropy",
    "negative_log_likelihood",
    "token_loss_sums",
    "label_smoothing_entropy",
    "pool_classes",
]


class TokenLossSums(NamedTuple):
    """Per-batch sums over real (non-pad) target tokens; all float32 scalars.

    Attributes:
      loss_sum: sum of the label-smoothed cross-entropy, in nats.
      nll_sum: sum of -log p(label), in nats (perplexity = exp(nll_sum / token_count)).
      correct_count: number of real tokens whose argmax prediction equals the label.
      token_count: number of real tokens (labels != pad_id).
    """

    loss_sum: tf.Tensor
    nll_sum: tf.Tensor
    correct_count: tf.Tensor
    token_count: tf.Tensor


def _check_labels(labels):
    labels = tf.convert_to_tensor(labels)
    if not labels.dtype.is_integer:
        raise TypeError(f"labels must be integer ids, got dtype {labels.dtype.name}")
    return tf.cast(labels, tf.int32)


def _token_terms(labels, logits, label_smoothing):
    """Per-position terms from one log-softmax, with a hand-written gradient.

    Args:
      labels: int32 [B, T]; logits: float [B, T, V] (cast to float32 here).

    Returns:
      (H(q, p) [B, T], log p(label) [B, T], argmax prediction int32 [B, T]), float32;
      padding not yet masked.

    H(q, p) = -[(1 - eps) log p(y) + eps/(V-1) * sum_{v != y} log p(v)]
            = -[a log p(y) + o * sum_v log p(v)],  o = eps/(V-1), a = 1 - eps - o,
    and with p = softmax(z) its gradient is dH/dz = p - o - a * onehot(y) (a + o V = 1),
    d log p(y)/dz = onehot(y) - p. Written out, the backward pass is one exp and one
    multiply over [B*T, V] plus a scatter of B*T values. With TF's own gradients of the
    log-softmax, the one-hot product and the sum, the loss's forward and backward take
    about half as long again at the base shape.
    """
    logits = tf.cast(logits, tf.float32)
    vocab_size = tf.shape(logits)[-1]
    flat_labels = tf.reshape(labels, [-1])
    off = tf.cast(label_smoothing, tf.float32) / tf.cast(vocab_size - 1, tf.float32)
    on = 1.0 - label_smoothing - off  # `a` above

    @tf.custom_gradient
    def terms(flat_logits):  # (N, V)
        log_probs = tf.nn.log_softmax(flat_logits, axis=-1)
        label_log_probs = tf.gather(log_probs, flat_labels, batch_dims=1)  # (N,)
        losses = -(on * label_log_probs + off * tf.reduce_sum(log_probs, axis=-1))

        def grad(d_losses, d_label_log_probs):
            # p * (dH - dL) - o * dH + onehot(y) * (dL - a * dH), row by row.
            rows = tf.exp(log_probs) * (d_losses - d_label_log_probs)[:, None]
            rows -= (off * d_losses)[:, None]
            at_labels = tf.stack([tf.range(tf.shape(flat_labels)[0]), flat_labels], axis=1)
            return tf.tensor_scatter_nd_add(
                rows, at_labels, d_label_log_probs - on * d_losses)

        return (losses, label_log_probs), grad

    flat_logits = tf.reshape(logits, [-1, vocab_size])
    flat_losses, flat_label_log_probs = terms(flat_logits)
    predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
    shape = tf.shape(labels)
    return tf.reshape(flat_losses, shape), tf.reshape(flat_label_log_probs, shape), predictions


def _real_token_mask(labels, pad_id):
    return tf.cast(tf.not_equal(labels, pad_id), tf.float32)  # (B, T)


def _check_smoothing(label_smoothing):
    if not 0.0 <= float(label_smoothing) < 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")


def label_smoothed_cross_entropy(labels, logits, label_smoothing: float = 0.1,
                                 pad_id: int = PAD_ID):
    """Summed label-smoothed cross-entropy over real target tokens.

    Args:
      labels: int tensor [B, T], target ids; `pad_id` marks padding.
      logits: float tensor [B, T, V] (any float dtype; computed in float32).
      label_smoothing: eps in [0, 1); q = 1 - eps on the label, eps/(V-1) on each other id.
      pad_id: the padding id (positions with this label are ignored).

    Returns:
      (loss_sum, token_count): float32 scalars; loss_sum in nats, summed over real tokens;
      token_count = number of labels != pad_id. The mean loss is
      loss_sum / token_count with the count summed over ALL replicas.
    """
    sums = token_loss_sums(labels, logits, label_smoothing, pad_id)
    return sums.loss_sum, sums.token_count


def negative_log_likelihood(labels, logits, pad_id: int = PAD_ID):
    """Summed -log p(label) over real target tokens (for perplexity).

    Args:
      labels: int tensor [B, T]; logits: float tensor [B, T, V]; pad_id: padding id.

    Returns:
      (nll_sum, token_count): float32 scalars; perplexity = exp(nll_sum / token_count).
    """
    return label_smoothed_cross_entropy(labels, logits, 0.0, pad_id)


def pool_classes(labels, logits, pooled):
    """Labels and logits over the classes of `pooled` (module doc): the ids outside it in
    order, then one class for all of it.

    Args:
      labels: int32 [B, T]; logits: float [B, T, V].
      pooled: bool [V], concrete (a NumPy array or an eager tensor: the class layout is
        fixed when the step is traced, so XLA sees static shapes); at least one True, and
        the pad id outside it, so that padding stays recognisable.

    Returns:
      (labels int32 [B, T], logits float32 [B, T, C]), C = V - |pooled| + 1; the class
      logits' log-softmax is log p(v) for a kept id and log sum_{v pooled} p(v) for the
      pooled class, p = softmax(logits). A pad label maps to the pad id's class.
    """
    pooled = np.asarray(pooled, bool)
    kept_ids = np.flatnonzero(~pooled).astype(np.int32)  # [C - 1]
    # Class of each id: its rank among the kept ids, or C - 1 for a pooled id.
    class_of_id = np.where(pooled, len(kept_ids), np.cumsum(~pooled) - 1).astype(np.int32)
    logits = tf.cast(logits, tf.float32)
    kept = tf.gather(logits, kept_ids, axis=-1)  # [B, T, C - 1]
    any_pooled = tf.reduce_logsumexp(
        tf.where(pooled, logits, float("-inf")), axis=-1, keepdims=True)  # [B, T, 1]
    return tf.gather(class_of_id, labels), tf.concat([kept, any_pooled], axis=-1)


def token_loss_sums(labels, logits, label_smoothing: float = 0.1,
                    pad_id: int = PAD_ID, pooled=None) -> TokenLossSums:
    """Everything a train/test step needs from one log-softmax: loss, NLL, accuracy counts.

    Args:
      labels: int tensor [B, T]; `pad_id` marks padding.
      logits: float tensor [B, T, V] (computed in float32).
      label_smoothing: eps, as in `label_smoothed_cross_entropy`.
      pad_id: padding id.
      pooled: None, or bool [V], concrete: ids scored as one class (module doc;
        `pool_classes`); then nll is -log of the class's probability and a prediction is
        correct when the argmax class is the label's.

    Returns:
      A `TokenLossSums` of float32 scalars (sums over real tokens and their count).
    """
    _check_smoothing(label_smoothing)
    labels = _check_labels(labels)
    mask = _real_token_mask(labels, pad_id)
    if pooled is not None:
        labels, logits = pool_classes(labels, logits, pooled)
    losses, label_log_probs, predictions = _token_terms(labels, logits, label_smoothing)
    correct = tf.cast(tf.equal(predictions, labels), tf.float32)
    return TokenLossSums(
        loss_sum=tf.reduce_sum(losses * mask),
        nll_sum=tf.reduce_sum(-label_log_probs * mask),
        correct_count=tf.reduce_sum(correct * mask),
        token_count=tf.reduce_sum(mask),
    )


def label_smoothing_entropy(label_smoothing: float, vocab_size: int) -> float:
    """H(q) in nats: the smallest possible per-token label-smoothed cross-entropy.

    H(q) = -(1 - eps) log(1 - eps) - eps log(eps / (V - 1))
    Subtract it from the mean loss to get tensor2tensor's KL-style value (minimum 0).
    """
    eps = float(label_smoothing)
    _check_smoothing(eps)
    if eps == 0.0:
        return 0.0
    return -(1.0 - eps) * math.log(1.0 - eps) - eps * math.log(eps / (vocab_size - 1))
