"""A bound on TensorFlow's CPU memory for the training commands, so that a batch that does
not fit raises an out-of-memory error the run can act on, instead of the kernel killing
the process.

On a GPU, an allocation beyond the device's memory raises tf.errors.ResourceExhaustedError
and training lowers its token budget and goes on (`training.fit`). On a CPU TensorFlow's
default allocator asks the system for whatever it needs: a batch too large for the
machine grows the process until Linux's out-of-memory killer ends it ("Killed", nothing
logged; the paper's parsing model with 25,000-token batches reached 23 GB on a 24 GB
machine). With TF_CPU_ALLOCATOR_USE_BFC=true and TF_CPU_BFC_MEM_LIMIT_IN_MB, TensorFlow
serves CPU tensors from one pool of at most that size and raises the error instead.

`bound_cpu_memory_for_training` sets both before TensorFlow loads, the limit from the
memory available when the command starts (/proc/meminfo's MemAvailable): what other
processes already hold is left to them. A user's own TF_CPU_ALLOCATOR_USE_BFC stands.
Training speed is the same with the pooled allocator (docs/training.md, "Out of
memory").
"""
from __future__ import annotations

import logging
import os
import pathlib
import sys
from collections.abc import MutableMapping

BFC_VARIABLE = "TF_CPU_ALLOCATOR_USE_BFC"
LIMIT_VARIABLE = "TF_CPU_BFC_MEM_LIMIT_IN_MB"
MEMINFO_VARIABLE = "TRANSFORMER_TF_MEMINFO"
# Left outside the pool: the interpreter, TensorFlow's libraries and graphs (1.4 GB
# resident beside a full 17.7 GB pool: parsing_paper training on an AVX2 EPYC).
OUTSIDE_THE_POOL_MB = 2048
AVAILABLE_SHARE = 0.9
SMALLEST_LIMIT_MB = 512


def available_memory_mb(meminfo_path=None) -> int | None:
    """MemAvailable of /proc/meminfo in MiB (`meminfo_path` None: $TRANSFORMER_TF_MEMINFO
    when set, else /proc/meminfo), or None where it cannot be read (not Linux)."""
    if meminfo_path is None:
        meminfo_path = os.environ.get(MEMINFO_VARIABLE, "/proc/meminfo")
    try:
        text = pathlib.Path(meminfo_path).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            value, unit = line.split(":", 1)[1].split()
            if unit.lower() == "kb":
                return int(value) // 1024
    return None


def pool_limit_mb(available_mb: int) -> int:
    """The pool's size for `available_mb` of free memory: its AVAILABLE_SHARE, less what the
    process holds outside the pool, and at least SMALLEST_LIMIT_MB."""
    return max(int(available_mb * AVAILABLE_SHARE) - OUTSIDE_THE_POOL_MB, SMALLEST_LIMIT_MB)


def bound_cpu_memory_for_training(environ: MutableMapping[str, str] = os.environ,
                                  meminfo_path=None) -> int | None:
    """Sets TF_CPU_ALLOCATOR_USE_BFC=true and TF_CPU_BFC_MEM_LIMIT_IN_MB (`pool_limit_mb`
    of the available memory) in `environ`, unless the user set TF_CPU_ALLOCATOR_USE_BFC,
    TensorFlow is loaded already (it reads them once) or the available memory is unknown.
    Returns the limit it set, in MiB, or None. Call it before importing TensorFlow."""
    if BFC_VARIABLE in environ or "tensorflow" in sys.modules:
        return None
    available = available_memory_mb(meminfo_path)
    if available is None:
        return None
    limit = pool_limit_mb(available)
    environ[BFC_VARIABLE] = "true"
    environ[LIMIT_VARIABLE] = str(limit)
    logging.getLogger(__name__).info(
        "TensorFlow's CPU memory bounded to %d MiB of the %d available (%s): a batch that "
        "does not fit lowers tokens_per_batch instead of the process being killed; set "
        "%s=false to lift it", limit, available, LIMIT_VARIABLE, BFC_VARIABLE)
    return limit
