"""ShrinkOnPlateau: ConvS2S's learning rate, lowered when the dev loss stops improving,
with its state kept across a resume."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.rundir import checkpoints
from transformer_tf.training.plateau import ShrinkOnPlateau


class _Holder:
    """What the callback reads: model.optimizer and model.stop_training."""

    def __init__(self, rate):
        self.optimizer = keras.optimizers.SGD(rate, momentum=0.99, nesterov=True)
        self.stop_training = False


def _rate(optimizer):
    return float(keras.ops.convert_to_numpy(optimizer.learning_rate))


def test_rate_shrinks_on_each_non_improvement_and_training_ends_below_the_minimum():
    callback = ShrinkOnPlateau(shrink=0.1, min_rate=1e-3)
    model = _Holder(0.25)
    callback.set_model(model)
    rates = []
    for loss in (3.0, 2.5, 2.6, 2.4, 2.4, 2.0):
        callback.on_epoch_end(0, {"val_nll": np.array([loss])})  # multi-worker shape [1]
        rates.append(_rate(model.optimizer))
    # 2.6 does not improve on 2.5; 2.4 does; 2.4 again does not (ties are no progress).
    np.testing.assert_allclose(rates, [0.25, 0.25, 0.025, 0.025, 0.0025, 0.0025], rtol=1e-5)
    assert not model.stop_training
    callback.on_epoch_end(0, {"val_nll": 2.1})  # 0.00025 < 1e-3
    assert model.stop_training and callback.finished
    callback.on_epoch_end(0, {"loss": 1.0})  # no validation this epoch: nothing happens


def test_best_loss_and_rate_survive_a_checkpoint_round_trip(tmp_path):
    callback = ShrinkOnPlateau(shrink=0.5, min_rate=1e-4)
    model = _Holder(0.2)
    variable = keras.Variable(tf.ones([2]))
    model.optimizer.build([variable])
    callback.set_model(model)
    callback.on_epoch_end(0, {"val_nll": 2.0})
    callback.on_epoch_end(0, {"val_nll": 2.5})  # rate 0.1
    manager = checkpoints.make_manager(tf.Module(), model.optimizer, tmp_path, 2,
                                       training_state={"plateau": callback.best})
    manager.save()

    resumed = ShrinkOnPlateau(shrink=0.5, min_rate=1e-4)
    other = _Holder(0.2)
    other.optimizer.build([keras.Variable(tf.ones([2]))])
    manager = checkpoints.make_manager(tf.Module(), other.optimizer, tmp_path, 2,
                                       training_state={"plateau": resumed.best})
    checkpoints.restore_latest(manager)
    assert float(resumed.best.numpy()) == pytest.approx(2.0)
    assert _rate(other.optimizer) == pytest.approx(0.1)
