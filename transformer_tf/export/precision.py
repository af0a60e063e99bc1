"""Which arithmetic a serving export may run in on this machine.

A "bfloat16" export (`config.SERVING_PRECISIONS`) pays where bfloat16 products run in
hardware: a GPU, or a CPU with AVX512-BF16 or AMX-BF16 (`runtime.cpu.BF16_CPU_FLAGS`).
Elsewhere TensorFlow emulates them, slower than float32, so the export refuses unless
forced (to build on one machine an export for another, or to test it).
"""
from __future__ import annotations

import tensorflow as tf

from transformer_tf.inference.loading import serving_dtype_policy
from transformer_tf.runtime.cpu import (
    BF16_CPU_FLAGS,
    has_native_bfloat16,
    read_cpu_flags,
)


class PrecisionRefused(ValueError):
    """An export precision this machine does not run natively, not forced."""


def check_export_precision(precision: str, force: bool = False, cpuinfo_path=None) -> str:
    """The Keras dtype policy for an export in `precision` ("float32" or "bfloat16");
    raises `PrecisionRefused` for "bfloat16" when no GPU is visible and the CPU flags
    (`runtime.cpu.read_cpu_flags(cpuinfo_path)`) hold none of BF16_CPU_FLAGS, unless
    `force`; ValueError for an unknown `precision`."""
    policy = serving_dtype_policy(precision)
    if precision == "float32" or force or tf.config.list_physical_devices("GPU"):
        return policy
    if not has_native_bfloat16(read_cpu_flags(cpuinfo_path)):
        raise PrecisionRefused(
            f"--precision {precision}: this CPU has no native bfloat16 (none of the CPU "
            f"flags {', '.join(BF16_CPU_FLAGS)}) and no GPU is visible, so TensorFlow would "
            "emulate the bfloat16 products, slower than float32; export float32 here, or "
            "add --force-precision to build a bfloat16 export for another machine")
    return policy
