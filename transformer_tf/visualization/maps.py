"""The attention weights of one sentence pair, labelled with its BPE pieces.

The target is either given (teacher forcing on a reference) or the model's own search
output (beam search with the run's settings, then the same teacher-forced pass over it:
the weights are those the search used, recomputed in one pass).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID, DecodingConfig
from transformer_tf.data.bpe import display_pieces, python_processor
from transformer_tf.data.source_text import (
    encode_sources,
    encode_target_inputs,
    is_blank,
)
from transformer_tf.decoding.model_driver import search_model
from transformer_tf.models.contract import ATTENTION_KINDS
from transformer_tf.visualization import words


@dataclasses.dataclass(frozen=True)
class AttentionMaps:
    """The attention of one sentence pair (no padding anywhere).

    Attributes:
      source_pieces: the source's BPE pieces, "</s>" last (S pieces).
      target_pieces: the target input: "<s>", then the target's pieces (T pieces).
      output_pieces: what each target position predicts (T pieces): the target's
        pieces, then "</s>" (for a search output cut by the length limit, no "</s>").
      weights: kind ("encoder", "decoder", "cross"; those the model has) -> float32
        [layers, heads, queries, keys]: encoder [L, H, S, S], decoder [L, H, T, T],
        cross [L, H, T, S].
      from_search: True when the target is the model's own output.
    """

    source_pieces: list
    target_pieces: list
    output_pieces: list
    weights: dict
    from_search: bool = False

    def pieces(self, kind: str) -> tuple[list, list]:
        """(query pieces, key pieces) of `kind`. The rows of "cross" are named by the
        token each position predicts (alignment-style); those of "decoder" by the input
        token at that position, like its keys."""
        self.check_kind(kind)
        return {"encoder": (self.source_pieces, self.source_pieces),
                "decoder": (self.target_pieces, self.target_pieces),
                "cross": (self.output_pieces, self.source_pieces)}[kind]

    def check_kind(self, kind: str):
        if kind not in ATTENTION_KINDS:
            raise ValueError(f"kind: expected one of {ATTENTION_KINDS}, got {kind!r}")
        if kind not in self.weights:
            raise ValueError(f"this model has no {kind!r} attention (it has: "
                             f"{', '.join(self.weights)})")

    def num_layers(self, kind: str) -> int:
        self.check_kind(kind)
        return self.weights[kind].shape[0]

    def num_heads(self, kind: str) -> int:
        self.check_kind(kind)
        return self.weights[kind].shape[1]


def _pieces(processor, ids) -> list:
    return display_pieces(processor, ids)


def _one_row(ids) -> np.ndarray:
    ids = np.asarray(ids)
    return ids[ids != PAD_ID]


def attention_maps(model, tokenizer, source_ids, target_input_ids, output_ids=None,
                   from_search: bool = False) -> AttentionMaps:
    """AttentionMaps of one sentence pair through `model.attention_weights`.

    Args:
      source_ids: int [S], tokens + EOS (PAD_ID entries are dropped).
      target_input_ids: int [T], BOS + tokens (PAD_ID entries are dropped).
      output_ids: int [T], what each target position predicts; default: the target
        input shifted by one, then EOS (a reference).
      from_search: recorded in the result.
    """
    source_ids, target_input_ids = _one_row(source_ids), _one_row(target_input_ids)
    if output_ids is None:
        output_ids = np.concatenate([target_input_ids[1:], [EOS_ID]])
    if len(output_ids) != len(target_input_ids):
        raise ValueError(f"{len(output_ids)} output ids for {len(target_input_ids)} target "
                         "positions")
    raw = model.attention_weights(tf.constant(source_ids[None], tf.int32),
                                  tf.constant(target_input_ids[None], tf.int32))
    weights = {kind: np.stack([np.asarray(layer)[0] for layer in raw[kind]]).astype(np.float32)
               for kind in ATTENTION_KINDS if raw.get(kind)}
    processor = python_processor(tokenizer.model_proto)
    return AttentionMaps(source_pieces=_pieces(processor, source_ids),
                         target_pieces=_pieces(processor, target_input_ids),
                         output_pieces=_pieces(processor, output_ids),
                         weights=weights, from_search=from_search)


def sentence_maps(model, tokenizer, source: str, target: str | None = None,
                  decoding: DecodingConfig = DecodingConfig()) -> AttentionMaps:
    """AttentionMaps of raw text: `source` with the given `target` (teacher forced), or
    with the model's own translation of it (search with `decoding`) when target is None.

    Both sides are tokenized as everywhere else (`transformer_tf.data.source_text`):
    stripped, BPE pieces, cut to the model's positions. A search output y_1..y_n (EOS
    last unless the length limit cut it) becomes the target input BOS, y_1..y_{n-1},
    whose positions predict y_1..y_n. Raises ValueError for an empty source (or an
    empty given target; empty: blank by `source_text.is_blank`).
    """
    if is_blank(source):
        raise ValueError("the source sentence is empty")
    source_ids, _, _ = encode_sources(tokenizer, tf.constant([source]),
                                      model.max_source_length - 1)
    if target is None:
        # Eagerly: for one sentence, tracing the search costs more than running it.
        result = search_model(model, source_ids, decoding)
        output_ids = result.ids[0, 0, :int(result.lengths[0, 0])].numpy()
        target_input_ids = np.concatenate([[BOS_ID], output_ids[:-1]]).astype(np.int32)
        return attention_maps(model, tokenizer, source_ids[0].numpy(), target_input_ids,
                              output_ids, from_search=True)
    if is_blank(target):
        raise ValueError("the target sentence is empty")
    target_input_ids = encode_target_inputs(tokenizer, tf.constant([target]),
                                            model.max_target_length - 1)[0].numpy()
    return attention_maps(model, tokenizer, source_ids[0].numpy(), target_input_ids)


@dataclasses.dataclass(frozen=True)
class View:
    """What one figure shows: the weights of some heads of one layer of one kind.

    Attributes:
      kind, layer: which attention; layer counts from 1 (the paper's "layer 5 of 6").
      heads: the heads shown, counting from 1.
      query_labels, key_labels: tick labels (words or BPE pieces).
      weights: float32 [len(heads), len(query_labels), len(key_labels)].
      merged: True when pieces were merged into words (see `words`).
    """

    kind: str
    layer: int
    heads: tuple
    query_labels: list
    key_labels: list
    weights: np.ndarray
    merged: bool

    @property
    def head_names(self) -> list:
        return [f"head {h}" for h in self.heads]

    def query_index(self, word: str) -> int:
        """Index of the first query label equal to `word` (a piece's "▁" ignored)."""
        plain = [label.replace(words.WORD_START, "") for label in self.query_labels]
        for candidate in (word, word.replace(words.WORD_START, "")):
            if candidate in plain:
                return plain.index(candidate)
        raise ValueError(f"word {word!r} is not among the {self.kind} queries: "
                         f"{' '.join(plain)}")


def view(maps: AttentionMaps, kind: str, layer: int | None = None, heads=None,
         merge_words: bool = True) -> View:
    """The `View` of `kind`, `layer` (from 1; None = the last) and `heads` (from 1;
    None = all), with pieces merged into words or not."""
    num_layers, num_heads = maps.num_layers(kind), maps.num_heads(kind)
    layer = num_layers if layer is None else int(layer)
    if not 1 <= layer <= num_layers:
        raise ValueError(f"layer {layer}: the {kind} attention has layers 1..{num_layers}")
    heads = tuple(range(1, num_heads + 1)) if heads is None else tuple(int(h) for h in heads)
    wrong = [h for h in heads if not 1 <= h <= num_heads]
    if wrong or not heads:
        raise ValueError(f"heads {list(heads)}: the model has heads 1..{num_heads}")
    weights = maps.weights[kind][layer - 1][[h - 1 for h in heads]]
    query_pieces, key_pieces = maps.pieces(kind)
    if merge_words:
        query_labels, query_groups = words.merge_pieces(query_pieces)
        key_labels, key_groups = words.merge_pieces(key_pieces)
        weights = words.merge_weights(weights, query_groups, key_groups)
    else:
        query_labels, key_labels = words.piece_labels(query_pieces), words.piece_labels(key_pieces)
    return View(kind=kind, layer=layer, heads=heads, query_labels=query_labels,
                key_labels=key_labels, weights=weights.astype(np.float32), merged=merge_words)
