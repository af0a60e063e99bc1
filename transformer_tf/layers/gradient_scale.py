"""Scaling a gradient without changing the forward value."""
import tensorflow as tf


def scale_gradient(x, factor: float):
    """x in the forward pass (to rounding); the gradient flowing back through it times
    `factor`.

    ConvS2S divides the gradient reaching the encoder by the number of decoder attention
    layers reading it, so that the encoder's updates do not grow with that number.
    Written with stop_gradient rather than tf.custom_gradient: no gradient function is
    registered per trace, and XLA sees two plain multiplications.
    """
    factor = tf.cast(factor, x.dtype)
    return x * factor + tf.stop_gradient(x * (1 - factor))
