"""transformer_tf.data."""
