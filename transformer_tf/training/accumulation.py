"""Gradient accumulation that means what it stands for: the update made from k
micro-batches equals the update of one batch holding all of them.

The objective of a step is the label-smoothed cross-entropy summed over real target tokens
divided by the number of real target tokens of the whole global batch. A mean of the k
micro-batches' own per-token means (what an optimizer's built-in accumulation gives) would
weigh a token of a short micro-batch more than a token of a full one. So the k
micro-batches of an update travel together: `pack_micro_batches(k)` turns k consecutive
batches of the input pipeline into one element (a tuple of k batches, each keeping its own
bucket shape), and `Seq2SeqTrainer.train_step` counts the real target tokens of all of them
(over all replicas) first, then sums each micro-batch's gradient of its loss sum divided by
that count, one micro-batch after the other (so only one micro-batch's activations are
alive at a time), and applies the sum once. It needs no conditional update inside the
step, which tf.distribute cannot merge across replicas (Keras' own accumulation fails
there: "merge_call called while defining a new graph").

Apply the transform to the stream *after* skipping the micro-batches a resumed run has
consumed (a multiple of k, as checkpoints fall between updates). Under XLA each
combination of k bucket shapes compiles once.
"""
from __future__ import annotations

import tensorflow as tf

from transformer_tf.config import PAD_ID


def real_token_count(labels) -> tf.Tensor:
    """float32 scalar: labels != PAD_ID."""
    return tf.reduce_sum(tf.cast(tf.not_equal(labels, PAD_ID), tf.float32))


def pack_micro_batches(group_size: int):
    """A `dataset.apply` transform: every `group_size` consecutive elements become one
    element, the tuple of them (an incomplete final group is dropped; training data
    repeats)."""
    if group_size < 1:
        raise ValueError(f"group_size must be positive, got {group_size}")

    def pack(*window):
        group = tf.data.Dataset.zip(window if len(window) > 1 else window[0])
        return tf.data.Dataset.zip(
            tuple(group.skip(i).take(1) for i in range(group_size)))

    def apply(dataset: tf.data.Dataset) -> tf.data.Dataset:
        packed = dataset.window(group_size, drop_remainder=True).flat_map(pack)
        # flat_map hides the cardinality; keep it known where it was (Keras then never asks
        # a finite dataset for one step too many).
        cardinality = int(dataset.cardinality())
        if cardinality == tf.data.INFINITE_CARDINALITY:
            return packed.repeat()
        if cardinality >= 0:
            return packed.apply(tf.data.experimental.assert_cardinality(cardinality // group_size))
        return packed

    return apply
