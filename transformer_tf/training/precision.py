"""Which Keras dtype policy a training run uses.

"auto" (the default) picks by device:
- GPUs (every visible one counts; the weakest decides): mixed_bfloat16 from compute
  capability 8.0 (Ampere and later: bfloat16 tensor cores, no loss scaling needed),
  mixed_float16 from 7.0 (Volta, Turing: float16 tensor cores, with dynamic loss scaling),
  float32 below (no tensor cores: half precision gains little there);
- a CPU-only machine: mixed_bfloat16 where the CPU has native bfloat16 arithmetic (the
  AVX512-BF16 or AMX-BF16 instructions: oneDNN then runs bfloat16 matmuls several times
  faster than float32), float32 elsewhere (bfloat16 is emulated there, and slower).
"""
from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from transformer_tf.config import PRECISIONS
from transformer_tf.runtime.cpu import has_native_bfloat16, read_cpu_flags


def gpu_precision(capabilities: Sequence[tuple[int, int] | None]) -> tuple[str, str]:
    """(policy name, why) for GPUs of these compute capabilities ((major, minor); None
    where the driver did not say, counted as below 7.0)."""
    weakest = min((c or (0, 0)) for c in capabilities)
    shown = "unknown" if weakest == (0, 0) else f"{weakest[0]}.{weakest[1]}"
    if weakest >= (8, 0):
        return "mixed_bfloat16", f"auto: GPU compute capability {shown} (bfloat16 tensor cores)"
    if weakest >= (7, 0):
        return "mixed_float16", f"auto: GPU compute capability {shown} (float16 tensor cores)"
    return "float32", f"auto: GPU compute capability {shown} (no tensor cores)"


def _gpu_capabilities(gpus) -> list[tuple[int, int] | None]:
    return [tf.config.experimental.get_device_details(gpu).get("compute_capability")
            for gpu in gpus]


def resolve_precision(name: str, cpuinfo_path=None) -> tuple[str, str]:
    """(policy name, why) for a --precision value."""
    if name not in PRECISIONS:
        raise ValueError(f"precision: expected one of {PRECISIONS}, got {name!r}")
    if name != "auto":
        return name, "as requested"
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return gpu_precision(_gpu_capabilities(gpus))
    if has_native_bfloat16(read_cpu_flags(cpuinfo_path)):
        return "mixed_bfloat16", "auto: the CPU has native bfloat16 (AVX512-BF16/AMX)"
    return "float32", "auto: the CPU has no native bfloat16 (AVX512-BF16/AMX)"
