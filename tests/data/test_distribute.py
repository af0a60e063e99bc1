"""The training dataset under MirroredStrategy on two logical CPUs (in a fresh process,
since logical devices must be configured before TensorFlow initialises)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from transformer_tf.data.datasets import make_evaluation_dataset, make_training_dataset
    from transformer_tf.data.prepared_reader import load_prepared
    from transformer_tf.data.transforms import DropCounter

    prepared = load_prepared(sys.argv[1])
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    replicas = strategy.num_replicas_in_sync
    result = {"replicas": replicas, "splits": [], "fn_sizes": []}

    # 1. experimental_distribute_dataset: global batches split evenly over the replicas.
    dataset = make_training_dataset(prepared, tokens_per_batch=512, max_length=24,
                                    num_replicas=replicas, seed=1, repeat=True)
    for step, ((source, target_input), labels) in enumerate(
            strategy.experimental_distribute_dataset(dataset)):
        if step == 6:
            break
        parts = strategy.experimental_local_results(labels)
        result["splits"].append([list(p.shape) for p in parts])

    # 2. distribute_datasets_from_function: per-replica batches from the InputContext.
    def dataset_fn(context):
        return make_training_dataset(prepared, tokens_per_batch=512, max_length=24, seed=1,
                                     repeat=True, input_context=context)

    for step, (_, labels) in enumerate(strategy.distribute_datasets_from_function(dataset_fn)):
        if step == 4:
            break
        result["fn_sizes"].append([int(tf.size(p)) for p in
                                   strategy.experimental_local_results(labels)])

    # 3. model.fit consumes ((source, target_input), labels) as it is, with a drop counter
    #    in the training pipeline and the ordered evaluation dataset for validation.
    counter = DropCounter()
    counted = make_training_dataset(prepared, tokens_per_batch=512, max_length=24,
                                    num_replicas=replicas, seed=1, drop_counter=counter).take(3)
    with strategy.scope():
        source_in = keras.Input([None], dtype="int32")
        target_in = keras.Input([None], dtype="int32")
        hidden = keras.layers.Embedding(prepared.vocab_size, 8)(target_in)
        logits = keras.layers.Dense(prepared.vocab_size)(hidden)
        model = keras.Model([source_in, target_in], logits)
        model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                          ignore_class=0))
    history = model.fit(counted, epochs=1, verbose=0, validation_steps=2,
                        validation_data=make_evaluation_dataset(prepared, "valid", batch_size=64))
    result["loss"] = history.history["loss"][-1]
    result["val_loss"] = history.history["val_loss"][-1]
    result["dropped"] = counter.result()
    print("RESULT " + json.dumps(result))
    """
)


@pytest.mark.slow
def test_mirrored_strategy_splits_global_batches_evenly(small_prepared):
    repo_root = str(__import__("pathlib").Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (repo_root, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", PYTHONPATH=path)
    process = subprocess.run([sys.executable, "-c", CHILD, str(small_prepared.directory)],
                             capture_output=True, text=True, env=env, timeout=300)
    lines = [l for l in process.stdout.splitlines() if l.startswith("RESULT ")]
    assert process.returncode == 0 and lines, process.stderr[-3000:]
    result = json.loads(lines[0][len("RESULT "):])
    assert result["replicas"] == 2
    for parts in result["splits"]:
        (b0, l0), (b1, l1) = parts
        assert b0 == b1 > 0 and l0 == l1  # even split, same bucket length
        assert (b0 + b1) * l0 <= 512  # the global budget holds for the whole batch
    for sizes in result["fn_sizes"]:
        assert all(0 < size <= 256 for size in sizes)  # per-replica budget 512 / 2
    assert result["loss"] > 0 and result["val_loss"] > 0
    assert result["dropped"]["too_long"] > 0  # counted through the distributed pipeline
