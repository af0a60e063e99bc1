"""The dataset entry points: token budgets, every kept pair exactly once, conventions,
evaluation order."""
import logging

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID
from transformer_tf.data import bpe
from transformer_tf.data.bucketing import BucketSpec, bucket_boundaries
from transformer_tf.data.datasets import make_evaluation_dataset, make_training_dataset
from transformer_tf.data.text_lines import LineCountMismatchError, iter_lines
from transformer_tf.data.transforms import DropCounter

BUDGET = 512
MAX_LENGTH = 24


@pytest.fixture(scope="module")
def train_ids(small_prepared):
    """Python-side sentencepiece ids of the prepared training pairs, by line number."""
    processor = bpe.python_processor(small_prepared.tokenizer.model_proto)
    files = small_prepared.files("train")
    return (processor.encode(list(iter_lines(files.source))),
            processor.encode(list(iter_lines(files.target))))


def expected_kept(train_ids, max_length):
    sources, targets = train_ids
    kept, dropped = set(), 0
    for index, (s, t) in enumerate(zip(sources, targets)):
        if s and t and len(s) + 1 <= max_length and len(t) + 1 <= max_length:
            kept.add(index)
        else:
            dropped += 1
    return kept, dropped


def test_every_kept_pair_once_and_no_batch_over_budget(small_prepared, train_ids):
    counter = DropCounter()
    dataset = make_training_dataset(
        small_prepared, "train", tokens_per_batch=BUDGET, max_length=MAX_LENGTH, seed=3,
        drop_counter=counter, return_dict=True)
    spec = BucketSpec.create(BUDGET, MAX_LENGTH)
    kept, dropped = expected_kept(train_ids, MAX_LENGTH)
    assert 0 < dropped < len(train_ids[0]) // 2  # the test exercises the length filter
    seen = []
    sources, targets = train_ids
    for batch in dataset.as_numpy_iterator():
        batch_size, length = batch["source"].shape
        for key in ("source", "target_input", "labels"):
            assert batch[key].shape == (batch_size, length) and batch[key].dtype == np.int32
        assert batch_size * length <= BUDGET  # padded positions counted, each side
        bucket = spec.boundaries.index(length)  # padded exactly to a bucket boundary
        assert batch_size <= spec.batch_sizes[bucket]
        lengths = np.maximum((batch["source"] != PAD_ID).sum(1), (batch["labels"] != PAD_ID).sum(1))
        assert (lengths <= length).all() and (bucket == 0 or (lengths > spec.boundaries[bucket - 1]).all())
        for row, example_id in enumerate(batch["id"]):
            s, t = sources[example_id], targets[example_id]
            np.testing.assert_array_equal(
                batch["source"][row], s + [EOS_ID] + [PAD_ID] * (length - len(s) - 1))
            np.testing.assert_array_equal(
                batch["target_input"][row], [BOS_ID] + t + [PAD_ID] * (length - len(t) - 1))
            np.testing.assert_array_equal(
                batch["labels"][row], t + [EOS_ID] + [PAD_ID] * (length - len(t) - 1))
        seen.extend(batch["id"].tolist())
    assert len(seen) == len(set(seen))  # nothing twice
    assert set(seen) == kept  # every kept pair
    assert counter.result() == {"empty": 0, "too_long": dropped}


def test_model_inputs_structure(small_prepared):
    dataset = make_training_dataset(small_prepared, tokens_per_batch=BUDGET,
                                    max_length=MAX_LENGTH, seed=1)
    (source_spec, target_spec), label_spec = dataset.element_spec
    for spec in (source_spec, target_spec, label_spec):
        assert spec.dtype == tf.int32 and spec.shape.as_list() == [None, None]
    (source, target_input), labels = next(iter(dataset))
    for row_input, row_labels, row_source in zip(target_input.numpy(), labels.numpy(),
                                                  source.numpy()):
        tokens = row_labels[row_labels != PAD_ID]
        assert tokens[-1] == EOS_ID
        assert row_input[row_input != PAD_ID].tolist() == [BOS_ID] + tokens[:-1].tolist()
        assert row_source[row_source != PAD_ID][-1] == EOS_ID
    assert source.shape[0] == labels.shape[0]


def _ids_of_first_batches(dataset, n=5):
    return [batch["id"].tolist() for batch in dataset.take(n).as_numpy_iterator()]


def test_shuffle_is_seeded(small_prepared):
    def make(seed):
        return make_training_dataset(small_prepared, tokens_per_batch=BUDGET,
                                     max_length=MAX_LENGTH, seed=seed, return_dict=True,
                                     shuffle_buffer=1000)

    first = _ids_of_first_batches(make(11))
    assert first == _ids_of_first_batches(make(11))
    assert first != _ids_of_first_batches(make(12))
    unshuffled = make_training_dataset(small_prepared, tokens_per_batch=BUDGET,
                                       max_length=MAX_LENGTH, shuffle=False,
                                       return_dict=True)
    for ids in _ids_of_first_batches(unshuffled, 3):
        assert ids == sorted(ids)  # file order within each bucket


