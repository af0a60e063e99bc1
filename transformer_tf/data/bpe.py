"""Shared BPE vocabulary: training with sentencepiece, tokenising in the graph with tf-text.

One BPE model is trained on the training text of *both* languages (paper section 5.1: "a
shared source-target vocabulary"), so the model can share one embedding matrix between
encoder, decoder and pre-softmax layer.

Reserved ids (fixed for the whole project, see `transformer_tf.config`):

    0 = <pad> (PAD_ID)   1 = <unk> (UNK_ID)   2 = <s> (BOS_ID)   3 = </s> (EOS_ID)

Normalisation (the default, `normalization="identity"`): sentencepiece's "identity" rule,
i.e. no Unicode normalisation at all, plus removal of extra ASCII spaces (U+0020): leading
and trailing spaces are dropped and runs of spaces become one space. Nothing else changes:
tabs, no-break spaces, U+3000 etc. are ordinary characters. `normalize_text` implements
exactly this in Python. With `byte_fallback=True` (the default) a character missing from the
vocabulary is spelt with byte pieces <0x00>..<0xFF> instead of <unk>, so for *every* valid
UTF-8 string

    detokenize(tokenize(s)) == normalize_text(s).

Invalid UTF-8 input is first repaired in the graph (each bad byte becomes U+FFFD), so
arbitrary bytes fed to a serving signature never fail. The alternative rule "nmt_nfkc"
(sentencepiece's default: NFKC plus NMT-specific clean-ups) is available but then the round
trip only holds up to that normalisation (`normalize_text(s, "nmt_nfkc")` uses
sentencepiece's own normaliser for it).

Word pieces instead of BPE (`BpeOptions(subword="wordpiece")`, the paper's En-Fr
vocabulary): `transformer_tf.data.wordpiece`. Its model bytes go wherever a sentencepiece
proto goes (the `bpe.model` file names are kept); `python_processor` and `make_tokenizer`
pick the implementation from the bytes, so everything downstream takes either.
"""
from __future__ import annotations

import dataclasses
import functools
import io
import logging
import random
import re
from pathlib import Path
from typing import Iterable

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops; SavedModel consumers need it too)
from tensorflow_text.python.ops.sentencepiece_tokenizer import gen_sentencepiece_tokenizer

from transformer_tf.config import (
    BOS_ID,
    CHARACTER_COVERAGE,
    EOS_ID,
    NUM_SPECIAL_IDS,
    PAD_ID,
    UNK_ID,
)
from transformer_tf.data import wordpiece

logger = logging.getLogger(__name__)

NORMALIZATIONS = ("identity", "nmt_nfkc")
SUBWORDS = ("bpe", "wordpiece")
_SPACES = re.compile(" +")


