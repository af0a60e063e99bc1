"""Work-arounds for `model.fit` under MultiWorkerMirroredStrategy (Keras 3, TF backend).

Upstream: https://github.com/keras-team/keras/issues/20585 (still open for keras 3.15 with
tensorflow 2.21). Two reductions in Keras' TF trainer fail across workers:

1. Before the first step, `_maybe_symbolic_build` reduces the first distributed input
   batch with MEAN to get a batch to build the model from; that reduction of PerReplica
   values fails across workers. It also fails under MirroredStrategy when the replicas'
   shares differ in shape, as they do for the last, partial batches of a finite
   (validation) dataset. Only shapes matter for the build, so we build from one replica's
   local batch instead, under any strategy.
2. After every step the logs are reduced with `strategy.reduce("MEAN", v, axis=0)`, which
   fails for scalars; logs of shape [1] reduce fine (to the same scalar).

Both are fixed here, from our own keras.Model subclass, without patching Keras. Remove
this module when the upstream issue is fixed (`distribution.is_multi_worker`, which says
when the second applies, stays).
"""
from __future__ import annotations

import tensorflow as tf

from transformer_tf.training.distribution import is_multi_worker


class MultiWorkerFitMixin:
    """Overrides for keras.Model subclasses (put before keras.Model in the bases)."""

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        strategy = getattr(self, "_distribute_strategy", None)
        if strategy is None or iterator is None:
            return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)
        for _, _, distributed_iterator in iterator:
            batch = next(distributed_iterator)
            # Work-around 1: one replica's local batch instead of a cross-worker MEAN.
            data_batch = tf.nest.map_structure(
                lambda value: strategy.experimental_local_results(value)[0]
                if isinstance(value, tf.distribute.DistributedValues) else value,
                batch)
            break
        with strategy.scope():
            self._symbolic_build(data_batch=data_batch)

    def shape_logs_for_strategy(self, logs: dict) -> dict:
        """Work-around 2: logs of shape [1] under multi-worker training, scalars otherwise."""
        if is_multi_worker(tf.distribute.get_strategy()):
            return {name: tf.reshape(value, [1]) for name, value in logs.items()}
        return logs
