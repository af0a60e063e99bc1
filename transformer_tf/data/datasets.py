"""The two dataset entry points: token-budget training batches, ordered evaluation batches.

`make_training_dataset` and `make_evaluation_dataset` compose the transforms of
`transformer_tf.data.transforms` over a prepared directory (`prepared_reader.load_prepared`) or
a pair of text files; their elements follow the conventions described there.

Token budget and replicas: `tokens_per_batch` is GLOBAL, per side, counting padding: a
batch of the bucket of length b holds batch_size sentences with batch_size * b <=
tokens_per_batch source positions (and as many target positions). With
`strategy.experimental_distribute_dataset` (the usual `model.fit` path under
MirroredStrategy), pass `num_replicas=strategy.num_replicas_in_sync` so every global
batch size is a multiple of it; each replica then sees tokens_per_batch / num_replicas
positions. With `strategy.distribute_datasets_from_function`, pass the InputContext as
`input_context`: the dataset is sharded per input pipeline and batched per replica with
`input_context.get_per_replica_batch_size(tokens_per_batch)` tokens. That second form is
the one to use under MultiWorkerMirroredStrategy: it shards by example before shuffling,
instead of relying on tf.data auto-sharding of the (single-file) text input.

Shapes: with `repeat=True` every batch is full, so a training run sees at most
len(boundaries) distinct [batch, length] shapes (27 for max_length 128, growth 1.1); a
finite pass adds at most one smaller final batch per bucket.
"""
from __future__ import annotations

import logging

import tensorflow as tf

from transformer_tf.data.bucketing import BucketSpec, bucket_boundaries
from transformer_tf.data.corpora import ParallelFiles
from transformer_tf.data.length_filter import SPECIAL_TOKENS_PER_SIDE
from transformer_tf.data.text_lines import iter_lines
from transformer_tf.data.transforms import (
    AUTOTUNE,
    DropCounter,
    add_special_tokens,
    bucket_by_length,
    pad_to_boundaries,
    text_pairs,
    to_model_inputs,
    tokenize,
    tokenize_and_filter,
    truncate,
)

logger = logging.getLogger(__name__)


def _resolve(data, split, tokenizer):
    """(ParallelFiles, tokenizer, is_prepared) from a PreparedData or a file pair."""
    if hasattr(data, "files") and hasattr(data, "tokenizer"):  # PreparedData
        return data.files(split), tokenizer or data.tokenizer, True
    if tokenizer is None:
        raise ValueError("a tokenizer is needed when `data` is a file pair, not prepared data")
    files = data if isinstance(data, ParallelFiles) else ParallelFiles(*data)
    return files, tokenizer, False


def make_training_dataset(
    data,
    split: str = "train",
    *,
    tokenizer=None,
    tokens_per_batch: int = 4096,
    max_length: int = 128,
    num_replicas: int = 1,
    batch_multiple: int = 8,
    shuffle: bool = True,
    seed: int | None = None,
    shuffle_buffer: int = 100_000,
    batch_shuffle_buffer: int = 64,
    repeat: bool = False,
    bucket_growth: float = 1.1,
    min_bucket_length: int = 8,
    input_context: tf.distribute.InputContext | None = None,
    drop_counter: DropCounter | None = None,
    validate: bool | None = None,
    return_dict: bool = False,
    prefetch: bool = True,
    bpe_dropout: float = 0.0,
) -> tf.data.Dataset:
    """Token-budget batches of (source, target) pairs for training.

    Args:
      data: a PreparedData (from `load_prepared`) or a (source_path, target_path) pair /
        ParallelFiles (then `tokenizer` is required).
      split: split of a PreparedData ("train", "valid", "test"); ignored for file pairs.
      tokenizer: a BpeTokenizer; default: the prepared data's.
      tokens_per_batch: GLOBAL budget of padded positions per side and batch (see module
        doc); per replica it is tokens_per_batch / num_replicas.
      max_length: longest side kept, in tokens including EOS/BOS; also the last bucket.
      num_replicas: global batch sizes are multiples of this (use
        strategy.num_replicas_in_sync with experimental_distribute_dataset).
      batch_multiple: per-replica batch sizes are rounded down to a multiple of this
        where the budget allows (8 by default; 1 disables).
      shuffle: shuffle examples (buffer `shuffle_buffer`) before bucketing and batches
        (buffer `batch_shuffle_buffer`) after it; reshuffled every epoch.
      seed: shuffle seed (None: nondeterministic order).
      repeat: repeat forever (epochs run into each other; no partial batches in between).
      bucket_growth, min_bucket_length: geometric bucket boundaries (see bucketing.py).
      input_context: from `strategy.distribute_datasets_from_function`: shard by input
        pipeline and batch per replica.
      drop_counter: a DropCounter to count empty / over-long pairs dropped.
      validate: check line counts and UTF-8 first (default: True for file pairs, False for
        prepared data, which was checked when prepared).
      return_dict: yield the dict batches {"id": int64 [B], "source": [B, b],
        "target_input": [B, b], "labels": [B, b]} instead of model inputs.
      prefetch: end with prefetch(AUTOTUNE).
      bpe_dropout: probability of skipping each BPE merge, both sides, a new draw every
        time a pair is read (`TrainingConfig.bpe_dropout`); 0: the model's segmentation.

    Returns:
      Dataset of ((source_ids int32 [B, b], target_input_ids int32 [B, b]),
      labels int32 [B, b]), b a bucket boundary, B <= its batch size; over one pass
      (repeat=False) every kept pair appears exactly once (with bpe_dropout, every pair
      whose sampled segmentation fits max_length).
    """
    files, tokenizer, prepared = _resolve(data, split, tokenizer)
    if validate if validate is not None else not prepared:
        files.check()
    replicas = num_replicas
    budget = tokens_per_batch
    dataset = text_pairs(files)
    if input_context is not None:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        budget = input_context.get_per_replica_batch_size(tokens_per_batch)
        replicas = 1
    spec = BucketSpec.create(budget, max_length, min_length=min_bucket_length,
                             growth=bucket_growth, num_replicas=replicas,
                             batch_multiple=batch_multiple)
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    dataset = (dataset.apply(tokenize_and_filter(tokenizer, max_length, counter=drop_counter,
                                                 bpe_dropout=bpe_dropout))
               .apply(bucket_by_length(spec)))
    if shuffle and batch_shuffle_buffer > 1:
        dataset = dataset.shuffle(batch_shuffle_buffer,
                                  seed=None if seed is None else seed + 1,
                                  reshuffle_each_iteration=True)
    if not return_dict:
        dataset = dataset.apply(to_model_inputs())
    if prefetch:
        dataset = dataset.prefetch(AUTOTUNE)
    return dataset


