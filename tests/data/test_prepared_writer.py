"""Prepared directories and scripts/prepare_data.py: JSON layout, dropping, bad input."""
import json
import logging
import re

import pytest

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from transformer_tf.data import bpe
from transformer_tf.data.bpe import BpeOptions
from transformer_tf.data.corpora import text_file_corpus
from transformer_tf.data.prepared_reader import load_prepared
from transformer_tf.data.prepared_writer import prepare_corpus
from transformer_tf.data.text_lines import (
    CorpusError, InvalidUtf8Error, LineCountMismatchError, iter_lines)



@pytest.fixture(scope="module")
def script():
    """The command's module (scripts/prepare_data.py runs its `main`: tests/test_commands.py)."""
    from transformer_tf.cli import prepare_data

    return prepare_data


def test_prepared_directory_layout(small_prepared, small_corpus_files):
    data = load_prepared(small_prepared.directory)
    meta = json.loads((data.directory / "prepared.json").read_text())
    assert meta["source_language"] == data.source_language == "en"
    assert meta["target_language"] == data.target_language == "de"
    assert meta["vocab_size"] == data.vocab_size == data.tokenizer.vocab_size == 1000
    assert meta["special_ids"] == {"pad": PAD_ID, "unk": UNK_ID, "bos": BOS_ID, "eos": EOS_ID}
    assert meta["bpe"]["model_type"] == "bpe" and meta["bpe"]["normalization"] == "identity"
    assert re.fullmatch("[0-9a-f]{64}", meta["corpus_sha256"])
    assert set(data.splits) == {"train", "valid", "test"}
    for split in ("valid", "test"):  # evaluation splits are copied unchanged
        files = data.files(split)
        assert files.source.parent == data.directory
        assert list(iter_lines(files.source)) == list(iter_lines(small_corpus_files[split][0]))
    assert data.num_examples("train") == 4000 - meta["filtering"]["dropped_too_long"]
    assert meta["filtering"]["max_length"] == 64 and meta["filtering"]["dropped_too_long"] > 0
    with pytest.raises(KeyError, match="no split 'dev'"):
        data.files("dev")


def test_prepare_drops_and_counts_empty_and_over_long_pairs(tmp_path, caplog):
    source = ["a dog runs", "", "a cat sleeps", "  ", "long " * 100, "a bird sings"] * 20
    target = ["ein hund rennt", "nichts", "", "x", "kurz", "ein vogel singt"] * 20
    (tmp_path / "train.en").write_text("\n".join(source) + "\n")
    (tmp_path / "train.de").write_text("\n".join(target) + "\n")
    corpus = text_file_corpus("en", "de", (tmp_path / "train.en", tmp_path / "train.de"))
    with caplog.at_level(logging.WARNING, logger="transformer_tf.data.prepared_writer"):
        data = prepare_corpus(corpus, tmp_path / "out", BpeOptions(vocab_size=300), max_length=20)
    assert data.metadata["filtering"] == {"max_length": 20, "dropped_empty": 60,
                                          "dropped_too_long": 20}
    assert "dropped 60 empty and 20 over-long" in caplog.text
    kept = list(iter_lines(data.files("train").source))
    assert len(kept) == data.num_examples("train") == 40
    assert set(kept) == {"a dog runs", "a bird sings"}
    assert set(data.splits) == {"train"}


def test_prepare_fails_before_writing_on_mismatched_files(tmp_path):
    (tmp_path / "a.en").write_text("one\ntwo\n")
    (tmp_path / "a.de").write_text("eins\n")
    corpus = text_file_corpus("en", "de", (tmp_path / "a.en", tmp_path / "a.de"))
    with pytest.raises(LineCountMismatchError) as info:
        prepare_corpus(corpus, tmp_path / "out", BpeOptions(vocab_size=300))
    assert str(tmp_path / "a.en") in str(info.value) and "2 lines" in str(info.value)
    assert not (tmp_path / "out").exists()


