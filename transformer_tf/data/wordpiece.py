"""A shared word-piece vocabulary (the paper's En-Fr setup: "32000 word-piece vocabulary"),
learnt and applied with tensorflow-text's word-piece tools, beside the sentencepiece BPE.

Rules (one place; the Python and the in-graph tokenizer follow them exactly):

  * text is normalised as the BPE's "identity" rule (`bpe.normalize_text`): runs of
    U+0020 become one, leading and trailing ones go; nothing else changes;
  * words are the pieces of the text between U+0020 spaces (punctuation stays attached:
    "shirt." is one word, which the vocabulary may keep whole or split as "shirt" "##.");
  * each word is split greedily, longest match first, into a word-initial piece and
    suffix pieces written with "##"; a word that cannot be spelt with the vocabulary (a
    character it never saw, or more than MAX_BYTES_PER_WORD bytes) becomes <unk> whole;
  * detokenizing joins suffix pieces to the piece before them and words with one space,
    so detokenize(tokenize(s)) == normalize_text(s) whenever no word became <unk>.

Ids 0-3 are the project's reserved ids (<pad>, <unk>, <s>, </s>), as in the BPE model.
Unlike the BPE, there is no byte fallback: the learner keeps at most 1,000 characters
(the most frequent), and a word with any other character is <unk>.

The model is stored as bytes (where the BPE's sentencepiece proto goes: `bpe.model` in a
prepared directory, a model directory and a SavedModel's assets): MAGIC, then JSON
{"vocab": [...], "suffix_indicator": "##", "max_bytes_per_word": 100}.
"""
from __future__ import annotations

import collections
import json
from typing import Iterable

import tensorflow as tf
import tensorflow_text  # noqa: F401  (FastWordpieceTokenizer's ops)

from transformer_tf.config import BOS_ID, EOS_ID, NUM_SPECIAL_IDS, PAD_ID, UNK_ID

MAGIC = b"transformer_tf word-piece vocabulary\n"
SUFFIX_INDICATOR = "##"
MAX_BYTES_PER_WORD = 100
RESERVED_PIECES = ("<pad>", "<unk>", "<s>", "</s>")  # ids 0..3
_CONTROL_IDS = (PAD_ID, BOS_ID, EOS_ID)
_UNREACHABLE = "<reserved {}>" + "." * MAX_BYTES_PER_WORD


def is_wordpiece_model(model_bytes: bytes) -> bool:
    return bytes(model_bytes[:len(MAGIC)]) == MAGIC


def words_of(text: str) -> list[str]:
    """The words of `text` under the module's rule (split at U+0020, empty ones dropped)."""
    return [word for word in text.split(" ") if word]


def train_wordpiece(sentences: Iterable[str], vocab_size: int,
                    whole_words: Iterable[str] = ()) -> bytes:
    """Learns a word-piece vocabulary of at most `vocab_size` pieces (reserved ids included;
    the learner aims within a few percent below) on `sentences`; returns the model bytes.
    `whole_words` the learner left out are appended as pieces (so each is one id; the
    vocabulary may then exceed `vocab_size` by that many)."""
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    counts = collections.Counter(word for sentence in sentences for word in words_of(sentence))
    if not counts:
        raise ValueError("train_wordpiece: no word in the training sentences")
    vocab = learner.learn(counts, vocab_size, list(RESERVED_PIECES), lower_thresh=2,
                          max_token_length=50, joiner=SUFFIX_INDICATOR)
    if list(vocab[:NUM_SPECIAL_IDS]) != list(RESERVED_PIECES):
        raise AssertionError(f"word-piece learner moved the reserved pieces: {vocab[:8]}")
    learnt = set(vocab)
    vocab = list(vocab) + [word for word in dict.fromkeys(whole_words) if word not in learnt]
    return MAGIC + json.dumps({"vocab": list(vocab), "suffix_indicator": SUFFIX_INDICATOR,
                               "max_bytes_per_word": MAX_BYTES_PER_WORD},
                              ensure_ascii=False).encode("utf-8")


def _read(model_bytes: bytes) -> dict:
    if not is_wordpiece_model(model_bytes):
        raise ValueError("not a transformer_tf word-piece model (wrong header)")
    return json.loads(bytes(model_bytes[len(MAGIC):]).decode("utf-8"))


