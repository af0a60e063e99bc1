"""The CPU-derived choices: which CPUs get oneDNN for training, and when the variable is
left alone (the user's value, TensorFlow already loaded, a CPU it does not pay on)."""
from __future__ import annotations

import os
import pathlib
import platform
import subprocess
import sys

import pytest

from transformer_tf.runtime import cpu

REPO = pathlib.Path(__file__).resolve().parents[2]

AVX2_EPYC = "processor : 0\nflags : fpu sse4_2 avx fma avx2 bmi2\nprocessor : 1\n"
AVX512_XEON = "processor : 0\nflags : fpu avx fma avx2 avx512f avx512bw avx512_vnni\n"


@pytest.mark.parametrize("flags, machine, expected", [
    ({"avx", "avx2", "fma"}, "x86_64", True),
    ({"avx", "avx2", "fma"}, "AMD64", True),  # (Windows spells it so)
    ({"avx", "avx2", "fma", "avx512f"}, "x86_64", False),  # TensorFlow's default stands
    ({"avx", "fma"}, "x86_64", False),  # no AVX2
    ({"avx2"}, "x86_64", False),  # no FMA
    ({"avx2", "fma"}, "aarch64", False),
    (set(), "x86_64", False),  # flags unknown
])
def test_onednn_pays_on_avx2_x86_without_avx512(flags, machine, expected):
    assert cpu.onednn_pays_for_training(flags, machine) is expected


@pytest.fixture
def tensorflow_not_loaded(monkeypatch):
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)


def write(tmp_path, text):
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    return path


def test_sets_the_variable_on_an_avx2_cpu(tmp_path, tensorflow_not_loaded, caplog):
    environ = {}
    with caplog.at_level("INFO", logger="transformer_tf.runtime.cpu"):
        assert cpu.prefer_onednn_for_training(environ, write(tmp_path, AVX2_EPYC), "x86_64")
    assert environ == {"TF_ENABLE_ONEDNN_OPTS": "1"}
    assert "TF_ENABLE_ONEDNN_OPTS=0 to keep Eigen" in caplog.text


@pytest.mark.parametrize("user_value", ["0", "1", ""])
def test_a_users_value_stands(tmp_path, tensorflow_not_loaded, user_value):
    environ = {"TF_ENABLE_ONEDNN_OPTS": user_value}
    assert not cpu.prefer_onednn_for_training(environ, write(tmp_path, AVX2_EPYC), "x86_64")
    assert environ == {"TF_ENABLE_ONEDNN_OPTS": user_value}


@pytest.mark.parametrize("cpuinfo", [AVX512_XEON, "processor : 0\n", None])
def test_other_cpus_keep_tensorflows_default(tmp_path, tensorflow_not_loaded, cpuinfo):
    path = write(tmp_path, cpuinfo) if cpuinfo is not None else tmp_path / "missing"
    environ = {}
    assert not cpu.prefer_onednn_for_training(environ, path, "x86_64")
    assert environ == {}


