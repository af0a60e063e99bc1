"""Word pieces (transformer_tf/data/wordpiece.py): the greedy longest-match rule worked by
hand, the graph tokenizer equal to the Python one, round trips, the reserved ids, and the
tokenizer inside a prepared directory and a SavedModel beside the BPE."""
import json
import random

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID, UNK_ID, DecodingConfig
from transformer_tf.presets import get_preset
from transformer_tf.data import bpe, wordpiece

WORDPIECE_VOCAB = 1500


def _model_bytes(vocab):
    return wordpiece.MAGIC + json.dumps({"vocab": vocab, "suffix_indicator": "##",
                                         "max_bytes_per_word": 12}).encode()


HAND_VOCAB = ["<pad>", "<unk>", "<s>", "</s>", "un", "u", "##n", "##aff", "##a", "##able",
              "##f", "##b", "a", "b", "<", "##s", "##>", "shirt", "shirt.", "##."]


@pytest.fixture(scope="module")
def small_wordpiece(multi30k_dir, gz_lines):
    sentences = []
    for language in ("en", "de", "fr"):
        sentences += gz_lines(multi30k_dir / f"train.{language}.gz", 500)  # learner: ~10 s
    return wordpiece.train_wordpiece(sentences, WORDPIECE_VOCAB)


@pytest.mark.parametrize("text, pieces", [
    ("unaffable", ["un", "##aff", "##able"]),       # longest first: "un", not "u" "##n"
    ("unab", ["un", "##a", "##b"]),
    ("shirt. shirt", ["shirt.", "shirt"]),            # a whole word wins over shirt ##.
    ("unx", ["<unk>"]),                               # one missing piece: the word is <unk>
    ("a  unx b", ["a", "<unk>", "b"]),
    ("<s>", ["<", "##s", "##>"]),                     # never BOS from text
    ("<unk>", ["<unk>"]),
    ("aaaaaaaaaaaaa", ["<unk>"]),                     # 13 bytes > max_bytes_per_word 12
    ("", []),
])
def test_greedy_longest_match_worked_by_hand(text, pieces):
    model = _model_bytes(HAND_VOCAB)
    expected = [HAND_VOCAB.index(p) for p in pieces]
    assert wordpiece.WordpieceVocabulary(model).encode(text) == expected
    tokenizer = wordpiece.WordpieceTokenizer(model)
    assert tokenizer.tokenize(tf.constant([text])).to_list()[0] == expected


def test_learnt_vocabulary_keeps_the_reserved_ids(small_wordpiece):
    vocabulary = wordpiece.WordpieceVocabulary(small_wordpiece)
    assert vocabulary.pieces[:4] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert 0.8 * WORDPIECE_VOCAB <= vocabulary.get_piece_size() <= WORDPIECE_VOCAB
    assert len(set(vocabulary.pieces)) == vocabulary.get_piece_size()
    tokenizer = bpe.make_tokenizer(small_wordpiece)
    assert isinstance(tokenizer, wordpiece.WordpieceTokenizer)
    assert tokenizer.vocab_size == vocabulary.get_piece_size()
    assert isinstance(bpe.python_processor(small_wordpiece), wordpiece.WordpieceVocabulary)


@pytest.mark.parametrize("language", ["en", "de"])
def test_graph_equals_python_and_round_trips_on_val(multi30k_dir, gz_lines, small_wordpiece,
                                                    language):
    sentences = gz_lines(multi30k_dir / f"val.{language}.gz")
    tokenizer = wordpiece.WordpieceTokenizer(small_wordpiece)
    vocabulary = wordpiece.WordpieceVocabulary(small_wordpiece)
    graph = tokenizer.tokenize(tf.constant(sentences))
    assert graph.dtype == tf.int32 and graph.row_splits.dtype == tf.int64
    assert graph.to_list() == vocabulary.encode(sentences)
    back = [b.decode() for b in tokenizer.detokenize(graph).numpy()]
    rows_with_unk = [i for i, ids in enumerate(graph.to_list()) if UNK_ID in ids]
    assert len(rows_with_unk) <= len(sentences) // 50
    for i, (sentence, text) in enumerate(zip(sentences, back)):
        if i not in rows_with_unk:
            assert text == bpe.normalize_text(sentence)
        assert text == vocabulary.decode(graph[i].numpy())
    assert not np.isin(graph.flat_values.numpy(), [PAD_ID, BOS_ID, EOS_ID]).any()


def test_random_nasty_text_graph_equals_python(small_wordpiece):
    alphabet = list("  ab\tzäöüßéÇ\u00a0日本😀\x01-.,'#") + ["##", "<s>", "  "]
    rng = random.Random(0)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
             for _ in range(300)] + [b"ab\xff\xfecd".decode("utf-8", "replace")]
    tokenizer = wordpiece.WordpieceTokenizer(small_wordpiece)
    vocabulary = wordpiece.WordpieceVocabulary(small_wordpiece)
    ids = tokenizer.tokenize(tf.constant(texts)).to_list()
    assert ids == vocabulary.encode(texts)
    back = [b.decode() for b in tokenizer.detokenize(
        tf.ragged.constant(ids, tf.int32, row_splits_dtype=tf.int64)).numpy()]
    assert back == [vocabulary.decode(row) for row in ids]
    for text, row, out in zip(texts, ids, back):
        if UNK_ID not in row and not any(w.startswith("##") for w in text.split(" ")):
            assert out == bpe.normalize_text(text)
    # Invalid UTF-8 is repaired in the graph as in the BPE tokenizer.
    assert tokenizer.tokenize(tf.constant([b"ab\xffcd"])).to_list() == [
        vocabulary.encode("ab\ufffdcd")]


