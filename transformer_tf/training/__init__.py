"""transformer_tf.training."""