@dataclasses.dataclass(frozen=True)
class BpeOptions:
    """How the shared BPE model is trained.

    Attributes:
      vocab_size: total number of pieces, including the 4 reserved ids and, with
        `byte_fallback`, the 256 byte pieces.
      normalization: "identity" (default; see the module docstring) or "nmt_nfkc".
      byte_fallback: spell unknown characters as UTF-8 byte pieces instead of <unk>.
      character_coverage: share of characters (by frequency) that get their own piece,
        in `CHARACTER_COVERAGE` (0.98 to 1); the rest fall back to bytes (or <unk> without
        byte fallback). Unused by word pieces.
      max_training_sentences: at most this many sentences (a seeded uniform sample over
        both languages) train the model; 0 uses them all. Large corpora (WMT) need a cap.
      seed: seed of that sample.
      num_threads: sentencepiece trainer threads.
      user_defined_symbols: pieces always kept whole, each one id (e.g. the bracket tokens
        of linearised parse trees, written with sentencepiece's word-start mark U+2581 so
        that " (NP" is one piece; for word pieces: whole words, added to the vocabulary
        where the learner left them out); empty for translation.
      subword: "bpe" (sentencepiece BPE, the default) or "wordpiece" (tensorflow-text's
        word-piece learner and tokenizer, see `transformer_tf.data.wordpiece`; identity
        normalisation only, no byte fallback).
    """

    vocab_size: int = 8000
    normalization: str = "identity"
    byte_fallback: bool = True
    character_coverage: float = 0.9999
    max_training_sentences: int = 2_000_000
    seed: int = 1234
    num_threads: int = 2
    user_defined_symbols: tuple = ()
    subword: str = "bpe"

    def __post_init__(self):
        if self.subword not in SUBWORDS:
            raise ValueError(f"subword: expected one of {SUBWORDS}, got {self.subword!r}")
        if self.subword == "wordpiece":
            if self.normalization != "identity":
                raise ValueError("subword 'wordpiece' supports the identity normalization only")
            if self.vocab_size <= NUM_SPECIAL_IDS + 1:
                raise ValueError(f"vocab_size: {self.vocab_size} is too small for word pieces")
            return
        if self.normalization not in NORMALIZATIONS:
            raise ValueError(
                f"normalization: expected one of {NORMALIZATIONS}, got {self.normalization!r}"
            )
        low, high = CHARACTER_COVERAGE
        if not (isinstance(self.character_coverage, (int, float))
                and low <= self.character_coverage <= high):
            raise ValueError(f"character_coverage: expected a number from {low} to {high}, "
                             f"got {self.character_coverage!r}")
        minimum = NUM_SPECIAL_IDS + (256 if self.byte_fallback else 0) + 1
        if self.vocab_size < minimum:
            raise ValueError(
                f"vocab_size: {self.vocab_size} is too small; it must be at least {minimum} "
                f"({NUM_SPECIAL_IDS} reserved ids"
                + (" + 256 byte pieces" if self.byte_fallback else "") + " + 1)"
            )


def normalize_text(text: str, normalization: str = "identity") -> str:
    """The text as the tokenizer sees it: detokenize(tokenize(text)) returns exactly this.

    "identity": strip leading/trailing U+0020 spaces and collapse runs of them to one.
    "nmt_nfkc": sentencepiece's nmt_nfkc normaliser, with the same space handling.
    """
    if normalization == "identity":
        return _SPACES.sub(" ", text).strip(" ")
    if normalization == "nmt_nfkc":
        return _nmt_nfkc_normalizer().normalize(text)
    raise ValueError(f"normalization: expected one of {NORMALIZATIONS}, got {normalization!r}")


@functools.lru_cache(maxsize=1)
def _nmt_nfkc_normalizer():
    # Built once: data preparation normalises every sentence of the corpus.
    return spm.SentencePieceNormalizer(
        rule_name="nmt_nfkc", add_dummy_prefix=False, escape_whitespaces=False,
        remove_extra_whitespaces=True)


def _sample(sentences: Iterable[str], limit: int, seed: int) -> list[str]:
    """Reservoir sample of at most `limit` non-empty sentences (all of them if limit <= 0)."""
    sentences = (s for s in sentences if s.strip(" "))
    if limit <= 0:
        return list(sentences)
    rng = random.Random(seed)
    reservoir: list[str] = []
    for index, sentence in enumerate(sentences):
        if index < limit:
            reservoir.append(sentence)
        else:
            slot = rng.randint(0, index)
            if slot < limit:
                reservoir[slot] = sentence
    return reservoir


def train_bpe(sentences: Iterable[str], options: BpeOptions = BpeOptions()) -> bytes:
    """Trains a BPE model on `sentences` (both languages mixed) and returns its proto.

    Args:
      sentences: the training text, one sentence per item (str).
      options: vocabulary size, normalisation, sampling.

    Returns:
      The serialized sentencepiece ModelProto (bytes), to write to a `.model` file or to
      pass to `BpeTokenizer`.
    """
    corpus = _sample(sentences, options.max_training_sentences, options.seed)
    if not corpus:
        raise ValueError("train_bpe: no non-empty training sentence")
    logger.info("training a %d-piece BPE model on %d sentences", options.vocab_size, len(corpus))
    model = io.BytesIO()
    try:
        _train_sentencepiece(corpus, model, options)
    except RuntimeError as error:
        message = _vocab_size_misfit(options.vocab_size, str(error))
        if message is None:
            raise
        raise ValueError(message) from None
    return model.getvalue()


