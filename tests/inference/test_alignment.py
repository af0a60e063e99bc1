"""Word alignments from cross-attention (`inference.alignment`): against a second path
(sentencepiece on the whole text, pieces merged into words by `visualization.words`) for
both families, against hand-made attention where the answer is worked out by hand, and
unknown-word replacement with a forced UNK written as the detokenizer writes it."""
import gzip
import itertools

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, UNK_ID
from transformer_tf.presets import get_preset
from transformer_tf.data.bpe import (
    UNK_SURFACE,
    BpeOptions,
    BpeTokenizer,
    display_pieces,
    python_processor,
    train_bpe,
)
from transformer_tf.inference.alignment import Aligner, default_alignment_layer
from transformer_tf.models.convs2s import ConvS2S
from transformer_tf.models.transformer import Transformer
from transformer_tf.visualization.words import merge_pieces, merge_weights

PAIRS = [("A man in an orange hat starring at something.",
          "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt."),
         ("Two dogs.", "Zwei Hunde."),
         ("A girl is running.", "")]


@pytest.fixture(scope="module")
def tokenizer(shared_data_dir):
    lines = []
    for lang in ("en", "de"):
        with gzip.open(shared_data_dir / "multi30k" / f"train.{lang}.gz", "rt",
                       encoding="utf-8") as handle:
            lines += [line.rstrip("\n") for line in itertools.islice(handle, 300)]
    return BpeTokenizer(train_bpe(lines, BpeOptions(vocab_size=400)))


@pytest.fixture(scope="module", params=["transformer", "convs2s"])
def model(request, tokenizer):
    tf.keras.utils.set_random_seed(4)
    if request.param == "transformer":
        built = Transformer(get_preset("tiny").model.replace(
            vocab_size=tokenizer.vocab_size, max_position=32, d_model=16, num_heads=2,
            d_ff=32, num_layers=3))
    else:
        built = ConvS2S(get_preset("convs2s_tiny").model.replace(
            vocab_size=tokenizer.vocab_size, max_position=32))
    built.build()
    return built


def test_the_default_layer_is_the_penultimate():
    assert [default_alignment_layer(n) for n in (1, 2, 6)] == [1, 1, 5]


def _by_whole_text(model, tokenizer, source, target, layer):
    """The links computed the other way: whole-text pieces, merged by `merge_pieces`."""
    processor = python_processor(tokenizer.model_proto)
    source_ids = processor.encode(source) + [EOS_ID]
    target_ids = processor.encode(target)
    cross = model.attention_weights(tf.constant([source_ids]),
                                    tf.constant([[BOS_ID] + target_ids]))["cross"]
    weights = np.asarray(cross[layer - 1])[0].mean(axis=0)  # [target, source]
    source_words, source_groups = merge_pieces(display_pieces(processor, source_ids))
    _, target_groups = merge_pieces(display_pieces(processor, target_ids))
    merged = merge_weights(weights, target_groups, source_groups[:-1])  # </s> left out
    assert len(source_words) - 1 == len(source.split())
    return [(int(i), j) for j, i in enumerate(merged.argmax(axis=1))]


@pytest.mark.parametrize("layer", [None, 1])
def test_links_agree_with_whole_text_pieces_merged_into_words(model, tokenizer, layer):
    aligner = Aligner(model, tokenizer, layer)
    alignments = aligner.align([s for s, _ in PAIRS], [t for _, t in PAIRS], batch_size=2)
    assert aligner.num_layers == (3 if isinstance(model, Transformer) else
                                  model.attention_layer_count)
    chosen = layer or default_alignment_layer(aligner.num_layers)
    for (source, target), alignment in zip(PAIRS, alignments):
        assert alignment.source_words == source.split()
        assert alignment.target_words == target.split()
        if target:
            assert alignment.links == _by_whole_text(model, tokenizer, source, target, chosen)
        else:
            assert alignment.links == [] and alignment.pharaoh() == ""
    with pytest.raises(ValueError, match="--alignment-layer 9"):
        Aligner(model, tokenizer, 9).align(["A dog."], ["Ein Hund."])


