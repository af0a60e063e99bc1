"""Scalars a training run wrote to its TensorBoard logs (MDIR/logs/train, .../validation),
read back for the studies' tables."""
from __future__ import annotations

import pathlib


def median_logged_scalar(logdir: pathlib.Path, tag: str) -> float | None:
    """The median of a TensorBoard scalar `tag` over the event files of `logdir` (None
    when never logged), e.g. target_tokens_per_second under MDIR/logs/train."""
    import statistics

    import tensorflow as tf

    values = []
    for path in sorted(logdir.glob("events.out.tfevents.*")):
        for record in tf.data.TFRecordDataset(str(path)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            values += [float(tf.make_ndarray(v.tensor)) for v in event.summary.value
                       if v.tag == tag]
    return statistics.median(values) if values else None
