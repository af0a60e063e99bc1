"""The length filter of training pairs: when a pair is empty or too long, defined once.

Data preparation (`prepared_writer.prepare_corpus`, on sentencepiece ids in Python) and the
tf.data pipeline (`filter_by_length`, `tokenize_and_filter`, in the graph) both drop
training pairs by `drop_reasons`; evaluation data is never filtered.

Lengths count the special token each side gets (SPECIAL_TOKENS_PER_SIDE = 1):
source_ids = BPE(source) + [EOS] and labels = BPE(target) + [EOS] (target_input =
[BOS] + BPE(target) is as long), so a side of n BPE tokens has length n + 1. A pair is

    empty     when a side holds no BPE token (length <= 1);
    too long  when it is not empty and len(source) > max_length or
              len(labels) > max_target_length (default: max_length).
"""
from __future__ import annotations

SPECIAL_TOKENS_PER_SIDE = 1


def drop_reasons(source_length, target_length, max_length: int,
                 max_target_length: int | None = None):
    """(empty, too_long): which pairs to drop, and why (never both for one pair).

    Args:
      source_length, target_length: side lengths in tokens, the special token counted, as
        integer np.ndarray or tf.Tensor of one shape ([] or [N]). Only comparisons and
        `& | ~` are used, so numpy and TensorFlow both work; Python ints do not (~True is -2).
      max_length: longest source length kept (and target length, by default).
      max_target_length: longest target length kept; None means max_length.

    Returns:
      Two boolean arrays / tensors of the inputs' shape; a pair is kept where both are False.
    """
    max_target_length = max_target_length or max_length
    empty = (source_length <= SPECIAL_TOKENS_PER_SIDE) | (target_length <= SPECIAL_TOKENS_PER_SIDE)
    too_long = ~empty & ((source_length > max_length) | (target_length > max_target_length))
    return empty, too_long
