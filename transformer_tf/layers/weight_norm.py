"""Weight-normalised 1-D convolution (Salimans & Kingma 2016), as ConvS2S uses for every
convolution and linear map; a linear map is the kernel-size-1 case."""
import math

import keras
import tensorflow as tf

PADDINGS = ("centred", "causal")


def convs2s_stddev(fan_in: int, keep_probability: float = 1.0, feeds_glu: bool = False) -> float:
    """ConvS2S's initial weight std: sqrt(p / n_in), or sqrt(4 p / n_in) for a layer
    feeding a GLU (p the dropout keep probability of the layer's input, n_in its fan-in:
    kernel size x input channels). Both keep the variance of the activations roughly
    constant through the network (Gehring et al. 2017, section 3.5)."""
    return math.sqrt((4.0 if feeds_glu else 1.0) * keep_probability / fan_in)


@keras.saving.register_keras_serializable(package="transformer_tf")
class WeightNormConv1D(keras.layers.Layer):
    """y = conv(x, g * v / ||v||) + b, with the norm over each output channel's
    [kernel_size, in_channels] weights.

    v starts N(0, stddev) and g starts at ||v|| (so the initial kernel is v), b at 0.

    Args:
      filters: output channels.
      kernel_size: k (1: a position-wise linear map).
      stddev: initial std of v (see `convs2s_stddev`).
      padding: "centred" (k // 2 zeros each side for odd k: an output per input position
        seeing both neighbours) or "causal" (k - 1 zeros on the left: output i sees
        inputs i-k+1 .. i only).

    Call arguments:
      inputs: [batch, length, in_channels].

    Returns:
      [batch, length, filters] in the compute dtype.
    """

    def __init__(self, filters: int, kernel_size: int = 1, stddev: float = 0.1,
                 padding: str = "centred", **kwargs):
        super().__init__(**kwargs)
        if padding not in PADDINGS:
            raise ValueError(f"padding: expected one of {PADDINGS}, got {padding!r}")
        self.filters = filters
        self.kernel_size = kernel_size
        self.stddev = stddev
        self.padding = padding

    def build(self, input_shape):
        in_channels = int(input_shape[-1])
        self.direction = self.add_weight(
            name="direction", shape=(self.kernel_size, in_channels, self.filters),
            initializer=keras.initializers.RandomNormal(stddev=self.stddev))
        # g = ||v|| at the start: read v's initial value (a fresh variable, not yet trained).
        initial_norm = tf.norm(tf.reshape(tf.convert_to_tensor(self.direction),
                                          [-1, self.filters]), axis=0)
        self.magnitude = self.add_weight(
            name="magnitude", shape=(self.filters,),
            initializer=lambda shape, dtype=None: tf.cast(initial_norm, dtype or "float32"))
        self.bias = self.add_weight(name="bias", shape=(self.filters,), initializer="zeros")

    def kernel(self) -> tf.Tensor:
        """The effective kernel g * v / ||v||, [kernel_size, in_channels, filters], in the
        compute dtype (normalised in float32)."""
        v = tf.convert_to_tensor(self.direction)
        norm = tf.sqrt(tf.reduce_sum(tf.square(v), axis=[0, 1]))  # (filters,)
        return tf.cast(v * (self.magnitude / norm), self.compute_dtype)

    def call(self, inputs, kernel=None):
        """kernel: optional `kernel()`, prepared once by a caller that applies the layer
        many times with the same weights (a decoding loop)."""
        kernel = self.kernel() if kernel is None else kernel
        bias = tf.cast(self.bias, self.compute_dtype)
        if self.kernel_size == 1:
            return tf.einsum("btc,cf->btf", inputs, kernel[0]) + bias
        k = self.kernel_size
        left = k - 1 if self.padding == "causal" else (k - 1) // 2
        padded = tf.pad(inputs, [[0, 0], [left, k - 1 - left], [0, 0]])
        return tf.nn.conv1d(padded, kernel, stride=1, padding="VALID") + bias

    def call_window(self, window, kernel=None):
        """The output at the last position of a causal window: window [batch, k, in] (the
        k most recent inputs, oldest first) -> [batch, filters]. Equals `call` on the
        whole sequence at that position (incremental decoding). kernel: as in `call`."""
        kernel = self.kernel() if kernel is None else kernel
        return tf.einsum("bkc,kcf->bf", window, kernel) + tf.cast(
            self.bias, self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "filters": self.filters,
                "kernel_size": self.kernel_size, "stddev": self.stddev,
                "padding": self.padding}
