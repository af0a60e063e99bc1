"""What the CPU offers (read from /proc/cpuinfo, without TensorFlow) and the two choices
that follow from it: bfloat16 arithmetic, and oneDNN's kernels for training.

oneDNN: on Linux, TensorFlow turns its oneDNN kernels on by itself only on CPUs with
neural-network instructions (AVX512-VNNI, AVX512-BF16, AVX-VNNI or AMX; its
`DefaultOneDnnPolicy`); elsewhere its matrix products run in Eigen. On AVX2 CPUs
oneDNN's float32 product and the base-shape training step are faster than Eigen's (by a
third on an AVX2 EPYC: `bench/run_all.py --only matmul,train` with TF_ENABLE_ONEDNN_OPTS
at 0 and 1), so the training commands turn it on on x86 CPUs with AVX2 and no AVX-512
(`prefer_onednn_for_training`) unless the user set TF_ENABLE_ONEDNN_OPTS. On CPUs with
AVX-512 TensorFlow's own choice stands, Eigen on those without VNNI (not measured here).
"""
from __future__ import annotations

import logging
import os
import pathlib
import platform
import sys
from collections.abc import Mapping, MutableMapping

BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
# The instructions on which TensorFlow turns oneDNN on by itself on Linux x86-64
# (`IsMKLEnabled` in tensorflow/core/util/util.cc).
ONEDNN_BY_DEFAULT_FLAGS = ("avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8",
                           "amx_bf16")
ONEDNN_VARIABLE = "TF_ENABLE_ONEDNN_OPTS"
CPUINFO_VARIABLE = "TRANSFORMER_TF_CPUINFO"
X86_64_MACHINES = ("x86_64", "amd64")


def cpu_flags(cpuinfo_text: str) -> set[str]:
    """The instruction-set flags of the first CPU in /proc/cpuinfo's text."""
    for line in cpuinfo_text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def read_cpu_flags(cpuinfo_path=None) -> set[str]:
    """This machine's CPU flags; empty where /proc/cpuinfo cannot be read (not Linux).

    `cpuinfo_path` None reads $TRANSFORMER_TF_CPUINFO when set, else /proc/cpuinfo: the
    variable lets the test suite (and a user reproducing a report) run the choices of
    another CPU, e.g. --precision auto of an AVX512-BF16 machine on an AVX2 one."""
    if cpuinfo_path is None:
        cpuinfo_path = os.environ.get(CPUINFO_VARIABLE, "/proc/cpuinfo")
    try:
        return cpu_flags(pathlib.Path(cpuinfo_path).read_text())
    except OSError:
        return set()


def cpu_model_name(cpuinfo_path=None) -> str:
    """The CPU's model name from /proc/cpuinfo (`cpuinfo_path` as for `read_cpu_flags`),
    else what `platform` says (not Linux)."""
    if cpuinfo_path is None:
        cpuinfo_path = os.environ.get(CPUINFO_VARIABLE, "/proc/cpuinfo")
    try:
        text = pathlib.Path(cpuinfo_path).read_text()
    except OSError:
        return platform.processor()
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def has_native_bfloat16(flags: set[str]) -> bool:
    """AVX512-BF16 or AMX-BF16: bfloat16 products in hardware (elsewhere TF emulates them)."""
    return bool(flags & set(BF16_CPU_FLAGS))


# The kinds of CPU the fast paths are measured on (`cpu_kind`), newest first.
CPU_KINDS = ("AMX", "AVX512-BF16", "AVX-512", "AVX2", "other")


def cpu_kind(flags: set[str]) -> str:
    """The kind of CPU these flags describe, as the fast-path table of docs/performance.md
    names them: "AMX" (amx_bf16), "AVX512-BF16" (avx512_bf16), "AVX-512" (avx512f),
    "AVX2" (avx2 and fma), else "other"."""
    if "amx_bf16" in flags:
        return "AMX"
    if "avx512_bf16" in flags:
        return "AVX512-BF16"
    if "avx512f" in flags:
        return "AVX-512"
    if {"avx2", "fma"} <= flags:
        return "AVX2"
    return "other"


def onednn_pays_for_training(flags: set[str], machine: str) -> bool:
    """True on an x86-64 CPU with AVX2 and FMA but no AVX-512, where TensorFlow leaves
    oneDNN off and it trains faster (measured, module docstring)."""
    return (machine.lower() in X86_64_MACHINES and {"avx2", "fma"} <= flags
            and "avx512f" not in flags)


def matmul_library(environ: Mapping[str, str] = os.environ, cpuinfo_path=None,
                   machine: str | None = None) -> str:
    """"onednn" or "eigen": which library runs TensorFlow's CPU matrix products in this
    process, as TensorFlow decides it: TF_ENABLE_ONEDNN_OPTS when set ("1"/"true" on,
    "0"/"false" off), else on by default on x86-64 CPUs with `ONEDNN_BY_DEFAULT_FLAGS` and
    on other machines (aarch64 builds), Eigen elsewhere."""
    value = environ.get(ONEDNN_VARIABLE, "").strip().lower()
    if value in ("1", "true"):
        return "onednn"
    if value in ("0", "false"):
        return "eigen"
    machine = machine if machine is not None else platform.machine()
    if machine.lower() not in X86_64_MACHINES:
        return "onednn"
    flags = read_cpu_flags(cpuinfo_path)
    return "onednn" if flags & set(ONEDNN_BY_DEFAULT_FLAGS) else "eigen"



def other_matmul_library(library: str) -> tuple[str, dict[str, str]]:
    """For `library` ("onednn" or "eigen", as `matmul_library` names it): (the other
    library, the environment entry that makes a new process use it: TF_ENABLE_ONEDNN_OPTS
    "1" for oneDNN, "0" for Eigen)."""
    if library not in ("onednn", "eigen"):
        raise ValueError(f"matmul library {library!r}: expected 'onednn' or 'eigen'")
    other = "eigen" if library == "onednn" else "onednn"
    return other, {ONEDNN_VARIABLE: "1" if other == "onednn" else "0"}

def prefer_onednn_for_training(environ: MutableMapping[str, str] = os.environ,
                               cpuinfo_path=None,
                               machine: str | None = None) -> bool:
    """Sets TF_ENABLE_ONEDNN_OPTS=1 in `environ` (and says so in the log) where
    `onednn_pays_for_training`, unless the variable is set already (the user's value
    stands) or TensorFlow is loaded (it reads the variable once: a change now could apply
    to some ops and not to others). True when it set the variable. Call it before
    importing TensorFlow."""
    if ONEDNN_VARIABLE in environ or "tensorflow" in sys.modules:
        return False
    if not onednn_pays_for_training(read_cpu_flags(cpuinfo_path),
                                    machine if machine is not None else platform.machine()):
        return False
    environ[ONEDNN_VARIABLE] = "1"
    logging.getLogger(__name__).info(
        "%s=1: oneDNN kernels on this AVX2 CPU (TensorFlow's own choice there, Eigen, "
        "trains slower); set %s=0 to keep Eigen", ONEDNN_VARIABLE, ONEDNN_VARIABLE)
    return True