def count_over_length(tokenizer, texts, max_length: int, batch_size: int = 4096) -> int:
    """How many of `texts` (str/bytes) exceed max_length tokens once EOS/BOS is added."""
    over = 0
    for start in range(0, len(texts), batch_size):
        pieces = tokenizer.tokenize(tf.constant(texts[start:start + batch_size]))
        lengths = pieces.row_lengths() + SPECIAL_TOKENS_PER_SIDE
        over += int(tf.reduce_sum(tf.cast(lengths > max_length, tf.int32)))
    return over


def _report_truncation(tokenizer, files, max_length):
    for side, path in zip(("source", "target"), files):
        if path is None:
            continue
        over = count_over_length(tokenizer, list(iter_lines(path)), max_length)
        if over:
            logger.warning("%d %s sentences of %s exceed %d tokens and are truncated",
                           over, side, path, max_length)


def make_evaluation_dataset(
    data,
    split: str = "valid",
    *,
    tokenizer=None,
    batch_size: int = 64,
    max_length: int = 256,
    bucket_growth: float = 1.1,
    min_bucket_length: int = 8,
    report_truncation: bool = True,
    return_dict: bool = False,
    prefetch: bool = True,
) -> tf.data.Dataset:
    """Pairs in file order, nothing dropped, for validation loss or scoring.

    Sides longer than `max_length` tokens (specials included) are truncated to it, keeping
    the final EOS of source and labels; with `report_truncation` the number truncated is
    counted eagerly beforehand and logged as a warning. Empty sentences are kept (source
    = [EOS]). Batches hold `batch_size` pairs (the last one fewer); each side is padded to
    the first bucket boundary >= its longest sentence, so shapes stay bounded.

    Returns:
      Dataset of ((source_ids int32 [B, S], target_input_ids int32 [B, T]), labels int32
      [B, T]); with `return_dict`, dicts {"id": int64 [B], "source", "target_input",
      "labels"}. Concatenating the batches gives the split's pairs in order.
    """
    files, tokenizer, _ = _resolve(data, split, tokenizer)
    files.check()
    if report_truncation:
        _report_truncation(tokenizer, files, max_length)
    boundaries = bucket_boundaries(max_length, min_bucket_length, bucket_growth)
    dataset = (text_pairs(files)
               .apply(tokenize(tokenizer))
               .apply(add_special_tokens())
               .apply(truncate(max_length))
               .padded_batch(batch_size)
               .apply(pad_to_boundaries(boundaries)))
    if not return_dict:
        dataset = dataset.apply(to_model_inputs())
    if prefetch:
        dataset = dataset.prefetch(AUTOTUNE)
    return dataset
