"""tf.data input pipelines: tokenize in the graph, filter by length, bucket with token budgets.

Conventions (the model's inputs; all ids int32, padded with PAD_ID = 0):

    source_ids        = BPE(source) + [EOS]          [B, S]
    target_input_ids  = [BOS] + BPE(target)          [B, T]
    labels            = BPE(target) + [EOS]          [B, T]

A training element is `((source_ids, target_input_ids), labels)`, what `model.fit`
expects; positions where labels == PAD_ID are padding and must be masked out of the loss
and metrics. "Length" always counts these special tokens: a pair fits `max_length` when
len(source_ids) <= max_length and len(labels) <= max_length.

The building blocks are functions returning `dataset -> dataset` transforms, for
`dataset.apply` (OpenNMT-tf style). They work on dict elements
{"id": int64, "source": ..., "target": ...} so that extra keys (the example id) ride along:

    text_pairs(files)                 {"id", "source": tf.string, "target": tf.string}
    .apply(tokenize(tokenizer))       {"id", "source": int32 [None], "target": int32 [None]}
    .apply(add_special_tokens())      {"id", "source", "target_input", "labels"}
    .apply(filter_by_length(L))       drops empty / over-long pairs (optionally counted)
                                      (tokenize_and_filter fuses these three, per batch)
    .apply(bucket_by_length(spec))    padded batches, {"id": [B], "source": [B, b], ...}
    .apply(to_model_inputs())         ((source, target_input), labels)

`make_training_dataset` and `make_evaluation_dataset` compose them.

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
from typing import Callable

import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID
from transformer_tf.data.bucketing import BucketSpec, bucket_boundaries
from transformer_tf.data.corpora import ParallelFiles
from transformer_tf.data.length_filter import SPECIAL_TOKENS_PER_SIDE, drop_reasons
from transformer_tf.data.textio import is_gzip_path

logger = logging.getLogger(__name__)

Transform = Callable[[tf.data.Dataset], tf.data.Dataset]
SEQUENCE_KEYS = ("source", "target_input", "labels")
AUTOTUNE = tf.data.AUTOTUNE


# --------------------------------------------------------------------------- reading text


def _lines(path) -> tf.data.Dataset:
    return tf.data.TextLineDataset(str(path), compression_type="GZIP" if is_gzip_path(path) else "")


def text_pairs(files) -> tf.data.Dataset:
    """Line pairs of two aligned text files (optionally .gz), in file order.

    Args:
      files: ParallelFiles or a (source_path, target_path) pair.

    Returns:
      Dataset of {"id": int64 [] (0-based line number), "source": tf.string [],
      "target": tf.string []}.
    """
    source, target = files
    lines = tf.data.Dataset.zip(_lines(source), _lines(target))
    return lines.enumerate().map(
        lambda index, pair: {"id": index, "source": pair[0], "target": pair[1]}
    )


# ------------------------------------------------------------------------------ transforms


def tokenize(tokenizer, batch_size: int = 1024, num_parallel_calls=AUTOTUNE,
             keys=("source", "target")) -> Transform:
    """Replaces the strings under `keys` by their BPE ids (int32 [None], no specials).

    Tokenizes `batch_size` sentences per op call (much faster than one at a time) and
    unbatches again, so element order and count are unchanged.
    """

    def tokenize_batch(batch):
        out = dict(batch)
        for key in keys:
            if key in batch:
                out[key] = tokenizer.tokenize(batch[key])
        return out

    def apply(dataset):
        return (dataset.batch(batch_size)
                .map(tokenize_batch, num_parallel_calls=num_parallel_calls, deterministic=True)
                .unbatch())

    return apply


def add_special_tokens() -> Transform:
    """{"source", "target"} token ids -> {"source": src+EOS, "target_input": BOS+tgt,
    "labels": tgt+EOS}; a pair without "target" only gets source + EOS."""
    eos = tf.constant([EOS_ID], tf.int32)
    bos = tf.constant([BOS_ID], tf.int32)

    def add(example):
        out = {k: v for k, v in example.items() if k not in ("source", "target")}
        out["source"] = tf.concat([example["source"], eos], axis=0)
        if "target" in example:
            out["target_input"] = tf.concat([bos, example["target"]], axis=0)
            out["labels"] = tf.concat([example["target"], eos], axis=0)
        return out

    return lambda dataset: dataset.map(add, num_parallel_calls=AUTOTUNE, deterministic=True)


class DropCounter(tf.Module):
    """Counts what `filter_by_length` drops (int64 tf.Variables, updated in the pipeline).

    Create it eagerly, outside any `strategy.scope()`. The counts grow with every element
    the filter sees, so after k passes over a dataset they are k times one epoch's.
    """

    def __init__(self, name: str | None = "drop_counter"):
        super().__init__(name=name)
        self.empty = tf.Variable(0, dtype=tf.int64, trainable=False, name="empty")
        self.too_long = tf.Variable(0, dtype=tf.int64, trainable=False, name="too_long")

    def result(self) -> dict[str, int]:
        return {"empty": int(self.empty.numpy()), "too_long": int(self.too_long.numpy())}

    def log(self, log: logging.Logger = logger) -> dict[str, int]:
        counts = self.result()
        log.info("length filter dropped %d empty and %d over-long pairs",
                 counts["empty"], counts["too_long"])
        return counts


def filter_by_length(max_length: int, max_target_length: int | None = None,
                     counter: DropCounter | None = None) -> Transform:
    """Drops pairs with an empty side or a side longer than the limit (specials counted).

    Expects the output of `add_special_tokens`; the rule is `length_filter.drop_reasons`
    on len(source) and len(labels). With a `counter`, drops are counted.
    """

    def keep(example):
        empty, too_long = drop_reasons(tf.size(example["source"]), tf.size(example["labels"]),
                                       max_length, max_target_length)
        kept = ~(empty | too_long)
        if counter is None:
            return kept
        updates = [counter.empty.assign_add(tf.cast(empty, tf.int64)),
                   counter.too_long.assign_add(tf.cast(too_long, tf.int64))]
        with tf.control_dependencies(updates):
            return tf.identity(kept)

    return lambda dataset: dataset.filter(keep)


def tokenize_and_filter(tokenizer, max_length: int, max_target_length: int | None = None,
                        counter: DropCounter | None = None, batch_size: int = 1024,
                        num_parallel_calls=AUTOTUNE) -> Transform:
    """tokenize + add_special_tokens + filter_by_length fused, vectorised per batch.

    Same output as the three transforms in a row (string pairs in, kept
    {"id", "source", "target_input", "labels"} out, order kept), but tokenizes, adds the
    specials and drops `batch_size` pairs at a time before unbatching, which is about
    twice as fast as per-element maps and filters.
    """

    def process(batch):
        source = tokenizer.tokenize(batch["source"])
        target = tokenizer.tokenize(batch["target"])
        empty, too_long = drop_reasons(source.row_lengths() + SPECIAL_TOKENS_PER_SIDE,
                                       target.row_lengths() + SPECIAL_TOKENS_PER_SIDE,
                                       max_length, max_target_length)
        keep = ~(empty | too_long)
        updates = []
        if counter is not None:
            updates = [counter.empty.assign_add(tf.math.count_nonzero(empty, dtype=tf.int64)),
                       counter.too_long.assign_add(tf.math.count_nonzero(too_long, dtype=tf.int64))]
        with tf.control_dependencies(updates):
            keep = tf.identity(keep)
        out = {k: tf.boolean_mask(v, keep) for k, v in batch.items()
               if k not in ("source", "target")}
        source = tf.ragged.boolean_mask(source, keep)
        target = tf.ragged.boolean_mask(target, keep)
        kept = tf.shape(out["id"])[0] if "id" in out else source.nrows(out_type=tf.int32)
        eos = tf.fill([kept, 1], tf.constant(EOS_ID, tf.int32))
        bos = tf.fill([kept, 1], tf.constant(BOS_ID, tf.int32))
        out["source"] = tf.concat([source, eos], axis=1)
        out["target_input"] = tf.concat([bos, target], axis=1)
        out["labels"] = tf.concat([target, eos], axis=1)
        return out

    def apply(dataset):
        return (dataset.batch(batch_size)
                .map(process, num_parallel_calls=num_parallel_calls, deterministic=True)
                .unbatch()
                # Unbatched rows are RaggedTensors of ragged rank 0; make them plain tensors
                # (padded_batch accepts only those).
                .map(_as_tensors))

    return apply


def _as_tensors(example):
    return {k: v.flat_values if isinstance(v, tf.RaggedTensor) else v
            for k, v in example.items()}


def _example_length(example) -> tf.Tensor:
    return tf.maximum(tf.size(example["source"]), tf.size(example["labels"]))


def bucket_by_length(spec: BucketSpec) -> Transform:
    """Groups pairs into length buckets and pads every batch to its bucket boundary.

    The bucket of a pair is the first boundary b >= max(len(source), len(labels)); its
    batches hold `spec.batch_sizes[bucket]` pairs (fewer for a bucket's last batch at the
    end of a finite dataset), and "source", "target_input" and "labels" are all padded
    with PAD_ID to [batch, b]. Other keys (e.g. "id") are batched to [batch].

    Pairs must fit `spec.max_length` (apply `filter_by_length` first); a longer one fails
    with an InvalidArgumentError.
    """
    boundaries = tf.constant(spec.boundaries, tf.int32)
    batch_sizes = tf.constant(spec.batch_sizes, tf.int64)

    def key(example):
        length = _example_length(example)
        check = tf.debugging.assert_less_equal(
            length, spec.max_length,
            message="bucket_by_length: a pair exceeds the largest bucket; filter_by_length first")
        with tf.control_dependencies([check]):
            return tf.cast(tf.searchsorted(boundaries, tf.reshape(length, [1]))[0], tf.int64)

    def reduce(bucket, window):
        length = tf.cast(tf.reshape(boundaries[bucket], [1]), tf.int64)
        spec_ = window.element_spec
        padded_shapes = {k: (length if k in SEQUENCE_KEYS else tf.TensorShape([]))
                         for k in spec_}
        padding_values = {k: tf.constant(PAD_ID if k in SEQUENCE_KEYS else 0, spec_[k].dtype)
                          for k in spec_}
        return window.padded_batch(batch_sizes[bucket], padded_shapes=padded_shapes,
                                   padding_values=padding_values)

    return lambda dataset: dataset.group_by_window(
        key_func=key, reduce_func=reduce, window_size_func=lambda bucket: batch_sizes[bucket]
    )


def pad_to_boundaries(boundaries, keys=SEQUENCE_KEYS) -> Transform:
    """Pads each [B, L] tensor under `keys` with PAD_ID to the first boundary >= L, so
    batches padded to their own longest sequence take a bounded set of shapes."""
    table = tf.constant(tuple(boundaries), tf.int32)

    def pad(batch):
        out = dict(batch)
        for k in keys:
            if k in batch:
                length = tf.shape(batch[k])[1]
                boundary = table[tf.searchsorted(table, tf.reshape(length, [1]))[0]]
                out[k] = tf.pad(batch[k], [[0, 0], [0, boundary - length]],
                                constant_values=PAD_ID)
        return out

    return lambda dataset: dataset.map(pad, num_parallel_calls=AUTOTUNE, deterministic=True)


def to_model_inputs() -> Transform:
    """Dict batches -> ((source_ids, target_input_ids), labels) for `model.fit`."""
    return lambda dataset: dataset.map(
        lambda b: ((b["source"], b["target_input"]), b["labels"]),
        num_parallel_calls=AUTOTUNE, deterministic=True,
    )


# ----------------------------------------------------------------------------- entry points


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

    Returns:
      Dataset of ((source_ids int32 [B, b], target_input_ids int32 [B, b]),
      labels int32 [B, b]), b a bucket boundary, B <= its batch size; over one pass
      (repeat=False) every kept pair appears exactly once.
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
    dataset = (dataset.apply(tokenize_and_filter(tokenizer, max_length, counter=drop_counter))
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


def _truncate(max_length: int) -> Transform:
    """Cuts every side to max_length tokens (specials included), keeping its EOS/BOS."""

    def keep_last(ids):  # at most max_length - 1 tokens, then the final EOS
        return tf.concat([ids[:-1][: max_length - 1], ids[-1:]], axis=0)

    def cut(example):
        out = dict(example)
        out["source"] = keep_last(example["source"])
        if "labels" in example:
            out["target_input"] = example["target_input"][:max_length]
            out["labels"] = keep_last(example["labels"])
        return out

    return lambda dataset: dataset.map(cut, num_parallel_calls=AUTOTUNE, deterministic=True)


def count_over_length(tokenizer, texts, max_length: int, batch_size: int = 4096) -> int:
    """How many of `texts` (str/bytes) exceed max_length tokens once EOS/BOS is added."""
    over = 0
    for start in range(0, len(texts), batch_size):
        pieces = tokenizer.tokenize(tf.constant(texts[start:start + batch_size]))
        lengths = pieces.row_lengths() + SPECIAL_TOKENS_PER_SIDE
        over += int(tf.reduce_sum(tf.cast(lengths > max_length, tf.int32)))
    return over


def _report_truncation(tokenizer, files, max_length):
    from transformer_tf.data.textio import iter_lines

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
               .apply(_truncate(max_length))
               .padded_batch(batch_size)
               .apply(pad_to_boundaries(boundaries)))
    if not return_dict:
        dataset = dataset.apply(to_model_inputs())
    if prefetch:
        dataset = dataset.prefetch(AUTOTUNE)
    return dataset
