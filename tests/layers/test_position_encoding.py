import math

import numpy as np
import pytest

from transformer_tf.layers.position_encoding import (
    LearnedPositionEmbedding, SinusoidalPositionEncoding, sinusoidal_table)


@pytest.mark.parametrize("d_model", [8, 7])
def test_sinusoidal_table_is_the_papers_equation(d_model):
    table = sinusoidal_table(20, d_model).numpy()
    for pos in range(20):
        for dim in range(d_model):
            i = dim // 2
            angle = pos / 10000 ** (2 * i / d_model)
            expected = math.sin(angle) if dim % 2 == 0 else math.cos(angle)
            assert table[pos, dim] == pytest.approx(expected, abs=2e-6), (pos, dim)


def test_offset_gives_the_rows_of_later_positions():
    layer = SinusoidalPositionEncoding(max_position=64)
    x = np.zeros((3, 1, 16), np.float32)
    full = sinusoidal_table(40, 16).numpy()
    np.testing.assert_allclose(layer(x, offset=37).numpy()[0, 0], full[37], atol=1e-6)
    assert layer(np.zeros((2, 5, 16), np.float32)).shape == (1, 5, 16)


def test_learned_positions_slice_their_table_at_the_offset():
    layer = LearnedPositionEmbedding(max_position=10, d_model=4)
    x = np.zeros((2, 3, 4), np.float32)
    out = layer(x, offset=4).numpy()
    np.testing.assert_allclose(out[0], layer.table.numpy()[4:7])
    again = LearnedPositionEmbedding.from_config(layer.get_config())
    assert again.get_config() == layer.get_config()
