"""Residual connection with layer normalisation around a sub-layer (paper section 3.1)."""
import keras


@keras.saving.register_keras_serializable(package="transformer_tf")
class ResidualConnection(keras.layers.Layer):
    """Wraps one sub-layer's residual path.

    post-norm (the paper): output = LayerNorm(x + Dropout(Sublayer(x)))
    pre-norm:              output = x + Dropout(Sublayer(LayerNorm(x)))

    Use in two halves around the sub-layer:
        h = residual.sublayer_input(x)          # LayerNorm(x) when pre-norm, else x
        y = sublayer(h)
        x = residual(x, y, training=training)   # the sum (and LayerNorm when post-norm)

    Args:
      norm_position: "post" or "pre".
      dropout: P_drop applied to the sub-layer output.
      epsilon: LayerNormalization epsilon.
    """

    def __init__(self, norm_position: str = "post", dropout: float = 0.1,
                 epsilon: float = 1e-6, **kwargs):
        super().__init__(**kwargs)
        self.norm_position = norm_position
        self.dropout = dropout
        self.epsilon = epsilon
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=epsilon, name="layer_norm", dtype=self.dtype_policy)
        self.output_dropout = keras.layers.Dropout(
            dropout, name="output_dropout", dtype=self.dtype_policy)

    def build(self, input_shape):
        self.layer_norm.build(input_shape)

    def sublayer_input(self, x):
        return self.layer_norm(x) if self.norm_position == "pre" else x

    def call(self, x, sublayer_output, training=None):
        summed = x + self.output_dropout(sublayer_output, training=training)
        return self.layer_norm(summed) if self.norm_position == "post" else summed

    def get_config(self):
        return {**super().get_config(), "norm_position": self.norm_position,
                "dropout": self.dropout, "epsilon": self.epsilon}