def test_load_prepared_errors(tmp_path, small_prepared):
    with pytest.raises(CorpusError, match="not a prepared data directory"):
        load_prepared(tmp_path)
    meta = dict(small_prepared.metadata, format_version=99)
    (tmp_path / "prepared.json").write_text(json.dumps(meta))
    with pytest.raises(CorpusError, match="format_version"):
        load_prepared(tmp_path)
    meta["format_version"] = 1
    (tmp_path / "prepared.json").write_text(json.dumps(meta))
    with pytest.raises(CorpusError, match="missing files"):
        load_prepared(tmp_path)


def test_script_help_explains_every_flag(script, capsys):
    parser = script.build_parser()
    with pytest.raises(SystemExit) as info:
        parser.parse_args(["--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    for action in parser._actions:
        for flag in action.option_strings:
            assert flag in text
        assert action.help, action.option_strings
    for flag in ("--dataset", "--src", "--tgt", "--vocab-size", "--out", "--data-dir",
                 "--train-src", "--valid-tgt", "--max-length"):
        assert flag in text


def test_script_prepares_files_and_reports_bad_input(script, small_corpus_files, tmp_path,
                                                      capsys):
    (train_en, train_de), (valid_en, valid_de) = small_corpus_files["train"], small_corpus_files["valid"]
    out = tmp_path / "out"
    code = script.main(["--dataset", "files", "--src", "en", "--tgt", "de", "--vocab-size", "400",
                        "--train-src", str(train_en), "--train-tgt", str(train_de),
                        "--valid-src", str(valid_en), "--valid-tgt", str(valid_de),
                        "--out", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    data = load_prepared(out)
    assert data.vocab_size == 400 and set(data.splits) == {"train", "valid"}
    assert "prepared en-de" in capsys.readouterr().out

    bad = tmp_path / "bad.de"
    bad.write_bytes(train_de.read_bytes().replace(b"\n", b"\n\xff", 1))  # line 2 broken
    code = script.main(["--dataset", "files", "--src", "en", "--tgt", "de",
                        "--train-src", str(train_en), "--train-tgt", str(bad),
                        "--out", str(tmp_path / "out2"), "--quiet"])
    assert code == 2
    assert f"{bad}:2:" in capsys.readouterr().err

    code = script.main(["--dataset", "files", "--src", "en", "--tgt", "de",
                        "--train-src", str(train_en), "--out", str(tmp_path / "o3")])
    assert code == 2 and "--train-tgt" in capsys.readouterr().err


def test_script_prepares_multi30k(script, shared_data_dir, tmp_path, capsys):
    out = tmp_path / "m30k"
    code = script.main(["--dataset", "multi30k", "--src", "en", "--tgt", "de",
                        "--vocab-size", "2000", "--out", str(out),
                        "--data-dir", str(shared_data_dir), "--no-download", "--quiet"])
    assert code == 0, capsys.readouterr().err
    data = load_prepared(out)
    assert data.metadata["dataset"] == "multi30k" and data.vocab_size == 2000
    assert {s: data.num_examples(s) for s in data.splits} == {"train": 29000, "valid": 1014,
                                                              "test": 1000}
    assert data.metadata["inputs"]["test"]["source"].endswith("test_2016_flickr.en.gz")
    assert bpe.BpeTokenizer.from_file(data.bpe_model_path).vocab_size == 2000


def test_invalid_utf8_in_corpus_is_reported_with_line(tmp_path):
    (tmp_path / "a.en").write_bytes(b"ok\nok\nok\n")
    (tmp_path / "a.de").write_bytes(b"ok\nok\n\xe2\x82\n")
    corpus = text_file_corpus("en", "de", (tmp_path / "a.en", tmp_path / "a.de"))
    with pytest.raises(InvalidUtf8Error, match=r"a\.de:3:"):
        prepare_corpus(corpus, tmp_path / "out", BpeOptions(vocab_size=300))


def test_prepare_refuses_to_overwrite_its_input(tmp_path):
    (tmp_path / "train.en").write_text("a\n")
    (tmp_path / "train.de").write_text("b\n")
    corpus = text_file_corpus("en", "de", (tmp_path / "train.en", tmp_path / "train.de"))
    with pytest.raises(CorpusError, match="overwritten"):
        prepare_corpus(corpus, tmp_path, BpeOptions(vocab_size=300))
    assert (tmp_path / "train.en").read_text() == "a\n"
