"""transformer_tf.decoding."""
