"""What a training command sets in its environment before TensorFlow loads (each choice
leaves a user's own setting alone): oneDNN's kernels where they train faster
(`cpu.prefer_onednn_for_training`) and a bound on TensorFlow's CPU memory, so that a batch
too large for the machine lowers the token budget instead of getting the process killed
(`memory_bound.bound_cpu_memory_for_training`)."""
from __future__ import annotations

from transformer_tf.runtime.cpu import prefer_onednn_for_training
from transformer_tf.runtime.memory_bound import bound_cpu_memory_for_training


def prepare_for_training() -> None:
    """Both choices, in this process's environment (inherited by what it starts). Call it
    before importing TensorFlow."""
    prefer_onednn_for_training()
    bound_cpu_memory_for_training()
