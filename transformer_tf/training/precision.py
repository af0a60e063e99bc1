"""Which Keras dtype policy a training run uses.

"auto" (the default) picks mixed_bfloat16 on a CPU-only machine whose CPU has native
bfloat16 arithmetic (the AVX512-BF16 or AMX-BF16 instructions: oneDNN then runs bfloat16
matmuls several times faster than float32), and float32 elsewhere: on CPUs without them
bfloat16 is emulated and slower, and on GPUs the user chooses (mixed_float16 on most).
"""
from __future__ import annotations

import tensorflow as tf

from transformer_tf.runtime.cpu import has_native_bfloat16, read_cpu_flags

PRECISIONS = ("auto", "float32", "mixed_float16", "mixed_bfloat16")


def resolve_precision(name: str, cpuinfo_path=None) -> tuple[str, str]:
    """(policy name, why) for a --precision value."""
    if name not in PRECISIONS:
        raise ValueError(f"precision: expected one of {PRECISIONS}, got {name!r}")
    if name != "auto":
        return name, "as requested"
    if tf.config.list_physical_devices("GPU"):
        return "float32", "auto: GPU present (choose mixed_float16 for speed)"
    if has_native_bfloat16(read_cpu_flags(cpuinfo_path)):
        return "mixed_bfloat16", "auto: the CPU has native bfloat16 (AVX512-BF16/AMX)"
    return "float32", "auto: the CPU has no native bfloat16 (AVX512-BF16/AMX)"
