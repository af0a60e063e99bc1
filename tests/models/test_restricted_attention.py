"""Restricted self-attention (ModelConfig.attention_window, the paper's Table 1 row): a
position sees only its neighbourhood, in training and in cached decoding alike."""
import numpy as np
import tensorflow as tf

from transformer_tf.presets import get_preset
from transformer_tf.layers.masks import attention_mask
from transformer_tf.models.transformer import Transformer


def test_mask_by_brute_force():
    valid = tf.constant([[True] * 5 + [False] * 2])
    for causal in (False, True):
        mask = attention_mask(valid, valid, causal=causal, window=2).numpy()[0]
        for i in range(7):
            for j in range(7):
                allowed = j < 5 and abs(i - j) <= 2 and (j <= i or not causal)
                assert mask[i, j] == allowed, (causal, i, j)


def _model(num_layers, window):
    config = get_preset("tiny").model.replace(num_layers=num_layers, attention_window=window,
                                              dropout=0.0)
    model = Transformer(config)
    model.build()
    return model


def test_encoder_position_sees_only_its_window():
    model = _model(num_layers=1, window=1)
    ids = np.array([[5, 6, 7, 8, 9, 10, 11, 3]], np.int32)
    base = model.encode(tf.constant(ids))[0].numpy()
    changed = ids.copy()
    changed[0, 4] = 20
    out = model.encode(tf.constant(changed))[0].numpy()
    moved = np.abs(out - base).max(axis=-1)[0] > 1e-6
    assert moved.tolist() == [False, False, False, True, True, True, False, False]


def test_cached_decoding_equals_the_full_pass_with_a_window():
    model = _model(num_layers=2, window=2)
    rng = np.random.default_rng(0)
    source = tf.constant(rng.integers(4, 64, (2, 6)), tf.int32)
    target = tf.constant(rng.integers(4, 64, (2, 9)), tf.int32)
    full = model((source, target)).numpy()
    state = model.init_cache(model.encode(source), 9)
    for t in range(9):
        logits, state = model.decode_step(target[:, t], t, state)
        np.testing.assert_allclose(logits.numpy(), full[:, t], atol=1e-5)
    unrestricted = _model(num_layers=2, window=None)
    unrestricted.set_weights(model.get_weights())
    # Beyond the window the outputs differ from unrestricted attention's (the knob bites).
    assert np.abs(unrestricted((source, target)).numpy()[:, 5:] - full[:, 5:]).max() > 1e-4