class HandMadeAttention:
    """A stand-in model whose cross-attention is given: every layer the same matrix."""

    max_source_length = max_target_length = 32

    def __init__(self, weights):
        self.weights = np.asarray(weights, np.float32)  # [target, source]

    def attention_weights(self, source_ids, target_input_ids):
        t, s = self.weights.shape
        assert target_input_ids.shape == (1, t) and source_ids.shape == (1, s)
        return {"cross": [self.weights[None, None]] * 2}


def test_word_weights_sum_over_source_pieces_and_average_over_target_pieces(tokenizer):
    processor = python_processor(tokenizer.model_proto)
    source, target = "Hunde laufen", "dogs run"
    source_pieces = [processor.encode(w) for w in source.split()]
    target_pieces = [processor.encode(w) for w in target.split()]
    # Worked by hand: "dogs" (its pieces' rows averaged) gives 0.4 to a single piece of
    # "laufen" but 0.3 + 0.3 to "Hunde" when that word has two pieces -> 0-0;
    # "run" attends mostly to "laufen" -> 1-1.
    s_sizes = [len(p) for p in source_pieces]
    t_sizes = [len(p) for p in target_pieces]
    assert s_sizes[0] >= 2 and s_sizes[1] >= 1, source_pieces
    rows = []
    for word, size in enumerate(t_sizes):
        for _ in range(size):
            row = np.zeros(sum(s_sizes) + 1)
            if word == 0:
                row[:2] = 0.3
                row[s_sizes[0]] = 0.4
            else:
                row[s_sizes[0]:sum(s_sizes)] = 0.9 / s_sizes[1]
                row[-1] = 0.1
            rows.append(row)
    rows.append(np.eye(sum(s_sizes) + 1)[-1])  # the position that predicts </s>: not read
    aligner = Aligner(HandMadeAttention(rows), tokenizer)
    assert aligner.align([source], [target])[0].pharaoh() == "0-0 1-1"


def test_an_unknown_word_is_fed_back_as_unk_and_replaced_by_its_source_word(model, tokenizer):
    # The detokenizer writes UNK as UNK_SURFACE between spaces: a forced UNK in an output.
    written = tokenizer.detokenize(tf.constant([[5, UNK_ID, 6]])).numpy()[0].decode()
    assert f" {UNK_SURFACE} " in written
    source, target = "A man in an orange hat.", f"Ein Mann mit einem {UNK_SURFACE} Hut."
    alignment = Aligner(model, tokenizer).align([source], [target])[0]
    # Independently: the weights of the pass with UNK_ID itself at that word.
    processor = python_processor(tokenizer.model_proto)
    words = target.split()
    target_ids, groups = [], []
    for word in words:
        ids = [UNK_ID] if word == UNK_SURFACE else processor.encode(word)
        groups.append(list(range(len(target_ids), len(target_ids) + len(ids))))
        target_ids += ids
    source_ids = [processor.encode(w) for w in source.split()]
    source_groups, flat = [], []
    for ids in source_ids:
        source_groups.append(list(range(len(flat), len(flat) + len(ids))))
        flat += ids
    cross = model.attention_weights(tf.constant([flat + [EOS_ID]]),
                                    tf.constant([[BOS_ID] + target_ids]))["cross"]
    layer = default_alignment_layer(len(cross))
    merged = merge_weights(np.asarray(cross[layer - 1])[0].mean(0), groups, source_groups)
    unk = words.index(UNK_SURFACE)
    aligned_source = int(merged[unk].argmax())
    assert (aligned_source, unk) in alignment.links
    replaced = alignment.replaced_text().split()
    assert replaced[unk] == source.split()[aligned_source]
    assert replaced[:unk] + replaced[unk + 1:] == words[:unk] + words[unk + 1:]
