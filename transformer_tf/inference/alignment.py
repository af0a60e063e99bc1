"""Word alignments of translations from a model's encoder-decoder attention, and
unknown-word replacement with them (translate --alignments / --replace-unk).

For a source and its translation (the model's output, or any target), one teacher-forced
pass (`Seq2SeqModel.attention_weights`, both families) gives the cross-attention of
`layer`; its heads are averaged (ConvS2S has one). Words are the space-separated tokens of
each text; a target word's row is the MEAN over its pieces, a source word's column the SUM
over its pieces (`visualization.words.merge_weights`), the end-of-sentence column left
out. Each target word j is linked to the source word i it attends to most: Pharaoh pairs
"i-j" (source first, 0-based, as fast_align writes them), one per target word, in target
order. Words cut off by the model's positions get no link.

The default layer is the penultimate one (layer N - 1 of N; layer 1 of a one-layer
model): Garg et al. 2019 ("Jointly Learning to Align and Translate with Transformer
Models") found the averaged attention of the penultimate decoder layer the best aligned,
and fairseq's alignment options count layers the same way; the last layer's attention
looks ahead to the next word more.

Unknown words: an output token the vocabulary cannot spell is UNK, which the detokenizer
writes as "⁇" (sentencepiece, `data.bpe.UNK_SURFACE`) or "<unk>" (word pieces). Such a
word is fed back as UNK itself, so its attention is the one the model had when it chose
UNK, and `--replace-unk` puts the source word it is linked to in its place. With the
default byte-fallback BPE every character has pieces, so a model emits UNK only where its
training data held some (word-piece vocabularies do: a word with an unseen character is
one UNK).
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from transformer_tf.data.bpe import UNK_SURFACE, python_processor
from transformer_tf.inference import loading
from transformer_tf.visualization.words import merge_weights

UNKNOWN_WORDS = (UNK_SURFACE, "<unk>")


def default_alignment_layer(num_layers: int) -> int:
    """The penultimate layer, counted from 1 (module doc)."""
    return max(1, num_layers - 1)


@dataclasses.dataclass(frozen=True)
class Alignment:
    """A sentence pair's word alignment.

    Attributes:
      source_words, target_words: the space-separated words of each side.
      links: (source index, target index) pairs, 0-based, one per aligned target word.
    """

    source_words: list
    target_words: list
    links: list

    def pharaoh(self) -> str:
        """"i-j i-j ...": source word i aligned with target word j."""
        return " ".join(f"{i}-{j}" for i, j in self.links)

    def replaced_text(self) -> str:
        """The target with every unknown word (UNKNOWN_WORDS) replaced by its aligned
        source word (left as it is when it has no link)."""
        words = list(self.target_words)
        for i, j in self.links:
            if words[j] in UNKNOWN_WORDS:
                words[j] = self.source_words[i]
        return " ".join(words)


def _words(text: str) -> list[str]:
    return [word for word in text.strip().split(" ") if word]


def _word_ids(processor, words: Sequence[str], unknown_as_unk: bool) -> list[list[int]]:
    """The ids of each word (pieces never cross a space, so they are those of the whole
    text); an unknown word becomes UNK_ID when `unknown_as_unk`."""
    return [[UNK_ID] if unknown_as_unk and word in UNKNOWN_WORDS else processor.encode(word)
            for word in words]


def _groups(word_ids: list[list[int]], limit: int) -> tuple[list[int], list[list[int]]]:
    """(the first `limit` ids, each word's positions among them; words cut off get none)."""
    ids, groups, start = [], [], 0
    for piece_ids in word_ids:
        kept = piece_ids[:max(0, limit - start)]
        groups.append(list(range(start, start + len(kept))))
        ids += kept
        start += len(kept)
    return ids, groups


def _padded(rows: list[list[int]]) -> np.ndarray:
    width = max(len(row) for row in rows)
    return np.array([row + [PAD_ID] * (width - len(row)) for row in rows], np.int32)


class Aligner:
    """Word alignments from a model's cross-attention (module doc).

    Args:
      model: a model of the sequence-to-sequence contract with `attention_weights`.
      tokenizer: its tokenizer (`model_proto` is read).
      layer: the cross-attention layer, from 1; None: `default_alignment_layer`.
    """

    def __init__(self, model, tokenizer, layer: int | None = None):
        self.model = model
        self.processor = python_processor(tokenizer.model_proto)
        self.layer = layer

    @property
    def num_layers(self) -> int:
        """Layers of the model's encoder-decoder attention."""
        return len(self.model.attention_weights(tf.constant([[EOS_ID]]),
                                                tf.constant([[BOS_ID]]))["cross"])

    def align(self, sources: Sequence[str], targets: Sequence[str],
              batch_size: int = 32) -> list[Alignment]:
        """The alignment of each (source, target) pair, in the input order."""
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} sources but {len(targets)} targets")
        order = np.argsort([len(t) for t in targets], kind="stable")
        results: list = [None] * len(sources)
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            aligned = self._align_batch([sources[i] for i in chunk],
                                        [targets[i] for i in chunk])
            for index, alignment in zip(chunk, aligned):
                results[index] = alignment
        return results

    def _layer_weights(self, source_ids, target_input_ids) -> np.ndarray:
        """float32 [batch, target, source]: the chosen layer's cross-attention, mean over
        heads."""
        layers = self.model.attention_weights(tf.constant(source_ids),
                                              tf.constant(target_input_ids))["cross"]
        layer = default_alignment_layer(len(layers)) if self.layer is None else self.layer
        if not 1 <= layer <= len(layers):
            raise ValueError(f"--alignment-layer {layer}: the model's encoder-decoder "
                             f"attention has layers 1..{len(layers)}")
        return np.asarray(layers[layer - 1]).mean(axis=1)

    def _align_batch(self, sources, targets) -> list[Alignment]:
        source_words = [_words(s) for s in sources]
        target_words = [_words(t) for t in targets]
        source_rows, target_rows, groups = [], [], []
        for s_words, t_words in zip(source_words, target_words):
            s_ids, s_groups = _groups(_word_ids(self.processor, s_words, False),
                                      self.model.max_source_length - 1)
            t_ids, t_groups = _groups(_word_ids(self.processor, t_words, True),
                                      self.model.max_target_length - 1)
            source_rows.append(s_ids + [EOS_ID])
            target_rows.append([BOS_ID] + t_ids)  # position t predicts target piece t
            groups.append((s_groups, t_groups))
        weights = self._layer_weights(_padded(source_rows), _padded(target_rows))
        alignments = []
        for row, (s_words, t_words, (s_groups, t_groups)) in enumerate(
                zip(source_words, target_words, groups)):
            links = []
            kept_sources = [i for i, g in enumerate(s_groups) if g]
            kept_targets = [j for j, g in enumerate(t_groups) if g]
            if kept_sources and kept_targets:
                by_word = merge_weights(weights[row], [t_groups[j] for j in kept_targets],
                                        [s_groups[i] for i in kept_sources])
                best = by_word.argmax(axis=1)  # [kept target words]
                links = [(kept_sources[b], j) for b, j in zip(best, kept_targets)]
            alignments.append(Alignment(s_words, t_words, links))
        return alignments


def load_aligner(model: str | None = None, model_dir: str | None = None,
                 checkpoint: str | None = None, layer: int | None = None) -> Aligner:
    """An Aligner over a SavedModel written by transformer_tf (the model rebuilt from its
    variables: attention weights are not among its signatures) or a training run."""
    if (model is None) == (model_dir is None):
        raise ValueError("give exactly one of a SavedModel directory or a model directory")
    if model_dir is not None:
        net, tokenizer, _, _ = loading.load_trained(model_dir, checkpoint)
    else:
        net, tokenizer, _ = loading.model_from_saved_model(model)
    return Aligner(net, tokenizer, layer)
