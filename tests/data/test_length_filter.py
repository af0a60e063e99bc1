"""The one length rule: numpy (data preparation) and TensorFlow (tf.data) agree."""
import numpy as np
import tensorflow as tf

from transformer_tf.data.length_filter import drop_reasons

# Side lengths with the special token counted: 1 = no BPE token (empty).
SOURCE = np.array([1, 2, 1, 5, 6, 5, 6, 2])
TARGET = np.array([2, 1, 1, 5, 5, 6, 9, 3])


def test_rule_with_numpy():
    empty, too_long = drop_reasons(SOURCE, TARGET, max_length=5)
    assert empty.tolist() == [True, True, True, False, False, False, False, False]
    assert too_long.tolist() == [False, False, False, False, True, True, True, False]
    _, too_long = drop_reasons(SOURCE, TARGET, max_length=5, max_target_length=9)
    assert too_long.tolist() == [False, False, False, False, True, False, True, False]


def test_tensorflow_agrees_with_numpy():
    for max_target_length in (None, 9):
        want = drop_reasons(SOURCE, TARGET, 5, max_target_length)
        got = drop_reasons(tf.constant(SOURCE), tf.constant(TARGET), 5, max_target_length)
        for w, g in zip(want, got):
            assert g.numpy().tolist() == w.tolist()
