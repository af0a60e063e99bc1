"""The bound on TensorFlow's CPU memory that the training commands set before TensorFlow
loads (runtime/memory_bound.py): read from /proc/meminfo's MemAvailable, a user's own
setting left alone, and in a fresh process an allocation beyond it raises the
out-of-memory error that training answers by lowering its token budget
(tests/training/test_out_of_memory.py), named by the allocation that failed."""
import os
import subprocess
import sys


from transformer_tf.runtime import memory_bound

MEMINFO = "MemTotal:       24576000 kB\nMemFree:         1000 kB\nMemAvailable:   {} kB\n"


def meminfo(tmp_path, available_kb) -> str:
    path = tmp_path / "meminfo"
    path.write_text(MEMINFO.format(available_kb))
    return str(path)


def test_the_available_memory_is_read_in_mib(tmp_path):
    assert memory_bound.available_memory_mb(meminfo(tmp_path, 21_504_000)) == 21_000
    (tmp_path / "other").write_text("MemTotal: 100 kB\n")
    assert memory_bound.available_memory_mb(tmp_path / "other") is None
    assert memory_bound.available_memory_mb(tmp_path / "absent") is None


def test_the_pool_leaves_a_tenth_and_what_lies_outside_it():
    # 21,000 MiB free: 90% is 18,900, less 2,048 MiB for the interpreter and graphs.
    assert memory_bound.pool_limit_mb(21_000) == 16_852
    assert memory_bound.pool_limit_mb(2_000) == 512  # never below the smallest pool


def test_both_variables_are_set_unless_the_user_chose(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "tensorflow")  # as a command before it imports it
    path = meminfo(tmp_path, 21_504_000)
    environ = {}
    assert memory_bound.bound_cpu_memory_for_training(environ, path) == 16_852
    assert environ == {"TF_CPU_ALLOCATOR_USE_BFC": "true",
                       "TF_CPU_BFC_MEM_LIMIT_IN_MB": "16852"}
    for users in ({"TF_CPU_ALLOCATOR_USE_BFC": "false"},
                  {"TF_CPU_ALLOCATOR_USE_BFC": "true", "TF_CPU_BFC_MEM_LIMIT_IN_MB": "900"}):
        environ = dict(users)
        assert memory_bound.bound_cpu_memory_for_training(environ, path) is None
        assert environ == users
    assert memory_bound.bound_cpu_memory_for_training({}, tmp_path / "absent") is None


def test_nothing_is_set_once_tensorflow_is_loaded(tmp_path):
    import tensorflow  # noqa: F401  (it has read its variables)

    environ = {}
    assert memory_bound.bound_cpu_memory_for_training(
        environ, meminfo(tmp_path, 21_504_000)) is None
    assert environ == {}


BEYOND_THE_POOL = """
from transformer_tf.runtime.memory_bound import bound_cpu_memory_for_training
limit = bound_cpu_memory_for_training()
import tensorflow as tf
from transformer_tf.runtime.error_text import summary
small = tf.zeros([64 * 1024 * 1024 // 4])  # 64 MiB: inside the pool
@tf.function
def allocate(n):
    return tf.reduce_sum(tf.random.normal([n]))
try:
    allocate(tf.constant((limit + 64) * 1024 * 1024 // 4))
    print("no error")
except tf.errors.ResourceExhaustedError as error:
    print(limit, summary(error))
"""


def test_an_allocation_beyond_the_bound_raises_out_of_memory(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in (memory_bound.BFC_VARIABLE, memory_bound.LIMIT_VARIABLE)}
    env[memory_bound.MEMINFO_VARIABLE] = meminfo(tmp_path, 2_000 * 1024)  # a 512 MiB pool
    run = subprocess.run([sys.executable, "-c", BEYOND_THE_POOL], capture_output=True,
                         text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == (
        "512 OOM when allocating tensor with shape[150994944] and type float"), run.stdout
