"""The encoder self-attention of a pronoun over the words of its sentence, for every layer
and head of a trained model (the input of `evaluation.pronoun_heads`).

Words and pieces as in `inference.alignment`: the words are the space-separated tokens,
each encoded on its own (pieces never cross a space), the end-of-sentence position is
left out, and `visualization.words.merge_weights` turns piece weights into word weights
(a query word's row is the MEAN over its pieces, a key word's weight the SUM over its
pieces). The target side does not reach the encoder, so a lone BOS is fed as target.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID
from transformer_tf.data.bpe import python_processor
from transformer_tf.data.possessives import PronounCase
from transformer_tf.inference.alignment import _groups, _padded, _word_ids
from transformer_tf.visualization.words import merge_weights


def pronoun_rows(model, tokenizer, cases: Sequence[PronounCase],
                 batch_size: int = 32) -> list[np.ndarray]:
    """For each case, float32 [layers, heads, words]: the pronoun's encoder self-attention
    over its sentence's words, per layer and head. A sentence longer than the model's
    source positions is cut; a case whose pronoun or antecedent falls beyond the cut
    raises ValueError."""
    processor = python_processor(tokenizer.model_proto)
    limit = model.max_source_length - 1
    rows: list = []
    for start in range(0, len(cases), batch_size):
        chunk = cases[start:start + batch_size]
        encoded = [_groups(_word_ids(processor, case.words, False), limit) for case in chunk]
        for case, (_, groups) in zip(chunk, encoded):
            if not (groups[case.pronoun] and groups[case.antecedent]):
                raise ValueError(f"the pronoun or its antecedent is beyond the model's "
                                 f"{limit} source positions: {' '.join(case.words)!r}")
        sources = _padded([ids + [EOS_ID] for ids, _ in encoded])
        layers = model.attention_weights(tf.constant(sources),
                                         tf.constant([[BOS_ID]] * len(chunk)))["encoder"]
        weights = np.stack([np.asarray(layer) for layer in layers], axis=1)
        # weights: [batch, layers, heads, source pieces, source pieces]
        for row, (case, (_, groups)) in enumerate(zip(chunk, encoded)):
            kept = [g for g in groups if g]
            merged = merge_weights(weights[row], [groups[case.pronoun]], kept)
            rows.append(merged[..., 0, :].astype(np.float32))  # [layers, heads, words]
    return rows

