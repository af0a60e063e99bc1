"""Position information added to the token embeddings (paper section 3.5, Table 3 row E)."""
import math

import keras
import numpy as np
import tensorflow as tf


def sinusoidal_table(num_positions: int, d_model: int, offset=0) -> tf.Tensor:
    """The paper's encoding for positions offset .. offset + num_positions - 1.

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

    Returns float32 [num_positions, d_model]; sine and cosine interleaved exactly as in
    the equation (even columns sine, odd columns cosine).
    """
    positions = tf.cast(tf.range(num_positions) + offset, tf.float32)[:, None]  # (pos, 1)
    even_dims = np.arange(0, d_model, 2, dtype=np.float32)  # the "2i" of the equation
    inverse_wavelengths = tf.constant(np.exp(-math.log(10000.0) * even_dims / d_model))
    angles = positions * inverse_wavelengths[None, :]  # (pos, ceil(d/2))
    table = tf.stack([tf.sin(angles), tf.cos(angles)], axis=-1)  # (pos, ceil(d/2), 2)
    table = tf.reshape(table, [num_positions, -1])
    return table[:, :d_model]


@keras.saving.register_keras_serializable(package="transformer_tf")
class SinusoidalPositionEncoding(keras.layers.Layer):
    """Adds nothing learnable: returns PE for the positions of `inputs`.

    Call arguments:
      inputs: float [batch, length, d_model] (only its shape is used).
      offset: int scalar, position of the first element (decoding step t uses offset t).

    Returns:
      [1, length, d_model] in the layer's compute dtype, to be added to the embeddings.
    """

    def __init__(self, max_position: int, **kwargs):
        super().__init__(**kwargs)
        self.max_position = max_position

    def call(self, inputs, offset=0):
        length, d_model = tf.shape(inputs)[1], inputs.shape[-1]
        table = sinusoidal_table(length, d_model, offset)
        return tf.cast(table, self.compute_dtype)[None]

    def get_config(self):
        return {**super().get_config(), "max_position": self.max_position}


@keras.saving.register_keras_serializable(package="transformer_tf")
class LearnedPositionEmbedding(keras.layers.Layer):
    """A learned table of `max_position` position vectors (Table 3 row E; ConvS2S).

    Args:
      max_position: rows of the table.
      d_model: width.
      stddev: initial std of the rows; None means d_model^-0.5 (unit-variance sums with
        the Transformer's scaled embeddings); ConvS2S uses 0.1.

    Call arguments:
      inputs: float [batch, length, d_model] (only its shape is used).
      offset: int scalar, position of the first element.

    Returns:
      [1, length, d_model]: rows offset .. offset + length - 1 of the table.
    """

    def __init__(self, max_position: int, d_model: int, stddev: float | None = None,
                 **kwargs):
        super().__init__(**kwargs)
        self.max_position = max_position
        self.d_model = d_model
        self.stddev = stddev

    def build(self, input_shape=None):
        self.table = self.add_weight(
            name="position_embeddings",
            shape=(self.max_position, self.d_model),
            initializer=keras.initializers.RandomNormal(
                stddev=self.d_model**-0.5 if self.stddev is None else self.stddev),
            autocast=False,  # `call` casts the rows it takes, not the whole table
        )

    def call(self, inputs, offset=0):
        length = tf.shape(inputs)[1]
        rows = tf.slice(self.table, [offset, 0], [length, self.d_model])
        return tf.cast(rows, self.compute_dtype)[None]

    def get_config(self):
        return {**super().get_config(), "max_position": self.max_position,
                "d_model": self.d_model, "stddev": self.stddev}
