"""Bucket boundaries and token-budget batch sizes (pure arithmetic)."""
import pytest

from transformer_tf.data.bucketing import BucketSpec, bucket_batch_sizes, bucket_boundaries


def test_boundaries_grow_geometrically_and_end_at_max_length():
    boundaries = bucket_boundaries(128, min_length=8, growth=1.1)
    assert boundaries[0] == 8 and boundaries[-1] == 128
    assert all(a < b for a, b in zip(boundaries, boundaries[1:]))
    for a, b in zip(boundaries[:-2], boundaries[1:-1]):
        assert b == max(a + 1, -(-a * 11 // 10))  # ceil(a * 1.1), at least a + 1
    assert len(bucket_boundaries(256, 8, 1.1)) < 45  # bounded number of shapes


def test_boundaries_edge_cases():
    assert bucket_boundaries(5, min_length=8) == (5,)
    assert bucket_boundaries(8, min_length=8) == (8,)
    with pytest.raises(ValueError):
        bucket_boundaries(10, growth=1.0)


@pytest.mark.parametrize("replicas", [1, 2, 3, 8])
def test_batch_sizes_respect_budget_and_replica_multiples(replicas):
    boundaries = bucket_boundaries(128)
    sizes = bucket_batch_sizes(boundaries, 4096, num_replicas=replicas)
    for boundary, size in zip(boundaries, sizes):
        assert size * boundary <= 4096
        assert size % replicas == 0 and size > 0
        if 4096 // boundary >= 8 * replicas:
            assert size % (8 * replicas) == 0
            assert (size + 8 * replicas) * boundary > 4096  # largest such multiple
        else:
            assert (size + replicas) * boundary > 4096


def test_budget_too_small_for_replicas_is_an_error():
    with pytest.raises(ValueError, match="cannot hold 4 sentence"):
        bucket_batch_sizes((8, 100), 300, num_replicas=4)


def test_spec_bucket_of_and_shapes():
    spec = BucketSpec.create(1024, 64, min_length=8, growth=1.25)
    assert spec.boundaries == (8, 10, 13, 17, 22, 28, 35, 44, 55, 64)
    assert spec.bucket_of(1) == 0 and spec.bucket_of(8) == 0 and spec.bucket_of(9) == 1
    assert spec.bucket_of(64) == len(spec.boundaries) - 1
    with pytest.raises(ValueError):
        spec.bucket_of(65)
    assert spec.shapes()[0] == (128, 8) and spec.shapes()[-1] == (16, 64)
