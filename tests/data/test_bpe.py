"""Shared BPE: reserved ids, round trip on all Multi30k val sentences, graph == Python ids."""
import random

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from transformer_tf.data import bpe

SMALL_VOCAB = 1000  # the vocabulary of the small_bpe_proto fixture


def test_model_reserves_the_project_special_ids(small_bpe_proto, small_tokenizer):
    processor = bpe.python_processor(small_bpe_proto)
    assert (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id()) == (
        PAD_ID, UNK_ID, BOS_ID, EOS_ID)
    assert [processor.id_to_piece(i) for i in range(4)] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert small_tokenizer.vocab_size == SMALL_VOCAB == processor.get_piece_size()


@pytest.mark.parametrize("language", ["en", "de", "fr"])
def test_round_trip_on_all_val_sentences(multi30k_dir, gz_lines, small_tokenizer, language):
    sentences = gz_lines(multi30k_dir / f"val.{language}.gz")
    assert len(sentences) == 1014
    ids = small_tokenizer.tokenize(tf.constant(sentences))
    assert ids.dtype == tf.int32 and ids.shape[0] == len(sentences)
    back = [s.decode("utf-8") for s in small_tokenizer.detokenize(ids).numpy()]
    expected = [bpe.normalize_text(s) for s in sentences]
    mismatches = [(s, b) for s, b in zip(expected, back) if s != b]
    assert not mismatches, mismatches[:3]
    # No <unk> ever, thanks to byte fallback; no specials added by tokenize.
    flat = ids.flat_values.numpy()
    assert not np.isin(flat, [PAD_ID, UNK_ID, BOS_ID, EOS_ID]).any()


@pytest.mark.parametrize("language", ["en", "de"])
def test_graph_ids_equal_sentencepiece_python_ids(multi30k_dir, gz_lines, small_bpe_proto,
                                                  small_tokenizer, language):
    sentences = gz_lines(multi30k_dir / f"val.{language}.gz")
    python_ids = bpe.python_processor(small_bpe_proto).encode(sentences)
    graph_ids = small_tokenizer.tokenize(tf.constant(sentences)).to_list()
    assert graph_ids == python_ids


def test_normalisation_is_exactly_space_stripping_and_collapsing(small_bpe_proto,
                                                                 small_tokenizer):
    # Random strings over a nasty alphabet: spaces, tabs, no-break and ideographic spaces,
    # accents, CJK, emoji, control characters. Byte fallback makes every one round-trip.
    alphabet = list("  ab\tzäöüßéÇ\u00a0\u3000日本✓😀\x01\u2028-.,'") + ["  "]
    rng = random.Random(0)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
             for _ in range(300)]
    back = small_tokenizer.detokenize(small_tokenizer.tokenize(tf.constant(texts))).numpy()
    assert [b.decode() for b in back] == [bpe.normalize_text(t) for t in texts]
    processor = bpe.python_processor(small_bpe_proto)
    assert small_tokenizer.tokenize(tf.constant(texts)).to_list() == processor.encode(texts)


def test_invalid_utf8_and_empty_strings_do_not_crash(small_tokenizer):
    inputs = tf.constant([b"", b"   ", b"ab\xff\xfecd", b"\xc3", b"\x80\x80", b"A dog."])
    ids = small_tokenizer.tokenize(inputs)
    assert ids.shape[0] == 6
    assert ids.row_lengths().numpy()[:2].tolist() == [0, 0]
    text = small_tokenizer.detokenize(ids).numpy()
    assert text[0] == b"" and text[1] == b""
    assert text[2] == "ab\ufffd\ufffdcd".encode()  # each bad byte became U+FFFD
    assert text[5] == b"A dog."


def test_detokenize_ignores_pad_bos_eos_in_dense_and_ragged_input(small_tokenizer):
    ids = small_tokenizer.tokenize(tf.constant(["A man walks.", "Zwei Hunde"])).to_list()
    dense = np.zeros([2, 12], np.int32)
    for row, seq in enumerate(ids):
        seq = [BOS_ID] + seq + [EOS_ID]
        dense[row, : len(seq)] = seq
    expected = [b"A man walks.", b"Zwei Hunde"]
    assert small_tokenizer.detokenize(tf.constant(dense)).numpy().tolist() == expected
    assert small_tokenizer.detokenize(tf.constant(dense, tf.int64)).numpy().tolist() == expected
    ragged = tf.ragged.constant([[PAD_ID] + ids[0] + [EOS_ID, PAD_ID], [EOS_ID] + ids[1]])
    assert small_tokenizer.detokenize(ragged).numpy().tolist() == expected
    assert small_tokenizer.detokenize(tf.constant([[UNK_ID]])).numpy()[0].strip() == "⁇".encode()


