"""Padding-aware token metrics, checked by hand."""
import subprocess
import sys

import keras
import pytest
import tensorflow as tf

from transformer_tf.training.metrics import TokenAccuracy, TokenMean


def test_token_accuracy_is_ratio_of_sums_not_mean_of_batches():
    metric = TokenAccuracy()
    assert float(metric.result()) == 0.0
    metric.update_state(3.0, 4.0)   # batch 1: 3 of 4 right (0.75)
    metric.update_state(1.0, 6.0)   # batch 2: 1 of 6 right
    # (3 + 1) / (4 + 6) = 0.4, not the mean of batch accuracies (0.75 + 0.1667) / 2.
    assert float(metric.result()) == pytest.approx(0.4)
    metric.reset_state()
    assert float(metric.result()) == 0.0


def test_token_mean_accepts_tensors_and_low_precision():
    metric = TokenMean(name="loss")
    metric.update_state(tf.constant([1.5, 2.5], tf.float16), tf.constant(4, tf.int32))
    assert float(metric.result()) == pytest.approx(1.0)


@pytest.mark.parametrize("cls", [TokenMean, TokenAccuracy])
def test_get_config_round_trip(cls):
    metric = cls(name="m")
    config = metric.get_config()
    assert config == {"name": "m", "dtype": "float32"}
    clone = cls.from_config(config)
    assert clone.name == "m" and type(clone) is cls
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(metric))
    assert type(restored) is cls and restored.get_config() == config


MIRRORED_SCRIPT = r"""
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from transformer_tf.training.metrics import TokenAccuracy
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    metric = TokenAccuracy()
values = strategy.experimental_distribute_values_from_function(
    lambda ctx: (tf.constant(float(ctx.replica_id_in_sync_group + 1)), tf.constant(4.0)))
strategy.run(tf.function(lambda c, n: metric.update_state(c, n)), args=values)
print("RESULT", float(metric.result()))
"""


def test_sums_across_mirrored_replicas():
    # Two logical CPU replicas add 1/4 and 2/4; the result is (1 + 2) / (4 + 4) over both.
    # A subprocess, because logical devices must be set before TF initialises.
    out = subprocess.run([sys.executable, "-c", MIRRORED_SCRIPT], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    result = float(out.stdout.split("RESULT")[-1])
    assert result == pytest.approx(3.0 / 8.0)
