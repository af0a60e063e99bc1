"""transformer_tf.models."""
