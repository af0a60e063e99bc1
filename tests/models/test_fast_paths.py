"""The fast paths keep the outputs: mixed precision, XLA, and cached decoding.

  * Mixed precision (float16 / bfloat16 compute, float32 variables): the logits of a
    mixed model are float32 and close to a float32 model's with the same weights, and its
    cached decoding reproduces its own teacher-forced logits. One training step under
    mixed_float16 (loss scaling) moves the weights like the float32 step.
  * XLA: a training step compiled with jit_compile=True computes the same loss and the same
    update as the plain graph; the search (fixed length, static shapes) finds the same
    hypotheses with the same scores.

Tolerances for mixed precision are in units of the compute dtype's unit roundoff u (half
the spacing of its numbers at 1): float16 has 11 significant bits, u = 2^-11 ~ 4.9e-4;
bfloat16 has 8 (about 3 decimal digits), u = 2^-8 ~ 3.9e-3. The logits come out of ~20
successive low-precision operations (two layers of attention, feed-forward and LayerNorm,
each result rounded), so they carry a few u of relative error: over several seeds and
both model variants below, max |mixed - float32| stayed under 4 u * max|logit| for both
dtypes.
"""
from __future__ import annotations

import contextlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID, DecodingConfig, ModelConfig, TrainingConfig
from transformer_tf.decoding.model_driver import search_with_lengths
from transformer_tf.models.transformer import Transformer
from transformer_tf.training.fit import build_model_and_optimizer

MODEL = ModelConfig(vocab_size=40, num_layers=2, d_model=24, d_ff=48, num_heads=4,
                    max_position=64, dropout=0.0)
VARIANTS = {
    "paper": {},
    # Final LayerNorms, learned position table, a separate output projection.
    "pre_norm_learned_unshared": dict(norm_position="pre", position_encoding="learned",
                                      embedding_sharing="none", target_vocab_size=33),
}
UNIT_ROUNDOFF = {"mixed_float16": 2.0**-11, "mixed_bfloat16": 2.0**-8}
COMPUTE_DTYPE = {"mixed_float16": tf.float16, "mixed_bfloat16": tf.bfloat16}

# Training steps: with the paper's Adam epsilon (1e-9) the first update is lr * sign(g)
# (m / sqrt(v) = g / |g|), which hides a wrongly scaled gradient and turns the rounding
# noise of zero gradients (attention key biases, see test_replicas.py) into +-lr updates.
# With epsilon >> |g| the update is lr_t * m / epsilon, proportional to the gradient, so
# comparing updates compares gradients. warmup_steps=1: learning rate d_model^-0.5 at step 1.
TRAINING = TrainingConfig(warmup_steps=1, adam_epsilon=1.0, clip_norm=None)


@contextlib.contextmanager
def global_policy(name):
    """Layers built inside take `name` as their dtype policy."""
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(name)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


def padded_batch(rng, config, source_lengths, target_lengths):
    """((source_ids, target_input_ids), labels), random real tokens, PAD_ID-padded; the
    target input is BOS followed by the labels shifted right."""
    batch = len(source_lengths)
    source = np.full((batch, max(source_lengths)), PAD_ID, np.int32)
    target_input = np.full((batch, max(target_lengths)), PAD_ID, np.int32)
    labels = np.full((batch, max(target_lengths)), PAD_ID, np.int32)
    for b, (s, t) in enumerate(zip(source_lengths, target_lengths)):
        source[b, :s] = rng.integers(4, config.vocab_size, s)
        labels[b, :t] = rng.integers(4, config.resolved_target_vocab_size, t)
        target_input[b, :t] = np.concatenate([[BOS_ID], labels[b, :t - 1]])
    return (source, target_input), labels


def real_positions(target_lengths, length):
    """bool [batch, length]: the positions whose logits mean something."""
    return np.arange(length)[None, :] < np.asarray(target_lengths)[:, None]


def float32_and_mixed(config, policy):
    """A float32 Transformer and a copy of it (same weights) built under `policy`."""
    reference = Transformer(config)
    reference.build()
    with global_policy(policy):
        mixed = Transformer(config)
    mixed.build()
    mixed.set_weights(reference.get_weights())
    # Every sub-layer runs under the policy (one left in float32 would still see its
    # weights rounded by the model's autocast, and hide in the comparisons below).
    assert {layer.dtype_policy.name for layer in mixed._flatten_layers()} == {policy}
    assert all(w.dtype == "float32" for w in mixed.weights)  # float32 master weights
    return reference, mixed


