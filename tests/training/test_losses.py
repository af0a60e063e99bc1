"""Label-smoothed cross-entropy over real tokens, checked against NumPy worked by hand."""
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import PAD_ID
from transformer_tf.training.losses import (
    label_smoothed_cross_entropy,
    label_smoothing_entropy,
    negative_log_likelihood,
    token_loss_sums,
)

# Batch of 2 sequences, 4 positions, vocabulary of 5 (id 0 = PAD).
LABELS = np.array([[2, 4, 3, PAD_ID],
                   [1, 3, PAD_ID, PAD_ID]], dtype=np.int32)
LOGITS = np.array([
    [[0.1, 0.2, 2.0, -1.0, 0.5], [1.0, 0.0, 0.3, 0.2, 1.5],
     [-0.5, 0.7, 0.1, 0.9, 0.0], [5.0, -3.0, 2.0, 1.0, 0.0]],
    [[0.3, 1.2, -0.4, 0.0, 0.8], [0.0, 0.0, 0.0, 2.5, -2.0],
     [9.0, 1.0, 1.0, 1.0, 1.0], [-7.0, 3.0, 0.0, 0.0, 1.0]],
], dtype=np.float32)


def numpy_smoothed_loss(labels, logits, eps):
    """sum over real tokens of -sum_v q(v) log softmax(logits)_v, q built explicitly."""
    vocab = logits.shape[-1]
    total, count = 0.0, 0
    for b in range(labels.shape[0]):
        for t in range(labels.shape[1]):
            y = labels[b, t]
            if y == PAD_ID:
                continue  # padding contributes nothing
            z = logits[b, t].astype(np.float64)
            log_p = z - np.log(np.sum(np.exp(z)))
            q = np.full(vocab, eps / (vocab - 1))  # every other id, pad id included
            q[y] = 1.0 - eps
            total += -np.sum(q * log_p)
            count += 1
    return total, count


def test_uniform_logits_by_hand():
    # With all-zero logits p(v) = 1/3 for V = 3, so H(q, p) = -sum_v q(v) log(1/3) = log 3
    # whatever q is; 3 real tokens (one pad) -> loss_sum = 3 log 3.
    labels = np.array([[1, 2, 1, PAD_ID]])
    logits = np.zeros((1, 4, 3), np.float32)
    loss_sum, count = label_smoothed_cross_entropy(labels, logits, 0.1)
    assert float(count) == 3.0
    assert float(loss_sum) == pytest.approx(3 * math.log(3), rel=1e-6)


def test_two_token_case_by_hand():
    # V = 2, eps = 0.1: q = (1 - eps) on the label and eps / (V - 1) = 0.1 on the other id.
    # logits (0, log 3) -> p = (1/4, 3/4); label 1:
    # H = -(0.9 log 3/4 + 0.1 log 1/4) = 0.9*0.2876821 + 0.1*1.3862944 = 0.3975433
    labels = np.array([[1]])
    logits = np.array([[[0.0, math.log(3.0)]]], np.float32)
    loss_sum, count = label_smoothed_cross_entropy(labels, logits, 0.1, pad_id=-1)
    assert float(count) == 1.0
    assert float(loss_sum) == pytest.approx(0.9 * -math.log(0.75) + 0.1 * -math.log(0.25), rel=1e-6)
    assert float(loss_sum) == pytest.approx(0.3975433, rel=1e-6)


@pytest.mark.parametrize("eps", [0.1, 0.3])
def test_matches_numpy_with_padding(eps):
    expected_sum, expected_count = numpy_smoothed_loss(LABELS, LOGITS, eps)
    loss_sum, count = label_smoothed_cross_entropy(LABELS, LOGITS, eps)
    assert float(count) == expected_count == 5
    assert float(loss_sum) == pytest.approx(expected_sum, rel=1e-5)


def test_padded_positions_contribute_nothing():
    changed = LOGITS.copy()
    changed[LABELS == PAD_ID] = np.random.default_rng(0).normal(0, 50, (3, 5))
    a, _ = label_smoothed_cross_entropy(LABELS, LOGITS, 0.1)
    b, _ = label_smoothed_cross_entropy(LABELS, changed, 0.1)
    assert float(a) == pytest.approx(float(b), rel=1e-7)


def test_eps_zero_is_sparse_cross_entropy():
    loss_sum, count = label_smoothed_cross_entropy(LABELS, LOGITS, 0.0)
    per_token = keras.losses.sparse_categorical_crossentropy(LABELS, LOGITS, from_logits=True)
    mask = LABELS != PAD_ID
    assert float(loss_sum) == pytest.approx(float(np.sum(np.asarray(per_token)[mask])), rel=1e-6)
    nll_sum, nll_count = negative_log_likelihood(LABELS, LOGITS)
    assert float(nll_sum) == pytest.approx(float(loss_sum), rel=1e-7)
    assert float(nll_count) == float(count) == 5


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_logits_computed_in_float32(dtype):
    low = tf.cast(LOGITS, dtype)
    loss_sum, count = label_smoothed_cross_entropy(LABELS, low, 0.1)
    assert loss_sum.dtype == tf.float32 and count.dtype == tf.float32
    # Same as float32 on the rounded logits: only the inputs were rounded.
    expected, _ = numpy_smoothed_loss(LABELS, np.asarray(tf.cast(low, tf.float32)), 0.1)
    assert float(loss_sum) == pytest.approx(expected, rel=1e-5)


