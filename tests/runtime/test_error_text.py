"""The line of an error that says what went wrong (runtime/error_text.py), on the texts
TensorFlow 2.21 gives for a graph's and an eager op's errors (copied from real runs)."""
import pytest

from transformer_tf.runtime.error_text import summary

GRAPH_GATHER = ('Graph execution error:\n\nDetected at node GatherV2 defined at (most recent '
                'call last):\n  File "<string>", line 6, in <module>\n\n  File "<string>", '
                'line 5, in f\n\nindices = 10 is not in [0, 2)\n\t [[{{node GatherV2}}]] '
                '[Op:__inference_f_8]')
EAGER_GATHER = ('{{function_node __wrapped__GatherV2_device_/job:localhost/replica:0/task:0/'
                'device:CPU:0}} indices = 10 is not in [0, 2) [Op:GatherV2] name: ')
GRAPH_OOM = ('Graph execution error:\n\nDetected at node random_normal/RandomStandardNormal '
             'defined at (most recent call last):\n  File "<string>", line 6, in <module>\n\n'
             '  File "<string>", line 5, in f\n\nOOM when allocating tensor with '
             'shape[100000000] and type float on /job:localhost/replica:0/task:0/device:CPU:0 '
             'by allocator bfc_cpu_allocator_for_gpu\n\t [[{{node random_normal/'
             'RandomStandardNormal}}]]\nHint: If you want to see a list of allocated tensors '
             'when OOM happens, add report_tensor_allocations_upon_oom to RunOptions for '
             'current allocation info.\n [Op:__inference_f_13]')


@pytest.mark.parametrize("text, expected", [
    (GRAPH_GATHER, "indices = 10 is not in [0, 2)"),
    (EAGER_GATHER, "indices = 10 is not in [0, 2)"),
    (GRAPH_OOM, "OOM when allocating tensor with shape[100000000] and type float"),
    ("runs/x/checkpoints/ckpt-3: truncated\nmore detail", "runs/x/checkpoints/ckpt-3: truncated"),
])
def test_the_ops_own_message_without_its_framing(text, expected):
    assert summary(text) == expected


def test_an_exception_gives_its_message_or_its_type():
    class Fake(Exception):
        message = GRAPH_GATHER

    assert summary(Fake()) == "indices = 10 is not in [0, 2)"
    assert summary(ValueError("bad value\nsecond line")) == "bad value"
    assert summary(RuntimeError("")) == "RuntimeError"
    assert summary(RuntimeError("Graph execution error:\n\n")) == "RuntimeError"