# ---------------------------------------------------------------------------- mixed precision
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("policy", sorted(UNIT_ROUNDOFF))
def test_mixed_precision_logits_match_float32(policy, variant):
    config = MODEL.replace(**VARIANTS[variant])
    reference, mixed = float32_and_mixed(config, policy)
    target_lengths = [7, 5, 7]
    (source, target), _ = padded_batch(np.random.default_rng(0), config, [9, 4, 6],
                                       target_lengths)
    expected = reference((source, target)).numpy()
    logits = mixed((source, target))
    assert logits.dtype == tf.float32
    real = real_positions(target_lengths, target.shape[1])
    expected, got = expected[real], logits.numpy()[real]
    assert np.all(np.isfinite(got))

    u, scale = UNIT_ROUNDOFF[policy], np.abs(expected).max()
    # Seen: <= 4 u * scale (module doc). A wrong weight, a lost scaling or an overflow
    # moves logits by O(scale), hundreds of u.
    np.testing.assert_allclose(got, expected, rtol=0, atol=8 * u * scale)
    # It did run in low precision: float32 arithmetic would agree to ~1e-6 relative (under
    # u / 400); the low-precision roundings show as ~u.
    assert np.abs(got - expected).max() > 0.25 * u * scale


@pytest.mark.parametrize("policy", sorted(UNIT_ROUNDOFF))
def test_mixed_precision_cached_decoding_reproduces_teacher_forcing(policy):
    config = MODEL.replace(**VARIANTS["pre_norm_learned_unshared"])
    _, model = float32_and_mixed(config, policy)
    target_lengths = [7, 5, 7]
    (source, target), _ = padded_batch(np.random.default_rng(1), config, [9, 4, 6],
                                       target_lengths)
    full = model((source, target)).numpy()
    dtype = COMPUTE_DTYPE[policy]

    def decode_all(source, target):
        state = model.init_cache(model.encode(source), max_length=10)
        # The caches and prepared weights are kept in the compute dtype (half the memory).
        assert state.per_beam["layers"][0]["self_key"].dtype == dtype
        assert state.per_sentence["layers"][0]["cross_value"].dtype == dtype
        assert state.constants["output_kernel"].dtype == dtype
        steps = []
        for t in range(target.shape[1]):
            logits, state = model.decode_step(target[:, t], tf.constant(t), state)
            assert logits.dtype == tf.float32
            steps.append(logits)
        return tf.stack(steps, axis=1)

    real = real_positions(target_lengths, target.shape[1])
    scale = np.abs(full[real]).max()
    # In a graph, as the search runs it, and eagerly.
    for name, run in (("graph", tf.function(decode_all, autograph=False)),
                      ("eager", decode_all)):
        cached = run(tf.constant(source), tf.constant(target)).numpy()
        # Same arithmetic in the same dtype, over one position at a time instead of the
        # whole prefix: kernels for other shapes may round differently (seen: 0 to 1 ulp of
        # the logits). A cache written at the wrong place, a wrong mask or position, or a
        # cache kept at another precision moves them by much more.
        np.testing.assert_allclose(cached[real], full[real], rtol=0,
                                   atol=4 * UNIT_ROUNDOFF[policy] * scale, err_msg=name)


# ---------------------------------------------------------------------------- training steps
def training_batch():
    """4 sentences, unevenly padded (11, 9, 2 and 1 real target tokens)."""
    return padded_batch(np.random.default_rng(7), MODEL, [8, 5, 3, 6], [11, 9, 2, 1])


def one_training_step(initial_weights, policy="float32", jit_compile=False):
    """(model, logs, per-variable updates w_after - w_before) of one `train_on_batch` of a
    model from `build_model_and_optimizer` started at `initial_weights`."""
    with global_policy(policy):
        model = build_model_and_optimizer(MODEL, TRAINING, jit_compile=jit_compile)
    model.set_weights(initial_weights)
    inputs, labels = training_batch()
    logs = model.train_on_batch(inputs, labels, return_dict=True)
    updates = [w.numpy() - before for w, before in zip(model.weights, initial_weights)]
    return model, logs, updates


def initial_weights():
    reference = Transformer(MODEL)
    reference.build()
    return [w.numpy() for w in reference.weights]


def largest_update(updates):
    largest = max(float(np.abs(u).max()) for u in updates)
    # Updates (~1e-2 here) are compared, not weights (~0.3): a tolerance relative to the
    # weights would let a wrong update through.
    assert largest > 1e-3, "the step barely moved the weights"
    return largest


def relative_difference(got, expected):
    return float(np.linalg.norm(got - expected) / np.linalg.norm(expected))


