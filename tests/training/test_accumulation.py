"""Gradient accumulation in the training driver: a step is an optimizer update of
`gradient_accumulation_steps` batches. The run stops at the planned step, TensorBoard gets
one value per logged step, and the checkpoints count the batches consumed, from which a
resumed run continues (test_training_run.py shows that a resumed run skipping the
counted batches ends like an uninterrupted one)."""
from __future__ import annotations

import tensorflow as tf

from transformer_tf.rundir import checkpoints
from transformer_tf.training.fit import TrainOptions, train

ACCUMULATE = 2


def run(data, model_dir, steps):
    return train(TrainOptions(
        data_dir=str(data.directory), model_dir=str(model_dir), preset="tiny",
        model_overrides={"num_layers": 1, "dropout": 0},
        training_overrides={"gradient_accumulation_steps": ACCUMULATE},
        max_steps=steps, eval_every=100, log_every=1, validation_sentences=0, verbose=0))


def test_accumulated_steps_count_updates_and_batches(tiny_multi30k, tmp_path, gc_frozen):
    with gc_frozen():
        first = run(tiny_multi30k, tmp_path / "resumed", 4)
    assert first.step == first.planned_steps == 4
    reader = tf.train.load_checkpoint(first.last_checkpoint)
    assert reader.get_tensor(checkpoints.BATCHES_KEY) == 4 * ACCUMULATE

    with gc_frozen():
        second = run(tiny_multi30k, tmp_path / "resumed", 6)
    assert (second.start_step, second.step, second.planned_steps) == (4, 6, 6)
    reader = tf.train.load_checkpoint(second.last_checkpoint)
    assert reader.get_tensor(checkpoints.BATCHES_KEY) == 6 * ACCUMULATE

    # One TensorBoard value per step, though each step ends two batches.
    logged = sorted(event.step for path in (tmp_path / "resumed" / "logs" / "train").iterdir()
                    for event in tf.compat.v1.train.summary_iterator(str(path))
                    for value in event.summary.value if value.tag == "loss")
    assert logged == [1, 2, 3, 4, 5, 6]

