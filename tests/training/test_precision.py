"""--precision auto (training/precision.py): by the CPU's flags, and by the GPUs' compute
capability where there are GPUs (faked: no GPU here)."""
import pytest
import tensorflow as tf

from transformer_tf.runtime.cpu import cpu_flags
from transformer_tf.training.precision import gpu_precision, resolve_precision


def test_auto_precision_follows_the_cpu(tmp_path):
    with_bf16 = tmp_path / "bf16"
    with_bf16.write_text("processor : 0\nflags : fpu avx2 avx512f avx512_bf16 fma\n")
    without = tmp_path / "plain"
    without.write_text("processor : 0\nflags : fpu avx2 fma\n")
    assert cpu_flags(with_bf16.read_text()) >= {"avx512_bf16", "avx2"}
    assert resolve_precision("auto", with_bf16)[0] == "mixed_bfloat16"
    assert resolve_precision("auto", without)[0] == "float32"
    assert resolve_precision("auto", tmp_path / "missing")[0] == "float32"
    assert resolve_precision("mixed_float16", without) == ("mixed_float16", "as requested")
    with pytest.raises(ValueError, match="precision"):
        resolve_precision("float8")


@pytest.mark.parametrize("capabilities, policy", [
    ([(8, 0)], "mixed_bfloat16"), ([(9, 0), (8, 6)], "mixed_bfloat16"),
    ([(7, 0)], "mixed_float16"), ([(7, 5), (8, 0)], "mixed_float16"),  # the weakest decides
    ([(6, 1)], "float32"), ([None], "float32"), ([(8, 0), None], "float32")])
def test_auto_precision_on_gpus_follows_the_weakest_tensor_cores(capabilities, policy):
    assert gpu_precision(capabilities)[0] == policy


def test_auto_precision_asks_the_gpus_when_there_are_some(monkeypatch):
    from transformer_tf.training import precision

    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: ["GPU:0", "GPU:1"] if kind == "GPU" else [])
    monkeypatch.setattr(precision, "_gpu_capabilities", lambda gpus: [(7, 0)] * len(gpus))
    assert resolve_precision("auto")[0] == "mixed_float16"