def test_tokenizer_travels_inside_a_saved_model(small_tokenizer, tmp_path):
    module = tf.Module()
    module.tokenizer = small_tokenizer
    module.serve = tf.function(
        lambda text: small_tokenizer.detokenize(small_tokenizer.tokenize(text)),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    tf.saved_model.save(module, str(tmp_path / "sm"))
    assert not any((tmp_path / "sm" / "assets").glob("*"))  # nothing beside the graph
    loaded = tf.saved_model.load(str(tmp_path / "sm"))
    text = tf.constant(["Ein Mann fährt Fahrrad.", ""])
    assert loaded.tokenizer.tokenize(text).to_list() == small_tokenizer.tokenize(text).to_list()
    assert loaded.serve(text).numpy().tolist() == ["Ein Mann fährt Fahrrad.".encode(), b""]


def test_tokenize_inside_tf_function_and_dataset_map(small_tokenizer):
    dataset = tf.data.Dataset.from_tensor_slices(["A dog.", "Ein Hund."]).batch(2)
    ragged = next(iter(dataset.map(small_tokenizer.tokenize)))
    assert ragged.to_list() == small_tokenizer.tokenize(tf.constant(["A dog.", "Ein Hund."])).to_list()


def test_model_with_other_special_ids_is_rejected():
    import io
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(["a b c d e f"] * 50),
                                   model_writer=model, vocab_size=12, model_type="bpe",
                                   minloglevel=2)  # sentencepiece defaults: unk=0, bos=1, eos=2
    with pytest.raises(ValueError, match="special ids"):
        bpe.BpeTokenizer(model.getvalue())


def test_options_validate_vocab_size_and_normalisation():
    with pytest.raises(ValueError, match="too small"):
        bpe.BpeOptions(vocab_size=200)
    with pytest.raises(ValueError, match="normalization"):
        bpe.BpeOptions(normalization="nfc")
    bpe.BpeOptions(vocab_size=50, byte_fallback=False)


def test_nmt_nfkc_round_trip_up_to_its_normalisation(multi30k_dir, gz_lines):
    sentences = gz_lines(multi30k_dir / "val.fr.gz")
    sentences += ["ｆｕｌｌ　ｗｉｄｔｈ ﬁ", "  x\u00a0y  "]
    options = bpe.BpeOptions(vocab_size=600, normalization="nmt_nfkc")
    tokenizer = bpe.BpeTokenizer(bpe.train_bpe(sentences, options))
    back = tokenizer.detokenize(tokenizer.tokenize(tf.constant(sentences))).numpy()
    assert [b.decode() for b in back] == [bpe.normalize_text(s, "nmt_nfkc") for s in sentences]
    assert bpe.normalize_text("ｆｕｌｌ　ｗｉｄｔｈ ﬁ", "nmt_nfkc") == "full width fi"


def test_save_model_writes_model_and_vocab(small_bpe_proto, tmp_path):
    path = bpe.save_model(small_bpe_proto, tmp_path / "x" / "bpe.model")
    assert path.read_bytes() == small_bpe_proto
    vocab = path.with_suffix(".vocab").read_text(encoding="utf-8").splitlines()
    assert len(vocab) == SMALL_VOCAB and vocab[3].startswith("</s>\t")
    assert bpe.BpeTokenizer.from_file(path).vocab_size == SMALL_VOCAB


def test_tokenizer_survives_set_seed_and_other_tokenizers(small_bpe_proto, small_tokenizer):
    # tensorflow_text.SentencepieceTokenizer loses its eager resource in both situations.
    import gc

    import keras

    text = tf.constant(["Ein Hund rennt."])
    expected = small_tokenizer.tokenize(text).to_list()
    iterator = iter(tf.data.Dataset.from_tensors(text).repeat().map(small_tokenizer.tokenize))
    next(iterator)
    keras.utils.set_random_seed(7)
    other = bpe.BpeTokenizer(small_bpe_proto)
    other.tokenize(text)
    del other
    gc.collect()
    assert small_tokenizer.tokenize(text).to_list() == expected
    assert next(iterator).to_list() == expected


def test_empty_batches(small_tokenizer):
    assert small_tokenizer.tokenize(tf.zeros([0], tf.string)).shape[0] == 0
    assert small_tokenizer.detokenize(tf.zeros([0, 5], tf.int32)).shape == [0]
    assert small_tokenizer.detokenize(tf.zeros([2, 0], tf.int32)).numpy().tolist() == [b"", b""]


def test_a_vocab_size_that_does_not_fit_the_corpus_names_the_size_that_would():
    # 90 distinct characters and the word-boundary mark: with the 4 reserved ids and 256
    # byte pieces, 351 pieces at least; 270 is below (sentencepiece's own check, read back
    # into our error).
    many_characters = ["".join(chr(0x4E00 + i) for i in range(90))] * 20
    with pytest.raises(ValueError, match=r"vocab_size: 270 is too small .* need 351;"):
        bpe.train_bpe(many_characters, bpe.BpeOptions(vocab_size=270, character_coverage=1.0))
    # Ten words cannot give 2,000 pieces: the error names the most sentencepiece can learn.
    with pytest.raises(ValueError, match=r"vocab_size: 2000 is too large .* at most \d+ "):
        bpe.train_bpe(["a b c d e f g h i j"] * 20, bpe.BpeOptions(vocab_size=2000))
