"""Scaling a gradient without changing the forward value."""
import tensorflow as tf


def scale_gradient(x, factor: float):
    """x in the forward pass; the gradient flowing back through it times `factor`.

    ConvS2S divides the gradient reaching the encoder by the number of decoder attention
    layers reading it, so that the encoder's updates do not grow with that number."""

    @tf.custom_gradient
    def _identity(value):
        def grad(upstream):
            return upstream * tf.cast(factor, upstream.dtype)
        return tf.identity(value), grad

    return _identity(x)