def test_repeat_gives_full_batches_divisible_by_replicas(small_prepared):
    replicas = 4
    dataset = make_training_dataset(
        small_prepared, tokens_per_batch=4 * BUDGET, max_length=MAX_LENGTH, seed=5, repeat=True,
        num_replicas=replicas, return_dict=True)
    spec = BucketSpec.create(4 * BUDGET, MAX_LENGTH, num_replicas=replicas)
    total = 0
    for batch in dataset.take(60).as_numpy_iterator():  # more than one epoch of 4,000 pairs
        batch_size, length = batch["source"].shape
        assert batch_size == spec.batch_sizes[spec.boundaries.index(length)]
        assert batch_size % replicas == 0
        total += batch_size
    assert total > small_prepared.num_examples("train")


def test_per_replica_budget_with_input_context(small_prepared):
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1,
                                         num_replicas_in_sync=4)
    dataset = make_training_dataset(
        small_prepared, tokens_per_batch=4 * 256, max_length=MAX_LENGTH, seed=5,
        input_context=context, return_dict=True)
    ids = []
    for batch in dataset.as_numpy_iterator():
        assert batch["source"].size <= 256  # per-replica budget
        ids.extend(batch["id"].tolist())
    assert ids and all(i % 2 == 1 for i in ids)  # this pipeline's shard only


def test_files_input_drops_and_counts_empty_and_over_long_pairs(tmp_path, small_tokenizer):
    source = ["A dog.", "", "A cat.", "   ", "word " * 40, "A bird."]
    target = ["Ein Hund.", "Leer.", "", "Auch leer", "Ein Wort.", "Ein Vogel."]
    (tmp_path / "s.en").write_text("\n".join(source) + "\n")
    (tmp_path / "t.de").write_text("\n".join(target) + "\n")
    counter = DropCounter()
    dataset = make_training_dataset(
        (tmp_path / "s.en", tmp_path / "t.de"), tokenizer=small_tokenizer,
        tokens_per_batch=256, max_length=16, shuffle=False, drop_counter=counter,
        return_dict=True)
    ids = sorted(i for batch in dataset.as_numpy_iterator() for i in batch["id"])
    assert ids == [0, 5]
    assert counter.result() == {"empty": 3, "too_long": 1}
    assert counter.log()["too_long"] == 1


def test_mismatched_files_fail_before_any_batch(tmp_path, small_tokenizer):
    (tmp_path / "s.en").write_text("a\nb\nc\n")
    (tmp_path / "t.de").write_text("a\nb\n")
    with pytest.raises(LineCountMismatchError, match="3 lines.*2 lines"):
        make_training_dataset((tmp_path / "s.en", tmp_path / "t.de"),
                              tokenizer=small_tokenizer)


def test_file_input_needs_a_tokenizer(tmp_path):
    with pytest.raises(ValueError, match="tokenizer"):
        make_training_dataset((tmp_path / "s.en", tmp_path / "t.de"))


def test_evaluation_dataset_keeps_order_and_truncates(small_prepared, caplog):
    files = small_prepared.files("valid")
    processor = bpe.python_processor(small_prepared.tokenizer.model_proto)
    sources = processor.encode(list(iter_lines(files.source)))
    targets = processor.encode(list(iter_lines(files.target)))
    max_length = 16
    with caplog.at_level(logging.WARNING, logger="transformer_tf.data.datasets"):
        dataset = make_evaluation_dataset(small_prepared, "valid", batch_size=32,
                                          max_length=max_length, return_dict=True)
    over = sum(len(s) + 1 > max_length for s in sources)
    assert over > 0 and f"{over} source sentences" in caplog.text
    position = 0
    boundaries = bucket_boundaries(max_length)
    for batch in dataset.as_numpy_iterator():
        assert batch["source"].shape[1] in boundaries and batch["labels"].shape[1] in boundaries
        for row, example_id in enumerate(batch["id"]):
            assert example_id == position
            want_source = (sources[position][: max_length - 1] + [EOS_ID])
            want_labels = (targets[position][: max_length - 1] + [EOS_ID])
            got_source = batch["source"][row][batch["source"][row] != PAD_ID].tolist()
            got_labels = batch["labels"][row][batch["labels"][row] != PAD_ID].tolist()
            assert got_source == want_source and got_labels == want_labels
            assert batch["target_input"][row][0] == BOS_ID
            position += 1
    assert position == small_prepared.num_examples("valid") == 300

    (source, target_input), labels = next(iter(
        make_evaluation_dataset(small_prepared, "valid", batch_size=8)))
    assert source.shape[0] == 8 and target_input.shape == labels.shape
