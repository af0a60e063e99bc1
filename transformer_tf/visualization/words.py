"""BPE pieces back into words, and attention weights with them.

Pieces are sentencepiece's: a piece that starts a word begins with "▁" (U+2581); the
others continue the word before them. Special tokens (<s>, </s>, <pad>, <unk>) are words
of their own. Byte-fallback pieces (<0xC3><0xA4> ...) are turned back into characters.

Weights of a word: for keys, the SUM over the word's pieces (the share of attention the
word gets, so every row still sums to 1); for queries, the MEAN over the word's pieces
(the word's pieces looked, on average, there).
"""
from __future__ import annotations

import re

import numpy as np

WORD_START = "\u2581"
SPECIAL_LABELS = {"<s>": "<BOS>", "</s>": "<EOS>", "<pad>": "<pad>", "<unk>": "<unk>"}
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _text_of(pieces: list[str]) -> str:
    """Pieces as text: "▁" a space, byte pieces decoded as UTF-8."""
    data = bytearray()
    for piece in pieces:
        match = _BYTE_PIECE.fullmatch(piece)
        if match:
            data.append(int(match.group(1), 16))
        else:
            data += piece.replace(WORD_START, " ").encode("utf-8")
    return data.decode("utf-8", errors="replace")


def pieces_to_text(pieces: list[str]) -> str:
    """The text of pieces without the special tokens (what detokenizing gives)."""
    return _text_of([p for p in pieces if p not in SPECIAL_LABELS]).strip() if pieces else ""


def piece_labels(pieces: list[str]) -> list[str]:
    """Tick labels for pieces: specials named (<BOS>, <EOS>), the rest as sentencepiece
    writes them ("▁Hund", "e")."""
    return [SPECIAL_LABELS.get(piece, piece) for piece in pieces]


def merge_pieces(pieces: list[str]) -> tuple[list[str], list[list[int]]]:
    """(words, groups): the words, and for each the indices of its pieces (in order).

    >>> merge_pieces(["▁Zwei", "▁Hund", "e", "</s>"])
    (['Zwei', 'Hunde', '<EOS>'], [[0], [1, 2], [3]])
    """
    groups: list[list[int]] = []
    previous_special = True
    for index, piece in enumerate(pieces):
        special = piece in SPECIAL_LABELS
        if special or previous_special or piece.startswith(WORD_START):
            groups.append([index])
        else:
            groups[-1].append(index)
        previous_special = special
    words = [SPECIAL_LABELS[pieces[g[0]]] if pieces[g[0]] in SPECIAL_LABELS
             else _text_of([pieces[i] for i in g]).strip() for g in groups]
    return words, groups


def merge_weights(weights, query_groups: list[list[int]], key_groups: list[list[int]]):
    """weights [..., queries, keys] -> [..., len(query_groups), len(key_groups)]: summed
    over the pieces of each key word, averaged over the pieces of each query word."""
    weights = np.asarray(weights)
    by_key = np.stack([weights[..., g].sum(axis=-1) for g in key_groups], axis=-1)
    return np.stack([by_key[..., g, :].mean(axis=-2) for g in query_groups], axis=-2)