def test_detokenize_ignores_pad_bos_eos_and_writes_unk(small_wordpiece):
    tokenizer = wordpiece.WordpieceTokenizer(small_wordpiece)
    ids = tokenizer.tokenize(tf.constant(["A man walks.", "Zwei Hunde"])).to_list()
    dense = np.zeros([2, 12], np.int32)
    for row, seq in enumerate(ids):
        seq = [BOS_ID] + seq + [EOS_ID]
        dense[row, :len(seq)] = seq
    assert tokenizer.detokenize(tf.constant(dense)).numpy().tolist() == [
        b"A man walks.", b"Zwei Hunde"]
    assert tokenizer.detokenize(tf.constant([[UNK_ID, EOS_ID]])).numpy().tolist() == [b"<unk>"]


def test_display_pieces_use_sentencepiece_convention(small_wordpiece):
    vocabulary = wordpiece.WordpieceVocabulary(small_wordpiece)
    ids = [BOS_ID] + vocabulary.encode("Zwei Hunde") + [EOS_ID]
    shown = bpe.display_pieces(vocabulary, ids)
    assert shown[0] == "<s>" and shown[-1] == "</s>"
    assert "".join(shown[1:-1]).replace("\u2581", " ").strip() == "Zwei Hunde"
    assert sum(p.startswith("\u2581") for p in shown) == 2


def test_prepared_directory_and_saved_model_tokenize_with_word_pieces(
        tiny_multi30k, tmp_path):
    from transformer_tf.data.corpora import text_file_corpus
    from transformer_tf.data.prepared_writer import prepare_corpus
    from transformer_tf.export.saved_model import export_saved_model
    from transformer_tf.inference.translator import Translator
    from transformer_tf.models.transformer import Transformer

    corpus = text_file_corpus("en", "de", train=tiny_multi30k.files("train"),
                              valid=tiny_multi30k.files("valid"), name="tiny")
    prepared = prepare_corpus(corpus, tmp_path / "data",
                              bpe.BpeOptions(vocab_size=600, subword="wordpiece"))
    assert prepared.metadata["bpe"]["model_type"] == "wordpiece"
    assert prepared.metadata["bpe"]["byte_fallback"] is False
    assert isinstance(prepared.tokenizer, wordpiece.WordpieceTokenizer)
    assert prepared.vocab_size == prepared.tokenizer.vocab_size <= 600
    vocab_lines = (tmp_path / "data" / "bpe.vocab").read_text().splitlines()
    assert len(vocab_lines) == prepared.vocab_size and vocab_lines[4].endswith("\t0.0")

    tf.keras.utils.set_random_seed(3)
    model = Transformer(get_preset("tiny").model.replace(
        vocab_size=prepared.vocab_size, d_model=16, num_heads=2, d_ff=32, num_layers=1,
        max_position=32))
    model.build()
    # chunk_size 0: one search per request, the smallest graph to trace (the pieces are
    # what is tested here; chunks search any tokenizer's ids alike).
    translator = Translator(model, prepared.tokenizer,
                            DecodingConfig(beam_size=2, alpha=0.6, max_extra_length=5,
                                           chunk_size=0))
    sentences = tf.constant(["A dog runs.", "", "Two men sit on a bench."])
    expected = translator.translate(sentences)["translation"].numpy().tolist()
    exported = export_saved_model(translator, tmp_path / "sm" / "1")
    loaded = tf.saved_model.load(str(exported))
    served = loaded.signatures["serving_default"](text=sentences)
    assert served["translation"].numpy().tolist() == expected
    assert expected[1] == b""


def test_options_refuse_what_word_pieces_cannot_do():
    with pytest.raises(ValueError, match="identity"):
        bpe.BpeOptions(subword="wordpiece", normalization="nmt_nfkc")
    with pytest.raises(ValueError, match="subword"):
        bpe.BpeOptions(subword="unigram")
    assert bpe.BpeOptions(subword="wordpiece", vocab_size=100).vocab_size == 100  # no bytes


def test_ctranslate2_export_refuses_word_pieces(small_wordpiece, tmp_path):
    from transformer_tf.export.ctranslate2 import export_ctranslate2

    with pytest.raises(ValueError, match="word pieces"):
        export_ctranslate2(None, small_wordpiece, tmp_path / "ct2", DecodingConfig())


def test_whole_words_stay_one_piece_where_the_learner_would_split_them():
    sentences = ["the cat sat on the mat", "the dog sat"] * 20 + ["(WHADJP XX )WHADJP"]
    whole = ["(WHADJP", ")WHADJP", "XX", "the", "(UCP"]
    model = wordpiece.train_wordpiece(sentences, 60, whole_words=whole)
    vocabulary = wordpiece.WordpieceVocabulary(model)
    tokenizer = wordpiece.WordpieceTokenizer(model)
    for word in whole:  # rare ones were added, frequent ones were learnt (not twice)
        assert vocabulary.pieces.count(word) == 1
        assert tokenizer.tokenize(tf.constant([word])).to_list()[0] == [vocabulary.piece_to_id(word)]
    without = wordpiece.WordpieceVocabulary(wordpiece.train_wordpiece(sentences, 60))
    assert "(UCP" not in without.pieces  # never seen: only whole_words brings it
