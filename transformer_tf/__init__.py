"""transformer_tf: the Transformer of "Attention Is All You Need" in TensorFlow 2 / Keras 3."""

__version__ = "0.1.0"
