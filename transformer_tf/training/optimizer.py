"""Adam (paper section 5.3) with TensorFlow's fused update kernel."""
import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="transformer_tf")
class FusedAdam(keras.optimizers.Adam):
    """`keras.optimizers.Adam`, same arguments, variables and arithmetic, whose update of
    each dense-gradient variable is one `ResourceApplyAdam` kernel:

        lr_t = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
        m <- beta_1 m + (1 - beta_1) g;  v <- beta_2 v + (1 - beta_2) g^2
        w <- w - lr_t m / (sqrt(v) + epsilon)

    Keras writes this as about ten element-wise ops per variable, each a pass over the
    variable's memory (and, on a GPU, a kernel launch): 3.5% of a base training step on
    this CPU (bench/README.md). The fused kernel exists for CPU, GPU and XLA. Sparse
    gradients (IndexedSlices) and `amsgrad` take Keras' own path.
    """

    def update_step(self, gradient, variable, learning_rate):
        if self.amsgrad or isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable, learning_rate)
        if isinstance(variable, keras.Variable):
            variable = variable.value
        dtype = variable.dtype
        index = self._get_variable_index(variable)
        momentum, velocity = self._momentums[index], self._velocities[index]
        step = tf.cast(self.iterations + 1, dtype)
        beta_1 = tf.cast(self.beta_1, dtype)
        beta_2 = tf.cast(self.beta_2, dtype)
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle, m=momentum.value.handle, v=velocity.value.handle,
            beta1_power=tf.pow(beta_1, step), beta2_power=tf.pow(beta_2, step),
            lr=tf.cast(learning_rate, dtype), beta1=beta_1, beta2=beta_2,
            epsilon=tf.cast(self.epsilon, dtype), grad=tf.cast(gradient, dtype),
            use_locking=False)
