"""Position-wise feed-forward network (paper section 3.3, equation 2)."""
import keras


@keras.saving.register_keras_serializable(package="transformer_tf")
class PositionwiseFeedForward(keras.layers.Layer):
    """FFN(x) = max(0, x W1 + b1) W2 + b2, applied to every position alike.

    Args:
      d_model: input and output width.
      d_ff: inner width.
      dropout: dropout after the ReLU (0 in the paper; "relu dropout" in tensor2tensor).

    Call arguments:
      x: [batch, length, d_model]; training: enables dropout.

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

    def call(self, x, training=None):
        return self.outer(self.inner_dropout(self.inner(x), training=training))

    def get_config(self):
        return {**super().get_config(), "d_model": self.d_model, "d_ff": self.d_ff,
                "dropout": self.dropout}
