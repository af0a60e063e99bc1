"""ConvS2S's convolutional block: convolution, gated linear unit, scaled residual
(Gehring et al. 2017, section 3.2)."""
import math

import keras
import tensorflow as tf

from transformer_tf.layers.weight_norm import WeightNormConv1D, convs2s_stddev

RESIDUAL_SCALE = math.sqrt(0.5)


def gated_linear_unit(x):
    """GLU([A; B]) = A * sigmoid(B): x [..., 2d] split in halves -> [..., d]."""
    a, b = tf.split(x, 2, axis=-1)
    return a * tf.sigmoid(b)


def scaled_residual(x, residual):
    """(x + residual) * sqrt(0.5): keeps the variance of a sum of two equal-variance terms."""
    return (x + residual) * tf.cast(RESIDUAL_SCALE, x.dtype)


@keras.saving.register_keras_serializable(package="transformer_tf")
class ConvGLUBlock(keras.layers.Layer):
    """out = (GLU(conv(dropout(x))) + residual(x)) * sqrt(0.5).

    residual(x) is x, or a linear projection of x when `width` differs from the input
    width. The convolution (k = `kernel_size`, 2 * width channels, weight-normalised)
    is centred in the encoder and causal in the decoder.

    Args:
      width: output channels d.
      kernel_size: k.
      causal: decoder blocks (position i sees inputs <= i only).
      dropout: dropout on the block's input (before the convolution); 1 - dropout is the
        keep probability of the initialisation rule.

    Call arguments:
      inputs: [batch, length, in_width].
      valid: optional bool [batch, length], False at padding: padded positions are set to
        zero before the convolution, so no padding value reaches a real position.
      training: enables dropout.

    Returns:
      [batch, length, width].

    The decoder adds attention between the GLU and the residual sum: it calls the parts
    (`gated_conv`, `residual`, `scaled_residual`) itself; `gated_conv_window` is the
    incremental form of `gated_conv` for decoding.
    """

    def __init__(self, width: int, kernel_size: int, causal: bool = False,
                 dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.width = width
        self.kernel_size = kernel_size
        self.causal = causal
        self.dropout_rate = dropout
        self.dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def build(self, input_shape):
        in_width = int(input_shape[-1])
        self.convolution = WeightNormConv1D(
            2 * self.width, self.kernel_size,
            stddev=convs2s_stddev(self.kernel_size * in_width, 1.0 - self.dropout_rate,
                                  feeds_glu=True),
            padding="causal" if self.causal else "centred", name="convolution",
            dtype=self.dtype_policy)
        self.convolution.build(input_shape)
        self.projection = None
        if in_width != self.width:
            self.projection = WeightNormConv1D(
                self.width, 1, stddev=convs2s_stddev(in_width), name="residual_projection",
                dtype=self.dtype_policy)
            self.projection.build(input_shape)

    def residual(self, x, kernels=None):
        """x, or its projection to `width`; kernels: optional `kernels()`."""
        if self.projection is None:
            return x
        return self.projection(x, kernel=None if kernels is None else kernels["projection"])

    def kernels(self) -> dict:
        """The weight-normalised kernels, prepared once for many decoding steps."""
        kernels = {"convolution": self.convolution.kernel()}
        if self.projection is not None:
            kernels["projection"] = self.projection.kernel()
        return kernels

    def gated_conv(self, x, valid=None, training=None):
        """GLU(conv(dropout(x))) over whole sequences: [batch, length, width]."""
        if valid is not None:
            x = x * tf.cast(valid, x.dtype)[:, :, None]
        return gated_linear_unit(self.convolution(self.dropout(x, training=training)))

    def gated_conv_window(self, window, kernels=None):
        """GLU(conv) at the last position of a causal window [batch, k, in_width] ->
        [batch, 1, width] (inference: no dropout); kernels: optional `kernels()`."""
        kernel = None if kernels is None else kernels["convolution"]
        return gated_linear_unit(self.convolution.call_window(window, kernel))[:, None, :]

    def call(self, inputs, valid=None, training=None):
        return scaled_residual(self.gated_conv(inputs, valid, training), self.residual(inputs))

    def get_config(self):
        return {**super().get_config(), "width": self.width, "kernel_size": self.kernel_size,
                "causal": self.causal, "dropout": self.dropout_rate}
