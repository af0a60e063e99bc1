"""transformer_tf.evaluation."""
