"""Weights laid out once for fast inference matrix products on CPU.

TensorFlow's CPU matrix product (Eigen) runs at about half speed when the rows of its
right-hand matrix are a multiple of 512 elements long ([128, 256] x [256, 1024] against
[128, 256] x [256, 1040], one thread; 768 or 1280 wide kernels are fast). It is the
single-threaded product's case (a search per core, as with lanes, or one core); a
product split over two threads loses little. A kernel of such a width is therefore
copied once, before a
search or an inference pass, into one with `PADDING` more zero columns (its bias with
as many zeros); the product then has as many more columns, which `dense` drops, or
which the next product of a pair consumes through as many zero rows of its own kernel
(`pad_input_rows`; the feed-forward network's two products). The extra columns hold
exact zeros, so only the order in which a kernel's sums are rounded can differ.

The layout applies only where it was measured to pay: `PADDING_PAYS` lists the (matrix
library, CPU kind) pairs (`runtime.cpu.matmul_library`, `runtime.cpu.cpu_kind`; the
table of docs/performance.md says where each was measured). GPUs, oneDNN CPUs and CPU
kinds not measured keep their kernels as they are (`layout_applies`).
$TRANSFORMER_TF_KERNEL_PADDING ("1" on, "0" off) overrides the table, to measure it on
another CPU (bench/run_all.py's serving section pairs the two in one run).

Training keeps the plain kernels: the copy would be one more op per step on every
device, and the re-laid kernels are only ever read, never trained.
"""
from __future__ import annotations

import functools
import os

import tensorflow as tf

from transformer_tf.runtime.cpu import cpu_kind, matmul_library, read_cpu_flags

# Widths that are multiples of this many elements are padded.
SLOW_WIDTH_MULTIPLE = 512
# Zero columns added to such a width (64 bytes in float32: one cache line).
PADDING = 16
# (matrix library, CPU kind) where the padding was measured to pay.
PADDING_PAYS = {("eigen", "AVX2")}
PADDING_VARIABLE = "TRANSFORMER_TF_KERNEL_PADDING"


@functools.cache
def _padding_pays() -> bool:
    value = os.environ.get(PADDING_VARIABLE, "").strip()
    if value in ("0", "1"):
        return value == "1"
    if tf.config.list_physical_devices("GPU"):
        return False
    return (matmul_library(), cpu_kind(read_cpu_flags())) in PADDING_PAYS


# Plain Python when traced: AutoGraph would call the cache's wrapper with itself as an
# argument.
@tf.autograph.experimental.do_not_convert
def layout_applies() -> bool:
    """True where the padding pays: $TRANSFORMER_TF_KERNEL_PADDING when set ("1" / "0"),
    else no GPU is visible and (`matmul_library()`, this CPU's kind) is in PADDING_PAYS
    (decided once per process; `layout_applies.cache_clear()` decides again)."""
    return _padding_pays()


layout_applies.cache_clear = _padding_pays.cache_clear


def laid_out_width(width: int) -> int:
    """The number of columns a kernel `width` columns wide gets: width + PADDING for a
    multiple of SLOW_WIDTH_MULTIPLE where `layout_applies`, else `width`."""
    if width % SLOW_WIDTH_MULTIPLE == 0 and layout_applies():
        return width + PADDING
    return width


def pad_output_columns(kernel, bias=None):
    """(kernel [d_in, d_out'], bias [d_out'] or None): `kernel` [d_in, d_out] and `bias`
    [d_out] with zero columns appended up to d_out' = laid_out_width(d_out)."""
    width = kernel.shape[1]
    extra = laid_out_width(width) - width
    if extra == 0:
        return kernel, bias
    kernel = tf.pad(kernel, [[0, 0], [0, extra]])
    return kernel, None if bias is None else tf.pad(bias, [[0, extra]])


def pad_input_rows(kernel, rows: int):
    """`kernel` [d_in, d_out] with zero rows appended up to `rows`: the kernel of a product
    whose input comes with the zero columns of `pad_output_columns`."""
    return tf.pad(kernel, [[0, rows - kernel.shape[0]], [0, 0]])


def dense(x, kernel, bias, width: int, activation=None):
    """x [rows, d_in] @ kernel (+ bias, then `activation`), the first `width` columns:
    [rows, width]. `kernel` [d_in, width or more] (from `pad_output_columns`)."""
    y = tf.matmul(x, kernel)
    if bias is not None:
        y = tf.nn.bias_add(y, bias)
    if activation is not None:
        y = activation(y)
    return y if kernel.shape[1] == width else y[:, :width]
