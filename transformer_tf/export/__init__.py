"""transformer_tf.export."""