# sentencepiece's own errors when the vocabulary size does not fit the corpus.
_TOO_FEW_FOR_CHARACTERS = re.compile(r"smaller than required_chars\. (\d+) vs (\d+)")
_TOO_MANY_FOR_CORPUS = re.compile(r"Vocabulary size too high \((\d+)\)\. .*<= (\d+)")


def _vocab_size_misfit(vocab_size: int, sentencepiece_error: str) -> str | None:
    """The error to show for a sentencepiece training error that says `vocab_size` does not
    fit the corpus (naming the field and the size that would), else None."""
    found = _TOO_FEW_FOR_CHARACTERS.search(sentencepiece_error)
    if found:
        return (f"vocab_size: {vocab_size} is too small for this corpus: its characters and "
                f"the reserved pieces alone need {found.group(2)}; use at least that")
    found = _TOO_MANY_FOR_CORPUS.search(sentencepiece_error)
    if found:
        return (f"vocab_size: {vocab_size} is too large for this corpus: sentencepiece can "
                f"learn at most {found.group(2)} pieces from it; use at most that")
    return None


def _train_sentencepiece(corpus: list[str], model_writer, options: BpeOptions) -> None:
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus),
        model_writer=model_writer,
        model_type="bpe",
        vocab_size=options.vocab_size,
        pad_id=PAD_ID,
        unk_id=UNK_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
        pad_piece="<pad>",
        unk_piece="<unk>",
        bos_piece="<s>",
        eos_piece="</s>",
        normalization_rule_name=options.normalization,
        remove_extra_whitespaces=True,
        add_dummy_prefix=True,
        byte_fallback=options.byte_fallback,
        character_coverage=options.character_coverage,
        num_threads=options.num_threads,
        # The sample above already bounds the corpus; let sentencepiece take all of it.
        input_sentence_size=0,
        shuffle_input_sentence=False,
        minloglevel=2,
        **({"user_defined_symbols": list(options.user_defined_symbols)}
           if options.user_defined_symbols else {}),
    )


def train_subword_model(sentences: Iterable[str], options: BpeOptions = BpeOptions()) -> bytes:
    """The shared subword model of `options.subword` trained on `sentences` (both languages
    mixed, sampled as `train_bpe` does); returns its bytes (see `make_tokenizer`)."""
    if options.subword == "bpe":
        return train_bpe(sentences, options)
    corpus = _sample(sentences, options.max_training_sentences, options.seed)
    logger.info("learning a %d-piece word-piece vocabulary on %d sentences",
                options.vocab_size, len(corpus))
    return wordpiece.train_wordpiece(corpus, options.vocab_size,
                                     whole_words=options.user_defined_symbols)


def python_processor(model_proto: bytes):
    """A Python processor for the same model (for counting, tests, tools): sentencepiece's
    for a BPE model, `wordpiece.WordpieceVocabulary` (the same API subset) for word pieces."""
    if wordpiece.is_wordpiece_model(model_proto):
        return wordpiece.WordpieceVocabulary(model_proto)
    return spm.SentencePieceProcessor(model_proto=model_proto)


def _sentencepiece_model_type(model_proto: bytes) -> str:
    """"BPE", "UNIGRAM", "WORD" or "CHAR": the algorithm a sentencepiece model was trained with."""
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model_proto)
    return sentencepiece_model_pb2.TrainerSpec.ModelType.Name(proto.trainer_spec.model_type)


def make_tokenizer(model_proto: bytes):
    """The in-graph tokenizer of a subword model's bytes: `BpeTokenizer` for a sentencepiece
    model, `wordpiece.WordpieceTokenizer` for a word-piece one (the same interface)."""
    if wordpiece.is_wordpiece_model(model_proto):
        return wordpiece.WordpieceTokenizer(model_proto)
    return BpeTokenizer(model_proto)


