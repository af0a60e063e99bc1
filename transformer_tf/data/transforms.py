"""tf.data building blocks: `dataset -> dataset` transforms for `dataset.apply`.

Conventions (the model's inputs; all ids int32, padded with PAD_ID = 0):

    source_ids        = BPE(source) + [EOS]          [B, S]
    target_input_ids  = [BOS] + BPE(target)          [B, T]
    labels            = BPE(target) + [EOS]          [B, T]

A training element is `((source_ids, target_input_ids), labels)`, what `model.fit`
expects; positions where labels == PAD_ID are padding and must be masked out of the loss
and metrics. "Length" always counts these special tokens: a pair fits `max_length` when
len(source_ids) <= max_length and len(labels) <= max_length (`length_filter`).

The transforms (OpenNMT-tf style) work on dict elements {"id": int64, "source": ...,
"target": ...} so that extra keys (the example id) ride along:

    text_pairs(files)                 {"id", "source": tf.string, "target": tf.string}
    .apply(tokenize(tokenizer))       {"id", "source": int32 [None], "target": int32 [None]}
    .apply(add_special_tokens())      {"id", "source", "target_input", "labels"}
    .apply(filter_by_length(L))       drops empty / over-long pairs (optionally counted
                                      by a DropCounter)
                                      (tokenize_and_filter fuses these three, per batch)
    .apply(truncate(L))               cuts every side to L tokens instead, keeping EOS
    .apply(bucket_by_length(spec))    padded batches, {"id": [B], "source": [B, b], ...}
    .apply(pad_to_boundaries(bs))     pads already padded batches up to a boundary
    .apply(to_model_inputs())         ((source, target_input), labels)

`transformer_tf.data.datasets` composes them into the training and evaluation datasets.
"""
from __future__ import annotations

import logging
from typing import Callable

import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID
from transformer_tf.data.bucketing import BucketSpec
from transformer_tf.data.length_filter import SPECIAL_TOKENS_PER_SIDE, drop_reasons
from transformer_tf.data.text_lines import is_gzip_path

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
                        num_parallel_calls=AUTOTUNE, bpe_dropout: float = 0.0) -> Transform:
    """tokenize + add_special_tokens + filter_by_length fused, vectorised per batch.

    Same output as the three transforms in a row (string pairs in, kept
    {"id", "source", "target_input", "labels"} out, order kept), but tokenizes, adds the
    specials and drops `batch_size` pairs at a time before unbatching, which is about
    twice as fast as per-element maps and filters.

    bpe_dropout > 0 segments both sides with BPE-dropout (`BpeTokenizer.sample_tokenize`),
    drawn anew each time a pair passes (each epoch of a repeated dataset); the length
    filter applies to the sampled segmentation.
    """
    if bpe_dropout and not hasattr(tokenizer, "sample_tokenize"):
        raise ValueError(f"bpe_dropout={bpe_dropout}: the data's subword model is "
                         f"{type(tokenizer).__name__}; BPE-dropout needs a sentencepiece "
                         f"BPE model (prepare the data with subword 'bpe')")

    def segment(strings):
        if bpe_dropout:
            return tokenizer.sample_tokenize(strings, bpe_dropout)
        return tokenizer.tokenize(strings)

    def process(batch):
        source = segment(batch["source"])
        target = segment(batch["target"])
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


def truncate(max_length: int) -> Transform:
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