def test_mixed_float16_training_step_matches_float32():
    start = initial_weights()
    _, expected_logs, expected_updates = one_training_step(start)
    model, logs, updates = one_training_step(start, policy="mixed_float16")
    # compile() wrapped the optimizer for dynamic loss scaling; the scaled gradients did
    # not overflow (else the step is skipped and the scale halved).
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert int(model.optimizer.iterations.numpy()) == 1
    assert float(model.optimizer.dynamic_scale.numpy()) == 2.0**15
    assert np.isfinite(logs["loss"])
    # The loss is a mean over 23 tokens of a float32 log-softmax of logits carrying a few u
    # (float16: 4.9e-4) of error relative to their scale. Each token's loss moves by at
    # most 2 max|logit error| (its gradient p - q has L1 norm <= 2): 3e-3 of the loss if
    # all errors lined up; seen: <= 3e-5 over several seeds.
    assert logs["loss"] == pytest.approx(expected_logs["loss"], rel=1e-3)
    assert logs["target_tokens"] == expected_logs["target_tokens"] == 23

    # The weights moved like the float32 step's. Not entry by entry: a ReLU whose input is
    # within float16 rounding of 0 is on in one model and off in the other, which changes
    # the gradient of every weight below it by that unit's share (seen: up to 6% of a
    # variable's update, 2.6% of the whole, over 4 seeds). A loss scale not applied or
    # not undone changes the update 32768-fold, a gradient that does not flow by 100%.
    largest_update(expected_updates)
    flat = np.concatenate([u.ravel() for u in updates])
    assert relative_difference(flat, np.concatenate([u.ravel() for u in expected_updates])) < 5e-2
    for weight, got, expected in zip(model.weights, updates, expected_updates):
        if weight.path.endswith("key/bias"):
            continue  # zero gradient in exact arithmetic (see test_replicas.py): noise
        assert relative_difference(got, expected) < 0.25, weight.path


def test_xla_training_step_matches_graph():
    start = initial_weights()
    graph, graph_logs, graph_updates = one_training_step(start, jit_compile=False)
    xla, xla_logs, xla_updates = one_training_step(start, jit_compile=True)
    assert xla.jit_compile is True and graph.jit_compile is False
    assert xla_logs["loss"] == pytest.approx(graph_logs["loss"], rel=1e-5)
    # Same float32 arithmetic, fused and ordered differently: the updates agree entry by
    # entry to a few ulps of the weights (seen: 7e-6 of the largest update); a gradient
    # off by 0.1% would be 1e-3 of it.
    largest = largest_update(graph_updates)
    for weight, got, expected in zip(xla.weights, xla_updates, graph_updates):
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4 * largest,
                                   err_msg=f"update of {weight.path}")


# ---------------------------------------------------------------------------- XLA decoding
@pytest.mark.parametrize("beam_size", [1, 4])
def test_xla_search_matches_graph(beam_size):
    fixed_length = 8
    # An untrained model whose output projection is its embedding mostly repeats the token
    # it was fed; with a projection of its own the hypotheses vary more.
    config = MODEL.replace(embedding_sharing="none")
    model = Transformer(config)
    model.build()
    (source, _), _ = padded_batch(np.random.default_rng(2), config, [9, 4, 6], [1, 1, 1])
    decoding = DecodingConfig(beam_size=beam_size, alpha=0.6)

    def search(source_ids):  # EOS forbidden: exactly fixed_length tokens, static shapes
        return search_with_lengths(
            model, source_ids, beam_size=beam_size, alpha=decoding.alpha, n_best=beam_size,
            max_lengths=fixed_length, cache_length=fixed_length,
            max_decode_length=fixed_length, forbidden_ids=(PAD_ID, BOS_ID, EOS_ID))

    source = tf.constant(source)
    graph = tf.nest.map_structure(lambda x: x.numpy(),
                                  tf.function(search, autograph=False)(source))
    xla = tf.nest.map_structure(lambda x: x.numpy(),
                                tf.function(search, jit_compile=True, autograph=False)(source))
    assert xla.ids.shape == (3, beam_size, fixed_length)
    np.testing.assert_array_equal(xla.ids, graph.ids)
    np.testing.assert_array_equal(xla.lengths, graph.lengths)
    np.testing.assert_allclose(xla.scores, graph.scores, rtol=1e-4)
    # What was compared is a real search: full-length outputs without EOS (forbidden with
    # a fixed length), varied tokens, and for beams distinct hypotheses without near-ties
    # in their ranking (which rounding could legitimately flip).
    assert np.all(graph.lengths == fixed_length) and not np.any(graph.ids == EOS_ID)
    assert len(np.unique(graph.ids)) > 3
    if beam_size > 1:
        assert all(len({tuple(h) for h in sentence}) == beam_size for sentence in graph.ids)
        gaps = -np.diff(graph.scores, axis=1)
        assert np.all(gaps > 1e-4 * np.abs(graph.scores[:, 1:])), gaps