def test_too_late_once_tensorflow_is_loaded(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow", sys)  # (any module object)
    environ = {}
    assert not cpu.prefer_onednn_for_training(environ, write(tmp_path, AVX2_EPYC), "x86_64")
    assert environ == {}


def test_flags_come_from_the_first_processor():
    assert cpu.cpu_flags(AVX2_EPYC) == {"fpu", "sse4_2", "avx", "fma", "avx2", "bmi2"}
    assert cpu.has_native_bfloat16({"avx512_bf16"}) and cpu.has_native_bfloat16({"amx_bf16"})
    assert not cpu.has_native_bfloat16(cpu.cpu_flags(AVX512_XEON))


@pytest.mark.parametrize("user_value", [None, "0"])
def test_the_training_command_chooses_before_tensorflow_loads(user_value):
    """scripts/train.py (stopped by a usage error, before any training) turns oneDNN on
    where it pays and says so; with the user's TF_ENABLE_ONEDNN_OPTS it is silent. It
    bounds TensorFlow's CPU memory too (tests/runtime/test_memory_bound.py)."""
    env = {k: v for k, v in os.environ.items()
           if k not in (cpu.ONEDNN_VARIABLE, "TF_CPU_ALLOCATOR_USE_BFC")}
    if user_value is not None:
        env[cpu.ONEDNN_VARIABLE] = user_value
    run = subprocess.run([sys.executable, str(REPO / "scripts" / "train.py"),
                          "--data", "unused", "--model-dir", "unused"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 2 and "give --max-steps" in run.stderr, run.stderr
    expected = user_value is None and cpu.onednn_pays_for_training(
        cpu.read_cpu_flags(), platform.machine())
    assert ("TF_ENABLE_ONEDNN_OPTS=1: oneDNN kernels" in run.stderr) is expected
    assert "TensorFlow's CPU memory bounded to" in run.stderr


AVX512_BF16_EPYC = ("processor : 0\nflags : fpu avx fma avx2 avx512f avx512bw avx512_vnni "
                    "avx512_bf16\n")


@pytest.mark.parametrize("cpuinfo, expected", [(AVX512_BF16_EPYC, "mixed_bfloat16"),
                                               (AVX2_EPYC, "float32")])
def test_another_cpus_choices_through_the_variable(tmp_path, monkeypatch, cpuinfo, expected):
    from transformer_tf.training.precision import resolve_precision

    monkeypatch.setenv(cpu.CPUINFO_VARIABLE, str(write(tmp_path, cpuinfo)))
    assert resolve_precision("auto")[0] == expected
    assert resolve_precision("float32")[0] == "float32"  # an explicit choice stands


@pytest.mark.parametrize("variable, cpuinfo, machine, library", [
    (None, AVX2_EPYC, "x86_64", "eigen"),         # TensorFlow's default without VNNI
    (None, AVX512_XEON, "x86_64", "onednn"),      # AVX512-VNNI: on by default
    (None, AVX512_BF16_EPYC, "x86_64", "onednn"),
    ("1", AVX2_EPYC, "x86_64", "onednn"),         # the variable decides when set
    ("true", AVX2_EPYC, "x86_64", "onednn"),
    ("0", AVX512_XEON, "x86_64", "eigen"),
    (None, AVX2_EPYC, "aarch64", "onednn")])
def test_matmul_library_follows_tensorflows_rule(tmp_path, variable, cpuinfo, machine,
                                                 library):
    path = tmp_path / "cpuinfo"
    path.write_text(cpuinfo)
    environ = {} if variable is None else {cpu.ONEDNN_VARIABLE: variable}
    assert cpu.matmul_library(environ, path, machine) == library


def test_the_model_name_is_the_first_processors(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9B14\nflags\t: avx2 fma\n\n"
                       "processor\t: 1\nmodel name\t: Other\n")
    assert cpu.cpu_model_name(cpuinfo) == "AMD EPYC 9B14"
    monkeypatch.setenv(cpu.CPUINFO_VARIABLE, str(cpuinfo))  # as read_cpu_flags reads it
    assert cpu.cpu_model_name() == "AMD EPYC 9B14"
    monkeypatch.setattr(cpu.platform, "processor", lambda: "x86_64")
    assert cpu.cpu_model_name(tmp_path / "absent") == "x86_64"


@pytest.mark.parametrize("flags, kind", [
    ("fpu sse2 avx avx2 fma avx512f avx512_bf16 amx_tile amx_bf16", "AMX"),
    ("fpu sse2 avx avx2 fma avx512f avx512_vnni avx512_bf16", "AVX512-BF16"),
    ("fpu sse2 avx avx2 fma avx512f", "AVX-512"),
    ("fpu sse2 avx avx2 fma", "AVX2"),
    ("fpu sse2 avx avx2", "other"),  # AVX2 without FMA
    ("", "other"),
])
def test_cpu_kind_names_the_newest_fast_path_instructions(flags, kind):
    assert cpu.cpu_kind(set(flags.split())) == kind and kind in cpu.CPU_KINDS


@pytest.mark.parametrize("library", ["onednn", "eigen"])
def test_the_other_librarys_setting_selects_it(library):
    """Round trip through TensorFlow's rule: the setting given for the other library makes
    `matmul_library` name that library, whatever the CPU."""
    other, setting = cpu.other_matmul_library(library)
    assert other != library and other in ("onednn", "eigen")
    assert cpu.matmul_library(environ=setting) == other
    with pytest.raises(ValueError, match="matmul library"):
        cpu.other_matmul_library("mkl")
