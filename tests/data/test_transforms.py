"""The `dataset.apply` transforms composed by hand (the entry points are in test_datasets)."""
import pytest
import tensorflow as tf

from transformer_tf.data.bucketing import BucketSpec
from transformer_tf.data.transforms import (
    add_special_tokens,
    bucket_by_length,
    filter_by_length,
    to_model_inputs,
    tokenize,
)


def test_transforms_compose_with_apply(small_tokenizer):
    dataset = tf.data.Dataset.from_tensor_slices(
        {"id": tf.range(3, dtype=tf.int64),
         "source": ["A dog.", "A cat sat.", ""], "target": ["Ein Hund.", "Eine Katze.", "x"]})
    spec = BucketSpec.create(64, 16, min_length=4, growth=2.0)
    batches = list(dataset
                   .apply(tokenize(small_tokenizer, batch_size=2))
                   .apply(add_special_tokens())
                   .apply(filter_by_length(16))
                   .apply(bucket_by_length(spec))
                   .apply(to_model_inputs())
                   .as_numpy_iterator())
    assert sum(labels.shape[0] for _, labels in batches) == 2  # the empty source is dropped


def test_bucketing_rejects_unfiltered_long_pairs(small_tokenizer):
    dataset = tf.data.Dataset.from_tensors({"source": ["word " * 50], "target": ["x"]}).unbatch()
    spec = BucketSpec.create(256, 16)
    dataset = (dataset.apply(tokenize(small_tokenizer))
               .apply(add_special_tokens())
               .apply(bucket_by_length(spec)))
    with pytest.raises(tf.errors.InvalidArgumentError, match="filter_by_length"):
        list(dataset)
