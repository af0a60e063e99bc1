"""Position-wise feed-forward network (paper section 3.3, equation 2)."""
import keras
import tensorflow as tf

from transformer_tf.layers import kernel_layout


@keras.saving.register_keras_serializable(package="transformer_tf")
class PositionwiseFeedForward(keras.layers.Layer):
    """FFN(x) = max(0, x W1 + b1) W2 + b2, applied to every position alike.

    Args:
      d_model: input and output width.
      d_ff: inner width.
      dropout: dropout after the ReLU (0 in the paper; "relu dropout" in tensor2tensor).

    Call arguments:
      x: [batch, length, d_model]; training: enables dropout.
      kernels: None, or `inference_kernels()`: the same function without dropout, the
        weights laid out once for CPU matrix products (`layers.kernel_layout`).

    Returns:
      [batch, length, d_model].
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.d_ff = d_ff
        self.dropout = dropout
        self.inner = keras.layers.Dense(d_ff, activation="relu", name="inner",
                                        dtype=self.dtype_policy)
        self.inner_dropout = keras.layers.Dropout(dropout, name="inner_dropout",
                                                  dtype=self.dtype_policy)
        self.outer = keras.layers.Dense(d_model, name="outer", dtype=self.dtype_policy)

    def build(self, input_shape):
        self.inner.build(input_shape)
        self.outer.build((*input_shape[:-1], self.d_ff))

    def call(self, x, training=None, kernels=None):
        if kernels is None:  # training, or Keras-quantized weights
            return self.outer(self.inner_dropout(self.inner(x), training=training))
        (inner, inner_bias), (outer, outer_bias) = kernels
        # The inner product's extra columns are relu(0) = 0 and meet the outer kernel's
        # zero rows, so the pair needs no slice between them.
        h = kernel_layout.dense(tf.reshape(x, [-1, self.d_model]), inner, inner_bias,
                                inner.shape[1], activation=tf.nn.relu)
        y = kernel_layout.dense(h, outer, outer_bias, self.d_model)
        return tf.reshape(y, tf.shape(x))

    def inference_kernels(self):
        """((inner kernel, bias), (outer kernel, bias)) in the compute dtype, laid out for
        `call(..., kernels=...)`: inner [d_model, d_ff'], outer [d_ff', d_model'] with
        d_ff' = d_ff and d_model' = d_model unless a multiple of 512 (zero padding).
        None when Keras has quantized the weights (`call` then keeps its Dense layers)."""
        if self.inner.quantization_mode is not None or self.outer.quantization_mode is not None:
            return None
        dtype = self.compute_dtype
        inner, inner_bias = kernel_layout.pad_output_columns(
            tf.cast(self.inner.kernel, dtype), tf.cast(self.inner.bias, dtype))
        outer = kernel_layout.pad_input_rows(tf.cast(self.outer.kernel, dtype), inner.shape[1])
        outer, outer_bias = kernel_layout.pad_output_columns(outer, tf.cast(self.outer.bias, dtype))
        return (inner, inner_bias), (outer, outer_bias)

    def get_config(self):
        return {**super().get_config(), "d_model": self.d_model, "d_ff": self.d_ff,
                "dropout": self.dropout}
