"""transformer_tf.layers."""
