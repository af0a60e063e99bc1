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


class _Stepping(_Holder):
    """A holder whose optimizer step the test sets."""

    def __init__(self, rate, step=0):
        super().__init__(rate)
        self.optimizer.iterations.assign(step)


def test_per_pass_checks_come_at_the_first_step_of_each_new_pass_and_ignore_validations():
    calls, losses = [], iter([3.0, 2.0, 2.5, 2.4])
    model = _Stepping(0.25)

    def dev_nll():
        calls.append(int(model.optimizer.iterations.numpy()))
        return next(losses)

    callback = ShrinkOnPlateau(shrink=0.5, min_rate=1e-3)
    callback.check_every_pass(2.5, dev_nll)  # passes end after steps 2.5, 5, 7.5, 10
    callback.set_model(model)
    callback.on_train_begin()
    rates = []
    for step in range(1, 11):
        model.optimizer.iterations.assign(step)
        callback.on_train_batch_end(step - 1)
        callback.on_epoch_end(0, {"val_nll": 9.0})  # a validation: not a check any more
        rates.append(_rate(model.optimizer))
    assert calls == [3, 5, 8, 10]
    # 3.0, then 2.0 improves, 2.5 does not (halved at step 8), 2.4 does not (step 10).
    np.testing.assert_allclose(rates, [0.25] * 7 + [0.125] * 2 + [0.0625], rtol=1e-6)


def test_a_resumed_run_does_not_check_the_passes_it_already_checked():
    calls = []
    model = _Stepping(0.25, step=7)  # resumed inside pass 3 (2 passes of 3 steps done)
    callback = ShrinkOnPlateau(shrink=0.5, min_rate=1e-3)
    callback.check_every_pass(3, lambda: calls.append(
        int(model.optimizer.iterations.numpy())) or 1.0)
    callback.set_model(model)
    callback.on_train_begin()
    for step in (8, 9, 10):
        model.optimizer.iterations.assign(step)
        callback.on_train_batch_end(0)
    assert calls == [9]
    with pytest.raises(ValueError, match="steps_per_pass"):
        callback.check_every_pass(0, lambda: 1.0)


def test_a_convs2s_run_checks_its_dev_loss_once_per_pass_not_per_validation(
        tiny_multi30k, tmp_path, monkeypatch, gc_frozen):
    """A tiny ConvS2S run whose pass length is counted here: with validations every 1000
    steps the old rule would never have fired; the pass rule checks after every pass."""
    from transformer_tf.data.datasets import make_training_dataset
    from transformer_tf.training import fit as fit_lib
    from transformer_tf.training import plateau as plateau_lib

    budget, max_length = 4096, 64
    batches = sum(1 for _ in make_training_dataset(
        tiny_multi30k, "train", tokens_per_batch=budget, max_length=max_length,
        shuffle=False, repeat=False))
    assert batches >= 2, batches
    checked = []
    real = plateau_lib.mean_dev_nll

    def spy(trainer, dataset, step_fn=None):
        checked.append((int(trainer.optimizer.iterations.numpy()),
                        real(trainer, dataset, step_fn)))
        return 5.0  # never improves after the first pass: the rate shrinks each pass

    monkeypatch.setattr(fit_lib, "mean_dev_nll", spy)
    with gc_frozen():
        result = fit_lib.train(fit_lib.TrainOptions(
            data_dir=str(tiny_multi30k.directory), model_dir=str(tmp_path / "model"),
            preset="convs2s_tiny", max_steps=2 * batches + 1, eval_every=1000,
            validation_sentences=0, verbose=0, precision="float32",
            training_overrides={"tokens_per_batch": budget, "max_length": max_length,
                                "checkpoint_every_minutes": 60.0}))
    assert result.step == 2 * batches + 1
    assert [step for step, _ in checked] == [batches, 2 * batches]
    assert all(0 < nll < 10 for _, nll in checked)  # nats per token, vocabulary 500
    from transformer_tf.rundir import checkpoints

    reader = tf.train.load_checkpoint(str(checkpoints.newest_readable(tmp_path / "model")))
    rates = [reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
             if "learning_rate" in k]
    np.testing.assert_allclose(rates, [0.25 * 0.1], rtol=1e-6)  # one non-improvement