def display_pieces(processor, ids) -> list[str]:
    """The pieces of `ids` in sentencepiece's convention ("▁Hund", "e"), whichever the
    model, for pictures and tick labels."""
    show = getattr(processor, "display_piece", processor.id_to_piece)
    return [show(int(i)) for i in ids]


# How sentencepiece's detokenizer writes UNK (its default unk_surface, " \u2047 ").
UNK_SURFACE = "\u2047"

# Every character str.splitlines() ends a line at.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def line_break_piece_ids(model_proto: bytes) -> list[int]:
    """Ids of the pieces whose text holds a line break (a LINE_BREAKS character): the
    byte pieces <0x0A>, <0x0B>, <0x0C>, <0x0D>, <0x1C>..<0x1E> and any learned piece
    containing such a character. Searches forbid them, so no output spans two lines.

    (NEL, U+2028 and U+2029 spelt as several byte pieces are not caught: those bytes also
    spell other characters. Our line-based tools split at "\n" only.)
    """
    processor = python_processor(model_proto)
    found = []
    for piece_id in range(processor.get_piece_size()):
        if processor.is_control(piece_id) or processor.is_unknown(piece_id):
            continue
        text = processor.decode([piece_id])
        if any(character in LINE_BREAKS for character in text):
            found.append(piece_id)
    return found


