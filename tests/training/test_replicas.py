"""1 vs 2 replicas: one `model.fit` step on the same global batch gives the same loss and
the same updated weights (MirroredStrategy over two logical CPUs).

The global batch is padded unevenly: the rows that go to replica 0 hold many real target
tokens, those of replica 1 few. So a loss normalised per replica (a mean of per-replica
means, or each replica dividing by its own token count) gives a different gradient; with
plain SGD the update is lr * gradient, so a wrongly scaled gradient shows in the weights.
(Adam's first update is about lr * sign(gradient) and would hide it; it is checked too,
with the library's FusedAdam.)

tests/conftest.py splits the CPU into two logical devices before TensorFlow initialises;
if that did not happen, the comparison runs in a subprocess that splits it first.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

CONFIG = dict(vocab_size=40, num_layers=1, d_model=16, d_ff=32, num_heads=2, dropout=0.0,
              max_position=32)
LABEL_SMOOTHING = 0.1
LEARNING_RATE = {"sgd": 0.5, "adam": 1e-3}


def global_batch():
    """4 rows: rows 0-1 (replica 0 of 2) have 11 and 9 real target tokens, rows 2-3
    (replica 1) have 2 and 1; sources are padded differently too."""
    rng = np.random.default_rng(7)
    source = np.zeros((4, 8), np.int32)
    target_input = np.zeros((4, 12), np.int32)
    labels = np.zeros((4, 12), np.int32)
    for row, (source_length, target_length) in enumerate([(8, 11), (5, 9), (3, 2), (6, 1)]):
        source[row, :source_length] = rng.integers(4, 40, source_length)
        tokens = rng.integers(4, 40, target_length)
        target_input[row, :target_length] = np.concatenate([[2], tokens[:-1]])  # BOS first
        labels[row, :target_length] = tokens
    return (source, target_input), labels


def mirrored_strategy(devices=None):
    """A new MirroredStrategy with collective keys of its own.

    Strategies made in one process number their collective ops alike; a second one would
    reuse keys the first one used with other shapes ("Shape mismatch in the collective
    instance ..."). TensorFlow's own tests move the key base the same way.
    """
    import tensorflow as tf

    tf.distribute.MirroredStrategy._collective_key_base += 100_000
    return tf.distribute.MirroredStrategy(devices)


def micro_batches():
    """The global batch as two micro-batches of different token counts: rows 0 and 2
    (11 + 2 real target tokens), then rows 1 and 3 (9 + 1); on two replicas each replica
    gets one row of each."""
    import tensorflow as tf

    (source, target_input), labels = global_batch()
    parts = [((source[rows], target_input[rows]), labels[rows]) for rows in ([0, 2], [1, 3])]
    return tf.data.Dataset.from_tensors(parts[0]).concatenate(tf.data.Dataset.from_tensors(parts[1]))


def one_step(devices, optimizer_name):
    """Initial weights, weights after one update, the reported loss, per-replica tokens.

    `optimizer_name` "sgd" or "adam" makes one update from the whole global batch;
    "sgd+accumulate" makes it from the two `micro_batches` with gradient accumulation.
    """
    import keras
    import tensorflow as tf

    from transformer_tf.config import ModelConfig
    from transformer_tf.models.transformer import Transformer
    from transformer_tf.training.accumulation import pack_micro_batches
    from transformer_tf.training.optimizer import FusedAdam
    from transformer_tf.training.trainer import Seq2SeqTrainer

    accumulate = 2 if optimizer_name.endswith("+accumulate") else 1

    keras.utils.set_random_seed(0)
    reference = Transformer(ModelConfig(**CONFIG))
    reference.build()
    initial = [w.numpy() for w in reference.weights]
    strategy = (mirrored_strategy(devices) if len(devices) > 1
                else tf.distribute.OneDeviceStrategy(devices[0]))
    with strategy.scope():
        model = Seq2SeqTrainer(Transformer(ModelConfig(**CONFIG)), LABEL_SMOOTHING,
                               accumulation_steps=accumulate)
        model.build()
        model.set_weights(initial)
        optimizer = (keras.optimizers.SGD(LEARNING_RATE["sgd"])
                     if optimizer_name.startswith("sgd")
                     else FusedAdam(LEARNING_RATE["adam"], beta_2=0.98, epsilon=1e-9))
        model.compile(optimizer=optimizer, jit_compile=False)
    inputs, labels = global_batch()
    dataset = tf.data.Dataset.from_tensor_slices((inputs, labels)).batch(4)
    _, distributed_labels = next(iter(strategy.experimental_distribute_dataset(dataset)))
    local_tokens = [int(np.count_nonzero(part.numpy()))
                    for part in strategy.experimental_local_results(distributed_labels)]
    if accumulate > 1:
        dataset = micro_batches().apply(pack_micro_batches(accumulate))
    batch_logs = []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: batch_logs.append(
            {k: float(np.squeeze(v)) for k, v in logs.items()}))
    history = model.fit(dataset, epochs=1, verbose=0, callbacks=[record])
    replica_copies = [[c.numpy() for c in strategy.experimental_local_results(w.value)]
                      for w in model.weights]
    return {
        "initial": initial,
        "final": [copies[0] for copies in replica_copies],
        "copies_agree": all(np.array_equal(c, copies[0])
                            for copies in replica_copies for c in copies),
        "loss": history.history["loss"][0],     # epoch-end logs: metrics read afterwards
        "batch_logs": batch_logs[0],            # what the step returned (progress bar,
                                                # TensorBoard, NaN check)
        "iterations": int(model.optimizer.iterations.numpy()),
        "local_tokens": local_tokens,
        "names": [w.path for w in model.weights],
    }


def expected_loss():
    """The per-token label-smoothed loss of the initial model on the whole batch, by hand:
    log-softmax in numpy, summed over real tokens, divided by their number."""
    import keras

    from transformer_tf.config import ModelConfig
    from transformer_tf.models.transformer import Transformer

    keras.utils.set_random_seed(0)
    model = Transformer(ModelConfig(**CONFIG))
    model.build()
    inputs, labels = global_batch()
    logits = model(inputs, training=False).numpy().astype(np.float64)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    eps, vocab = LABEL_SMOOTHING, CONFIG["vocab_size"]
    q = np.full(log_probs.shape, eps / (vocab - 1))
    np.put_along_axis(q, labels[..., None], 1 - eps, axis=-1)
    per_position = -(q * log_probs).sum(-1)
    mask = labels != 0
    return per_position[mask].sum() / mask.sum()


def _two_logical_cpus() -> bool:
    import tensorflow as tf
    return len(tf.config.list_logical_devices("CPU")) >= 2


_RUNS = {}  # optimizer name -> _run's results: the "sgd" runs serve two tests


def _run(optimizer_name, tmp_path, gc_frozen):
    """(one-replica results, two-replica results), in this process if it can; each
    optimizer's runs made once per module."""
    if optimizer_name not in _RUNS:
        _RUNS[optimizer_name] = _run_once(optimizer_name, tmp_path, gc_frozen)
    return _RUNS[optimizer_name]


def _run_once(optimizer_name, tmp_path, gc_frozen):
    if _two_logical_cpus():
        with gc_frozen():
            return (one_step(["/cpu:0"], optimizer_name),
                    one_step(["/cpu:0", "/cpu:1"], optimizer_name))
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / "results.npy"
    done = subprocess.run([sys.executable, __file__, optimizer_name, str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return tuple(np.load(out, allow_pickle=True))


@pytest.fixture(scope="module", params=["sgd", "adam"])
def results(request, tmp_path_factory, gc_frozen):
    return request.param, _run(request.param, tmp_path_factory.mktemp("replicas"), gc_frozen)


def test_global_batch_is_split_unevenly(results):
    _, (single, double) = results
    assert single["local_tokens"] == [23]
    assert double["local_tokens"] == [20, 3]  # very different per-replica token counts


def test_same_loss(results):
    _, (single, double) = results
    assert single["loss"] == pytest.approx(expected_loss(), rel=1e-5)
    assert double["loss"] == pytest.approx(single["loss"], rel=1e-5)


def test_same_step_logs(results):
    # The logs a step returns are global too: not the mean of the replicas' own values
    # (replica 0's per-token loss over 20 tokens and replica 1's over 3; 11.5 tokens).
    _, (single, double) = results
    assert single["batch_logs"]["loss"] == pytest.approx(single["loss"], rel=1e-6)
    assert single["batch_logs"]["target_tokens"] == 23
    assert set(double["batch_logs"]) == set(single["batch_logs"])
    for name, value in single["batch_logs"].items():
        assert double["batch_logs"][name] == pytest.approx(value, rel=1e-5), name


def test_same_weights_after_one_step(results):
    optimizer_name, (single, double) = results
    assert single["iterations"] == double["iterations"] == 1
    assert double["copies_agree"], "the two replicas' variables differ after the step"
    largest = max(float(np.abs(one - before).max())
                  for before, one in zip(single["initial"], single["final"]))
    assert largest > 1e-3, "the step barely moved the weights"
    for name, before, one, two in zip(single["names"], single["initial"], single["final"],
                                      double["final"]):
        # Compare the updates, not the weights (which would hide a wrongly scaled update).
        # The attention key biases get a zero gradient in exact arithmetic (the softmax
        # ignores a constant added to all of a query's logits): their SGD update is
        # rounding noise (hence the atol), which Adam blows up to ~lr, so skip them there.
        if optimizer_name == "adam" and name.endswith("key/bias"):
            continue
        np.testing.assert_allclose(two - before, one - before, rtol=1e-3, atol=1e-5 * largest,
                                   err_msg=f"{optimizer_name}: update of {name}")


def test_accumulated_micro_batches_give_the_update_of_one_large_batch(tmp_path, gc_frozen):
    # Two micro-batches of 13 and 10 real target tokens, accumulated, against one batch
    # holding both (23 tokens), with SGD (whose update is the gradient itself, so any
    # misweighting shows), on one and on two replicas. A mean of per-micro-batch means
    # would weigh a token of the 10-token micro-batch 1.3x more than one of the other.
    whole = _run("sgd", tmp_path / "whole", gc_frozen)
    accumulated = _run("sgd+accumulate", tmp_path / "accumulated", gc_frozen)
    reference = whole[0]
    largest = max(float(np.abs(after - before).max())
                  for before, after in zip(reference["initial"], reference["final"]))
    for replicas, result in zip((1, 2), accumulated):
        assert result["iterations"] == 1, "two micro-batches must make one update"
        assert result["copies_agree"]
        for name, before, expected, got in zip(reference["names"], reference["initial"],
                                               reference["final"], result["final"]):
            np.testing.assert_allclose(got - before, expected - before, rtol=1e-3,
                                       atol=1e-5 * largest,
                                       err_msg=f"{replicas} replica(s): update of {name}")

if __name__ == "__main__":  # the subprocess fallback of _run
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from transformer_tf.training.distribution import split_cpu

    split_cpu(2)
    name, path = sys.argv[1], sys.argv[2]
    pair = np.empty(2, object)
    pair[:] = [one_step(["/cpu:0"], name), one_step(["/cpu:0", "/cpu:1"], name)]
    np.save(path, pair, allow_pickle=True)


needs_two_cpus = pytest.mark.skipif(
    "not __import__('tensorflow').config.list_logical_devices('CPU')[1:]",
    reason="needs the two logical CPUs of tests/conftest.py")


@needs_two_cpus
def test_evaluate_when_a_replica_gets_no_rows(gc_frozen):
    # A finite dataset's last batches can be smaller than the number of replicas: here
    # the first batch has one row (replica 1 gets none). Keras' MEAN of the replicas'
    # input batches (keras-team/keras#20585) failed on it; the metrics stay global.
    import keras
    import tensorflow as tf

    from transformer_tf.config import ModelConfig
    from transformer_tf.models.transformer import Transformer
    from transformer_tf.training.trainer import Seq2SeqTrainer

    inputs, labels = global_batch()
    dataset = tf.data.Dataset.from_tensor_slices((inputs, labels))
    dataset = dataset.take(1).batch(1).concatenate(dataset.skip(1).batch(3))
    results = []
    for strategy in (tf.distribute.OneDeviceStrategy("/cpu:0"),
                     mirrored_strategy(["/cpu:0", "/cpu:1"])):
        keras.utils.set_random_seed(0)
        with strategy.scope():
            model = Seq2SeqTrainer(Transformer(ModelConfig(**CONFIG)), LABEL_SMOOTHING)
            model.build()
            model.compile(optimizer="sgd", jit_compile=False)
        with gc_frozen():
            results.append(model.evaluate(dataset, verbose=0, return_dict=True))
    assert results[0]["loss"] == pytest.approx(expected_loss(), rel=1e-5)
    assert results[1]["target_tokens"] == results[0]["target_tokens"] == 23
    for name, value in results[0].items():
        assert results[1][name] == pytest.approx(value, rel=1e-5), name


@needs_two_cpus
def test_train_driver_with_mirrored_strategy(tiny_multi30k, tmp_path, gc_frozen):
    # scripts/train.py --strategy mirrored (here over the two logical CPUs): global
    # batches split over the replicas, validation with partial batches, checkpoints.
    import tensorflow as tf

    from transformer_tf.training.fit import TrainOptions, train

    tf.distribute.MirroredStrategy._collective_key_base += 100_000  # see mirrored_strategy
    with gc_frozen():
        result = train(TrainOptions(
            data_dir=str(tiny_multi30k.directory), model_dir=str(tmp_path), preset="tiny",
            model_overrides={"num_layers": 1}, max_steps=4, eval_every=100, log_every=2,
            strategy="mirrored", validation_sentences=0, verbose=0))
    assert result.step == result.planned_steps == 4
    assert result.last_checkpoint.endswith("ckpt-4")
