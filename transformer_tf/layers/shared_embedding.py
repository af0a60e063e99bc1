"""Token embeddings that double as the pre-softmax projection (paper section 3.4)."""
import keras
import tensorflow as tf

from transformer_tf.layers import kernel_layout


@keras.saving.register_keras_serializable(package="transformer_tf")
class SharedEmbedding(keras.layers.Layer):
    """Embedding matrix W [vocab_size, d_model] used both ways.

    - `call(ids)`: W[ids] * sqrt(d_model) (the scaling of section 3.4 when `scale`).
    - `logits(x)`: x @ W^T, the pre-softmax linear transformation sharing W; float32.

    Initialised N(0, d_model^-0.5) so that the scaled embeddings have unit variance,
    like the sinusoidal encodings they are added to.

    Args:
      vocab_size: number of token ids.
      d_model: embedding width.
      scale: multiply looked-up embeddings by sqrt(d_model).
    """

    def __init__(self, vocab_size: int, d_model: int, scale: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.scale = scale

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.vocab_size, self.d_model),
            initializer=keras.initializers.RandomNormal(stddev=self.d_model**-0.5),
            # Read as float32 under mixed precision too: the methods below cast what they
            # use (a Keras autocast would convert the whole table at every read).
            autocast=False,
        )

    def call(self, ids):
        """ids: int [batch, length] -> [batch, length, d_model] in the compute dtype."""
        # Gather, then cast: casting the table first would convert all vocab_size rows
        # at every call under mixed precision (at every decoding step).
        vectors = tf.cast(tf.gather(self.embeddings, ids), self.compute_dtype)
        if self.scale:
            vectors *= tf.cast(self.d_model**0.5, self.compute_dtype)
        return vectors

    def logits(self, x, kernel=None):
        """x: [batch, length, d_model] -> float32 logits [batch, length, vocab_size].

        kernel: optional `output_kernel()`, prepared once by a caller that projects many
          times with the same weights (a decoding loop).
        """
        # One 2-D matmul: on a 3-D x TF runs a broadcasting batched matmul whose gradient
        # materialises [batch, vocab, d_model] (2.4 GB at the base shape, bench/README.md).
        flat = tf.reshape(x, [-1, self.d_model])  # (batch * length, d_model)
        if kernel is None:
            logits = tf.matmul(flat, self.output_kernel(transposed=False), transpose_b=True)
        else:
            logits = kernel_layout.dense(flat, kernel, None, self.vocab_size)
        # logits: (batch * length, vocab)
        shape = tf.concat([tf.shape(x)[:-1], [self.vocab_size]], axis=0)
        return tf.cast(tf.reshape(logits, shape), tf.float32)

    def output_kernel(self, transposed=True):
        """The projection weights in the compute dtype: [d_model, vocab'] (W^T, with zero
        columns after the vocab_size real ones when `layers.kernel_layout` pads that
        width) when `transposed`, else W [vocab_size, d_model].

        Multiplying a few rows (one decoding step) by the materialised W^T is several times
        faster than by W with `transpose_b` on oneDNN; with many rows (training)
        both are the same, so training does not pay for the copy.
        """
        weights = tf.cast(self.embeddings, self.compute_dtype)
        if not transposed:
            return weights
        return kernel_layout.pad_output_columns(tf.transpose(weights))[0]

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "d_model": self.d_model, "scale": self.scale}
