"""An exact top-k for a few winners out of wide rows: a beam search's k best extensions
among beam x vocabulary scores.

TensorFlow's CPU TopKV2 kernel pushes every element through a heap: for k = 4 out of
4 x 8,000 scores per sentence it costs more per decoding step than the step's
log-softmax. `top_k_by_groups` looks at groups of G neighbouring elements instead:

  1. the maximum of every group (one vectorised reduction over all elements);
  2. the k groups with the largest maxima (top_k over n / G values);
  3. top_k over the k * G elements of those groups, laid out in index order.

Every winner lies in a chosen group: a winner e in an unchosen group would have k chosen
groups ranked before its own, each holding a maximum that ranks before e (larger, or equal
and at a lower index, since groups are contiguous and ties between equal maxima go to the
lower group), so k elements would rank before e. Hence the values and the indices are
those of `tf.math.top_k` exactly, ties included (the lower index first). The add and the
top-k together take several times less; it pays for k = 1 too (greedy search) and under
XLA.
"""
from __future__ import annotations

import math

import tensorflow as tf


def group_size(n: int, k: int) -> int:
    """G for rows of n elements: near sqrt(n / k), which balances the n / G group maxima
    against the k * G candidates, and a divisor of n where one lies within a factor of 2
    of it (no padding); at least 1, and at most n // k so that there are k groups."""
    target = max(math.sqrt(n / k), 1.0)
    divisors = [g for g in range(math.ceil(target / 2), math.floor(target * 2) + 1)
                if n % g == 0]
    size = min(divisors, key=lambda g: abs(g - target)) if divisors else math.ceil(target)
    return max(1, min(size, n // k))


def top_k_by_groups(x: tf.Tensor, k: int) -> tuple[tf.Tensor, tf.Tensor]:
    """`tf.math.top_k(x, k)`'s (values, indices), computed through group maxima.

    Args:
      x: float [rows, n], n static, n >= k; rows may be unknown.
      k: a Python int >= 1.

    Returns:
      values [rows, k] (descending) and int32 indices [rows, k] into the n elements.
      With n unknown, or groups that would not pay (n < 4 * k), plain `tf.math.top_k`.
    """
    n = x.shape[-1]
    if n is None or n < 4 * k:
        return tf.math.top_k(x, k)
    g = group_size(n, k)
    num_groups = -(-n // g)
    if num_groups * g != n:  # padded with -inf at the end: never ahead of a real element
        x = tf.pad(x, [[0, 0], [0, num_groups * g - n]], constant_values=float("-inf"))
    rows = tf.shape(x)[0]
    groups = tf.reshape(x, [rows, num_groups, g])
    _, chosen = tf.math.top_k(tf.reduce_max(groups, axis=-1), k)  # [rows, k]
    if k > 1:  # index order, so that ties go to the lower index
        chosen = tf.sort(chosen, axis=-1)
    candidates = tf.reshape(tf.gather(groups, chosen, batch_dims=1), [rows, k * g])
    values, where = tf.math.top_k(candidates, k)
    indices = tf.gather(chosen, where // g, batch_dims=1) * g + where % g
    return values, indices
