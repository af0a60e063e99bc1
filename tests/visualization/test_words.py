"""BPE pieces merged into words, and the weights with them (hand-worked cases)."""
import numpy as np

from transformer_tf.visualization.words import (
    merge_pieces,
    merge_weights,
    piece_labels,
    pieces_to_text,
)


def test_pieces_merge_at_word_starts_and_specials():
    words, groups = merge_pieces(["<s>", "▁Zwei", "▁Hund", "e", "▁spiel", "en", ".", "</s>"])
    assert words == ["<BOS>", "Zwei", "Hunde", "spielen.", "<EOS>"]
    assert groups == [[0], [1], [2, 3], [4, 5, 6], [7]]
    # A piece without "▁" right after a special still starts a word.
    assert merge_pieces(["<s>", "e", "▁x"])[0] == ["<BOS>", "e", "x"]


def test_byte_pieces_become_characters():
    # "ä" is C3 A4 and "é" C3 A9 in UTF-8.
    pieces = ["▁M", "<0xC3>", "<0xA4>", "dchen", "▁", "<0xC3>", "<0xA9>", "t", "</s>"]
    assert merge_pieces(pieces)[0] == ["Mädchen", "ét", "<EOS>"]
    assert pieces_to_text(pieces) == "Mädchen ét"
    assert piece_labels(["<s>", "▁Fuß", "ball", "</s>"]) == ["<BOS>", "▁Fuß", "ball", "<EOS>"]


def test_weights_sum_over_key_pieces_and_average_over_query_pieces():
    # Words: "ab" = pieces 0, 1 and "c" = piece 2.
    _, groups = merge_pieces(["▁a", "b", "▁c"])
    weights = np.array([[0.2, 0.3, 0.5],
                        [0.6, 0.4, 0.0],
                        [0.1, 0.1, 0.8]])
    merged = merge_weights(weights, groups, groups)
    # Row "ab": mean of rows 0 and 1 after summing keys: ([0.5, 0.5] + [1.0, 0.0]) / 2.
    np.testing.assert_allclose(merged, [[0.75, 0.25], [0.2, 0.8]])
    np.testing.assert_allclose(merged.sum(axis=-1), 1.0)
    # Leading axes (layers, heads) are kept.
    stacked = merge_weights(np.stack([weights, weights]), groups, groups)
    assert stacked.shape == (2, 2, 2)