def test_sums_split_across_replicas_equal_global_mean():
    # Two "replicas" with different numbers of real tokens: sum of sums / sum of counts
    # equals the whole-batch per-token mean (a mean of per-replica means would not).
    s0, c0 = label_smoothed_cross_entropy(LABELS[:1], LOGITS[:1], 0.1)
    s1, c1 = label_smoothed_cross_entropy(LABELS[1:], LOGITS[1:], 0.1)
    s, c = label_smoothed_cross_entropy(LABELS, LOGITS, 0.1)
    assert float((s0 + s1) / (c0 + c1)) == pytest.approx(float(s / c), rel=1e-6)
    assert float(c0) == 3 and float(c1) == 2


def test_token_loss_sums_consistent():
    sums = token_loss_sums(LABELS, LOGITS, 0.1)
    loss_sum, count = label_smoothed_cross_entropy(LABELS, LOGITS, 0.1)
    nll_sum, _ = negative_log_likelihood(LABELS, LOGITS)
    assert float(sums.loss_sum) == pytest.approx(float(loss_sum), rel=1e-7)
    assert float(sums.nll_sum) == pytest.approx(float(nll_sum), rel=1e-7)
    assert float(sums.token_count) == float(count) == 5
    # argmax per real position: [2, 4, 3] vs labels [2, 4, 3] -> 3 right; [1, 3] vs [1, 3] -> 2.
    assert float(sums.correct_count) == 5
    sums = token_loss_sums(np.array([[2, 1, PAD_ID]]), LOGITS[:1, :3], 0.1)
    assert float(sums.correct_count) == 1 and float(sums.token_count) == 2


def test_minimum_is_entropy_of_q():
    eps, vocab = 0.1, 5
    q = np.full(vocab, eps / (vocab - 1))
    q[3] = 1 - eps
    loss_sum, _ = label_smoothed_cross_entropy(np.array([[3]]), np.log(q)[None, None], eps)
    assert float(loss_sum) == pytest.approx(label_smoothing_entropy(eps, vocab), rel=1e-5)
    assert label_smoothing_entropy(eps, vocab) == pytest.approx(-np.sum(q * np.log(q)))


@pytest.mark.parametrize("jit_compile", [False, True])
def test_works_inside_tf_function_with_unknown_shapes(jit_compile):
    fn = tf.function(lambda y, z: label_smoothed_cross_entropy(y, z, 0.1),
                     jit_compile=jit_compile,
                     input_signature=[tf.TensorSpec([None, None], tf.int32),
                                      tf.TensorSpec([None, None, None], tf.float32)])
    expected, _ = numpy_smoothed_loss(LABELS, LOGITS, 0.1)
    assert float(fn(LABELS, LOGITS)[0]) == pytest.approx(expected, rel=1e-5)


def test_rejects_bad_inputs():
    with pytest.raises(ValueError):
        label_smoothed_cross_entropy(LABELS, LOGITS, 1.0)
    with pytest.raises(TypeError):
        label_smoothed_cross_entropy(LABELS.astype(np.float32), LOGITS, 0.1)


def autodiff_reference(labels, logits, eps, weight_loss, weight_nll):
    """TF's own gradient of w1 * loss_sum + w2 * nll_sum, written the plain way
    (log-softmax, explicit q, masked sum), to check the hand-written gradient."""
    logits = tf.constant(logits)
    with tf.GradientTape() as tape:
        tape.watch(logits)
        log_p = tf.nn.log_softmax(logits)
        vocab = logits.shape[-1]
        one_hot = tf.one_hot(labels, vocab)
        q = one_hot * (1.0 - eps) + (1.0 - one_hot) * eps / (vocab - 1)
        mask = tf.cast(labels != PAD_ID, tf.float32)
        loss = tf.reduce_sum(-tf.reduce_sum(q * log_p, -1) * mask)
        nll = tf.reduce_sum(-tf.reduce_sum(one_hot * log_p, -1) * mask)
        total = weight_loss * loss + weight_nll * nll
    return tape.gradient(total, logits).numpy()


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("weights", [(1.0, 0.0), (0.0, 1.0), (0.7, -2.0)])
def test_gradient_matches_autodiff_and_closed_form(eps, weights):
    logits = tf.constant(LOGITS)
    with tf.GradientTape() as tape:
        tape.watch(logits)
        sums = token_loss_sums(LABELS, logits, eps)
        total = weights[0] * sums.loss_sum + weights[1] * sums.nll_sum
    got = tape.gradient(total, logits).numpy()
    np.testing.assert_allclose(
        got, autodiff_reference(LABELS, LOGITS, eps, *weights), rtol=1e-5, atol=1e-6)
    # Closed form for the loss alone: softmax(z) - q at real tokens, 0 at padding.
    if weights == (1.0, 0.0):
        p = np.exp(LOGITS) / np.exp(LOGITS).sum(-1, keepdims=True)
        q = np.full(LOGITS.shape, eps / (LOGITS.shape[-1] - 1))
        np.put_along_axis(q, LABELS[..., None], 1.0 - eps, axis=-1)
        expected = (p - q) * (LABELS != PAD_ID)[..., None]
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
        assert np.all(got[LABELS == PAD_ID] == 0.0)


def test_gradient_of_low_precision_logits_has_their_dtype():
    logits = tf.cast(LOGITS, tf.float16)
    with tf.GradientTape() as tape:
        tape.watch(logits)
        loss_sum, _ = label_smoothed_cross_entropy(LABELS, logits, 0.1)
    grad = tape.gradient(loss_sum, logits)
    assert grad.dtype == tf.float16
    expected = autodiff_reference(LABELS, LOGITS.astype(np.float16).astype(np.float32),
                                  0.1, 1.0, 0.0)
    np.testing.assert_allclose(grad.numpy().astype(np.float32), expected, atol=2e-3)