class BpeTokenizer(tf.Module):
    """In-graph tokenizer over a sentencepiece BPE model (tensorflow-text ops).

    A `tf.Module`: attach it to a module that is exported with `tf.saved_model.save` and
    the model proto travels inside the SavedModel (as an attribute of the tf-text
    `SentencepieceOp` node in each traced function), so the loaded SavedModel tokenizes
    raw text with no file beside it. Consumers of such a SavedModel must
    `import tensorflow_text` first to register the ops.

    Why not `tensorflow_text.SentencepieceTokenizer` itself: it creates its model resource
    eagerly, owned by a cached eager kernel, and that resource disappears whenever the
    eager kernel cache is cleared -- `tf.random.set_seed` / `keras.utils.set_random_seed`
    do that -- or another SentencepieceTokenizer is garbage collected (tensorflow/text
    TODO b/318839908: "Switch to using a ref-counted resource instead of this kernel-owned
    resource"); later calls then fail with "Resource ... SentencepieceResource does not
    exist". Here the resource is created inside each traced function, so every function
    instantiation (tf.data iterator, SavedModel, eager call) owns a live one.

    Args:
      model_proto: serialized sentencepiece ModelProto (the bytes of a `.model` file).
      name: module name.

    Attributes:
      vocab_size: number of ids (Python int); ids are in [0, vocab_size).
      model_proto: the serialized model (bytes).
    """

    def __init__(self, model_proto: bytes, name: str | None = "bpe_tokenizer"):
        super().__init__(name=name)
        processor = python_processor(model_proto)
        specials = {
            "pad": (processor.pad_id(), PAD_ID),
            "unk": (processor.unk_id(), UNK_ID),
            "bos": (processor.bos_id(), BOS_ID),
            "eos": (processor.eos_id(), EOS_ID),
        }
        wrong = {k: got for k, (got, want) in specials.items() if got != want}
        if wrong:
            raise ValueError(
                f"BPE model reserves the wrong special ids {wrong}; the project needs "
                f"pad={PAD_ID}, unk={UNK_ID}, bos={BOS_ID}, eos={EOS_ID} (train it with train_bpe)"
            )
        self.model_proto = bytes(model_proto)
        self.vocab_size = int(processor.get_piece_size())
        self.model_type = _sentencepiece_model_type(model_proto)  # "BPE" from train_bpe

    @classmethod
    def from_file(cls, path) -> "BpeTokenizer":
        """Loads a `.model` file written by `save_model` (or by sentencepiece)."""
        return cls(Path(path).read_bytes())

    def _model_handle(self) -> tf.Tensor:
        # Called while tracing: the op (and the proto, as its attribute) lands in the graph.
        return gen_sentencepiece_tokenizer.sentencepiece_op(model=self.model_proto)

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
        """Text to ids.

        Args:
          strings: tf.string [N], any bytes (invalid UTF-8 becomes U+FFFD; "" gives []).

        Returns:
          tf.RaggedTensor int32 [N, None] (row splits int64) of BPE ids, no BOS/EOS.
        """
        return self._encode(strings, nbest_size=0, alpha=0.0)

    def sample_tokenize(self, strings: tf.Tensor, dropout: float) -> tf.RaggedTensor:
        """Text to ids with BPE-dropout (Provilkov et al., 2020), for training only.

        Each merge the model would apply is skipped with probability `dropout`, so the same
        sentence comes out segmented differently (into smaller pieces of the same
        vocabulary) at each call; `detokenize` gives the same text back. A plain method,
        not a `tf.function`: it is traced into the training pipeline and never exported.
        The draws come from sentencepiece's own generator, which takes no seed.

        Args:
          strings: tf.string [N], as for `tokenize`.
          dropout: probability in [0, 1) of skipping each merge; 0 is `tokenize`.

        Returns:
          tf.RaggedTensor int32 [N, None] (row splits int64) of BPE ids, no BOS/EOS.
        """
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"bpe_dropout: expected a probability in [0, 1), got {dropout!r}")
        if dropout == 0.0:
            return self.tokenize(strings)
        if self.model_type != "BPE":
            raise ValueError(f"bpe_dropout: the subword model is a sentencepiece "
                             f"{self.model_type.lower()} model; BPE-dropout needs a BPE model "
                             f"(prepare the data with subword 'bpe')")
        # nbest_size < 0 makes sentencepiece sample; for a BPE model alpha is the
        # probability of dropping each merge.
        return self._encode(strings, nbest_size=-1, alpha=float(dropout))

    def _encode(self, strings, nbest_size: int, alpha: float) -> tf.RaggedTensor:
        repaired = tf.strings.unicode_transcode(
            strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
        )
        values, row_splits = gen_sentencepiece_tokenizer.sentencepiece_tokenize_op(
            self._model_handle(), repaired, nbest_size=nbest_size, alpha=alpha,
            add_bos=False, add_eos=False, reverse=False, out_type=tf.int32,
            return_nbest=False,
        )
        return tf.RaggedTensor.from_row_splits(values, tf.cast(row_splits, tf.int64),
                                               validate=False)

    @tf.function(input_signature=[tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1,
                                                      row_splits_dtype=tf.int64)],
                 autograph=False)
    def _detokenize_ragged(self, ids: tf.RaggedTensor) -> tf.Tensor:
        keep = (ids != PAD_ID) & (ids != BOS_ID) & (ids != EOS_ID)
        ids = tf.ragged.boolean_mask(ids, keep)
        return gen_sentencepiece_tokenizer.sentencepiece_detokenize_op(
            self._model_handle(), ids.flat_values, ids.row_splits,
            add_bos=False, add_eos=False, reverse=False,
        )

    def detokenize(self, ids) -> tf.Tensor:
        """Ids to text, ignoring PAD, BOS and EOS wherever they occur.

        Args:
          ids: int32/int64 [N, T] dense tensor (e.g. padded model output) or
            RaggedTensor [N, None]. UNK (1) is rendered as " ⁇ " (UNK_SURFACE).

        Returns:
          tf.string [N].
        """
        if isinstance(ids, tf.RaggedTensor):
            ids = tf.cast(ids.with_row_splits_dtype(tf.int64), tf.int32)
        else:
            ids = tf.RaggedTensor.from_tensor(tf.cast(ids, tf.int32), row_splits_dtype=tf.int64)
        return self._detokenize_ragged(ids)


def save_model(model_proto: bytes, path) -> Path:
    """Writes `model_proto` to `path` (a `.model` file) and a readable `.vocab` beside it.

    Returns the path of the `.model` file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model_proto)
    processor = python_processor(model_proto)
    with open(path.with_suffix(".vocab"), "w", encoding="utf-8") as vocab:
        for piece_id in range(processor.get_piece_size()):
            vocab.write(f"{processor.id_to_piece(piece_id)}\t{processor.get_score(piece_id)}\n")
    return path