class WordpieceVocabulary:
    """The word-piece model in Python, with the part of sentencepiece's processor API the
    project uses (encode, decode, piece ids), following the module's rules exactly."""

    def __init__(self, model_bytes: bytes):
        spec = _read(model_bytes)
        self.pieces: list[str] = spec["vocab"]
        self.suffix_indicator: str = spec["suffix_indicator"]
        self.max_bytes_per_word: int = spec["max_bytes_per_word"]
        self._ids = {piece: index for index, piece in enumerate(self.pieces)}
        self._longest = max(len(piece) for piece in self.pieces)

    # -- sentencepiece-like API
    def get_piece_size(self) -> int:
        return len(self.pieces)

    def id_to_piece(self, piece_id: int) -> str:
        return self.pieces[piece_id]

    def piece_to_id(self, piece: str) -> int:
        return self._ids.get(piece, UNK_ID)

    def get_score(self, piece_id: int) -> float:
        return 0.0

    def pad_id(self) -> int:
        return PAD_ID

    def unk_id(self) -> int:
        return UNK_ID

    def bos_id(self) -> int:
        return BOS_ID

    def eos_id(self) -> int:
        return EOS_ID

    def is_control(self, piece_id: int) -> bool:
        return piece_id in _CONTROL_IDS

    def is_unknown(self, piece_id: int) -> bool:
        return piece_id == UNK_ID

    def encode(self, text, num_threads: int | None = None):
        """str -> list of ids; a list of str -> a list of such lists."""
        if isinstance(text, str):
            return [i for word in words_of(text) for i in self._encode_word(word)]
        return [self.encode(line) for line in text]

    def decode(self, ids) -> str:
        """Ids to text: PAD, BOS and EOS dropped, suffix pieces joined to the piece before."""
        words: list[str] = []
        for piece_id in ids:
            piece_id = int(piece_id)
            if piece_id in _CONTROL_IDS:
                continue
            piece = self.pieces[piece_id]
            if piece.startswith(self.suffix_indicator) and words:
                words[-1] += piece[len(self.suffix_indicator):]
            else:
                words.append(piece)
        return " ".join(words)

    def display_piece(self, piece_id: int) -> str:
        """The piece in sentencepiece's convention ("▁Hund", "e"), for pictures."""
        piece = self.pieces[piece_id]
        if piece_id < NUM_SPECIAL_IDS:
            return piece
        if piece.startswith(self.suffix_indicator):
            return piece[len(self.suffix_indicator):]
        return "\u2581" + piece

    def _encode_word(self, word: str) -> list[int]:
        if len(word.encode("utf-8")) > self.max_bytes_per_word:
            return [UNK_ID]
        ids, start = [], 0
        while start < len(word):
            prefix = self.suffix_indicator if start else ""
            for end in range(min(len(word), start + self._longest), start, -1):
                piece_id = self._ids.get(prefix + word[start:end])
                if piece_id is not None and piece_id not in _CONTROL_IDS:
                    ids.append(piece_id)
                    start = end
                    break
            else:
                return [UNK_ID]
        return ids


class WordpieceTokenizer(tf.Module):
    """In-graph tokenizer over a word-piece model (tensorflow-text's FastWordpieceTokenizer;
    its compiled model travels in the graph as a constant, so an exported SavedModel needs
    no file beside it). The same interface as `bpe.BpeTokenizer`.

    Attributes:
      vocab_size: number of ids (Python int).
      model_proto: the model bytes (the name is the BPE tokenizer's, for one interface).
    """

    def __init__(self, model_bytes: bytes, name: str | None = "wordpiece_tokenizer"):
        super().__init__(name=name)
        spec = _read(model_bytes)
        self.model_proto = bytes(model_bytes)
        self.vocab_size = len(spec["vocab"])
        # PAD, BOS and EOS must never come from text (a word "<s>" is spelt with pieces):
        # in the graph's vocabulary they are longer than any word it looks up.
        vocab = [_UNREACHABLE.format(i) if i in _CONTROL_IDS else piece
                 for i, piece in enumerate(spec["vocab"][:NUM_SPECIAL_IDS])]
        vocab += spec["vocab"][NUM_SPECIAL_IDS:]
        self._wordpiece = tensorflow_text.FastWordpieceTokenizer(
            vocab=vocab, suffix_indicator=spec["suffix_indicator"],
            max_bytes_per_word=spec["max_bytes_per_word"], token_out_type=tf.int32,
            unknown_token=spec["vocab"][UNK_ID], no_pretokenization=True,
            support_detokenization=True)

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
        """tf.string [N] (any bytes; invalid UTF-8 becomes U+FFFD) -> int32 ragged [N, None]
        (row splits int64) of word-piece ids, no BOS/EOS."""
        repaired = tf.strings.unicode_transcode(
            strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)
        words = tf.strings.split(repaired, sep=" ")
        words = tf.ragged.boolean_mask(words, tf.strings.length(words) > 0)
        pieces = self._wordpiece.tokenize(words)  # [N, words, pieces]
        return pieces.merge_dims(1, 2).with_row_splits_dtype(tf.int64)

    @tf.function(input_signature=[tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1,
                                                      row_splits_dtype=tf.int64)],
                 autograph=False)
    def _detokenize_ragged(self, ids: tf.RaggedTensor) -> tf.Tensor:
        keep = (ids != PAD_ID) & (ids != BOS_ID) & (ids != EOS_ID)
        ids = tf.ragged.boolean_mask(ids, keep)
        return self._wordpiece.detokenize(ids)

    def detokenize(self, ids) -> tf.Tensor:
        """int [N, T] (dense, e.g. padded output) or ragged [N, None] ids -> tf.string [N];
        PAD, BOS and EOS are ignored wherever they are, UNK is written "<unk>"."""
        if isinstance(ids, tf.RaggedTensor):
            ids = tf.cast(ids.with_row_splits_dtype(tf.int64), tf.int32)
        else:
            ids = tf.RaggedTensor.from_tensor(tf.cast(ids, tf.int32), row_splits_dtype=tf.int64)
        return self._detokenize_ragged(ids)


__all__ = ["MAGIC", "is_wordpiece_model", "train_wordpiece", "words_of",
           "WordpieceVocabulary", "WordpieceTokenizer"]
