"""Length buckets and token-budget batch sizes (pure Python, no TensorFlow).

A pair whose longer side has L tokens (EOS / BOS included) goes to the first bucket whose
boundary b satisfies L <= b, and is padded to exactly b positions on both sides. Bucket
boundaries grow geometrically (b_{i+1} = max(b_i + 1, ceil(b_i * growth))) from
`min_length` up to `max_length`, which is always the last boundary. So a model sees at most
len(boundaries) distinct [batch, length] shapes per side, and padding inside a bucket wastes
at most a factor `growth` (about 5% on average for growth 1.1).

Per bucket the batch size is the token budget divided by the bucket length, rounded down to
a multiple of `batch_multiple` * `num_replicas` when the quotient is at least that large
(multiples of 8 suit matrix units), else to a multiple of `num_replicas`. Hence

    batch_size * boundary <= tokens_per_batch       (per side, padding counted)

for every bucket, and every batch splits evenly over `num_replicas` replicas. (The last,
partial batch of a bucket at the end of a finite dataset can be smaller; it still fits.)
"""
from __future__ import annotations

import bisect
import dataclasses
import math


def bucket_boundaries(max_length: int, min_length: int = 8, growth: float = 1.1) -> tuple[int, ...]:
    """Geometric bucket upper bounds from `min_length` to `max_length` (inclusive).

    Args:
      max_length: longest sequence (tokens, specials included) any bucket accepts.
      min_length: the first boundary; shorter sequences pad to it.
      growth: ratio between consecutive boundaries (> 1).

    Returns:
      Strictly increasing boundaries; the last is `max_length`.
    """
    if max_length < 1 or min_length < 1:
        raise ValueError(f"max_length and min_length must be positive, got {max_length}, {min_length}")
    if growth <= 1.0:
        raise ValueError(f"growth must exceed 1, got {growth}")
    boundaries = []
    boundary = min(min_length, max_length)
    while boundary < max_length:
        boundaries.append(boundary)
        boundary = max(boundary + 1, math.ceil(boundary * growth))
    boundaries.append(max_length)
    return tuple(boundaries)


def smallest_budget(max_length: int, num_replicas: int = 1) -> int:
    """The smallest tokens_per_batch that `bucket_batch_sizes` accepts for buckets up to
    `max_length`: one sentence of the longest bucket per replica."""
    return max_length * num_replicas


def bucket_batch_sizes(
    boundaries, tokens_per_batch: int, num_replicas: int = 1, batch_multiple: int = 8
) -> tuple[int, ...]:
    """Batch size (sentences) of each bucket under a token budget.

    Args:
      boundaries: bucket lengths (padded positions per sentence and side).
      tokens_per_batch: budget of padded positions per side for one whole batch.
      num_replicas: every batch size is a multiple of this (global batches that
        `experimental_distribute_dataset` splits evenly).
      batch_multiple: preferred granularity of the per-replica batch size (1 disables).

    Raises:
      ValueError: when the budget cannot hold `num_replicas` sentences of some bucket.
    """
    if num_replicas < 1 or batch_multiple < 1:
        raise ValueError("num_replicas and batch_multiple must be positive")
    sizes = []
    for boundary in boundaries:
        fit = tokens_per_batch // boundary
        step = batch_multiple * num_replicas
        size = fit // step * step if fit >= step else fit // num_replicas * num_replicas
        if size == 0:
            raise ValueError(
                f"tokens_per_batch={tokens_per_batch} cannot hold {num_replicas} sentence(s) of "
                f"length {boundary}; raise the budget to at least {boundary * num_replicas} or "
                "lower max_length"
            )
        sizes.append(size)
    return tuple(sizes)


@dataclasses.dataclass(frozen=True)
class BucketSpec:
    """Bucket boundaries with their batch sizes.

    Attributes:
      boundaries: padded length of each bucket (tokens per side).
      batch_sizes: sentences per batch of each bucket.
      tokens_per_batch: the budget the batch sizes were computed for.
    """

    boundaries: tuple[int, ...]
    batch_sizes: tuple[int, ...]
    tokens_per_batch: int

    @classmethod
    def create(
        cls,
        tokens_per_batch: int,
        max_length: int,
        *,
        min_length: int = 8,
        growth: float = 1.1,
        num_replicas: int = 1,
        batch_multiple: int = 8,
    ) -> "BucketSpec":
        boundaries = bucket_boundaries(max_length, min_length, growth)
        sizes = bucket_batch_sizes(boundaries, tokens_per_batch, num_replicas, batch_multiple)
        return cls(tuple(boundaries), tuple(sizes), tokens_per_batch)

    @property
    def max_length(self) -> int:
        return self.boundaries[-1]

    def bucket_of(self, length: int) -> int:
        """Index of the bucket holding a sequence of `length` tokens (<= max_length)."""
        if length > self.max_length:
            raise ValueError(f"length {length} exceeds the largest bucket {self.max_length}")
        return bisect.bisect_left(self.boundaries, length)

    def shapes(self) -> list[tuple[int, int]]:
        """The full-batch shapes [batch, length] the buckets produce (per side)."""
        return list(zip(self.batch_sizes, self.boundaries))
