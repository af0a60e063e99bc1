"""Checking parallel text files: line counts, UTF-8, gzip, line splitting like tf.data."""
import gzip

import pytest
import tensorflow as tf

from transformer_tf.data.corpora import ParallelFiles
from transformer_tf.data.text_lines import (
    CorpusError,
    InvalidUtf8Error,
    LineCountMismatchError,
    check_parallel_files,
    iter_lines,
    iter_parallel_lines,
    sha256_of_files,
)


def write_bytes(path, data: bytes):
    path.write_bytes(data)
    return path


def test_mismatched_line_counts_name_both_paths_and_counts(tmp_path):
    source = write_bytes(tmp_path / "a.en", b"one\ntwo\nthree\n")
    target = write_bytes(tmp_path / "a.de", b"eins\nzwei\n")
    with pytest.raises(LineCountMismatchError) as info:
        check_parallel_files(source, target)
    message = str(info.value)
    assert str(source) in message and str(target) in message
    assert "3 lines" in message and "2 lines" in message
    assert (info.value.source_lines, info.value.target_lines) == (3, 2)


def test_streaming_pairs_report_full_counts_when_lengths_differ(tmp_path):
    source = write_bytes(tmp_path / "a.en", b"1\n2\n")
    target = write_bytes(tmp_path / "a.de", b"1\n2\n3\n4\n5\n")
    with pytest.raises(LineCountMismatchError) as info:
        list(iter_parallel_lines(source, target))
    assert (info.value.source_lines, info.value.target_lines) == (2, 5)


def test_invalid_utf8_reports_file_and_line(tmp_path):
    good = write_bytes(tmp_path / "good.en", b"a\nb\nc\n")
    bad = write_bytes(tmp_path / "bad.de", b"a\nb \xc3\x28 c\nd\n")  # bad 2-byte sequence
    with pytest.raises(InvalidUtf8Error) as info:
        check_parallel_files(good, bad)
    assert f"{bad}:2:" in str(info.value)
    assert info.value.line_number == 2 and info.value.byte_offset == 2


def test_invalid_utf8_in_gzip_file(tmp_path):
    path = tmp_path / "x.gz"
    with gzip.open(path, "wb") as handle:
        handle.write("ok\nstill ok ü\n".encode() + b"\xff\n")
    with pytest.raises(InvalidUtf8Error, match=r"x\.gz:3:"):
        list(iter_lines(path))


def test_missing_file_is_a_corpus_error(tmp_path):
    with pytest.raises(CorpusError, match="not found"):
        ParallelFiles(tmp_path / "nope.en", tmp_path / "nope.de").check()
    (tmp_path / "de").mkdir()
    (tmp_path / "a.en").write_text("a\n")
    with pytest.raises(CorpusError, match=rf"^{tmp_path / 'de'} is a directory; give the "
                                          "file itself$"):
        ParallelFiles(tmp_path / "a.en", tmp_path / "de").check()


def test_lines_split_like_text_line_dataset(tmp_path):
    # \r\n and \n end lines, a last line may lack its newline, U+2028 and \x85 do not split.
    data = "a\r\nb\u2028c\n\nd\x85e\nlast".encode()
    path = write_bytes(tmp_path / "t.txt", data)
    ours = list(iter_lines(path))
    theirs = [x.decode() for x in tf.data.TextLineDataset(str(path)).as_numpy_iterator()]
    assert ours == theirs == ["a", "b\u2028c", "", "d\x85e", "last"]


def test_gzip_and_plain_copies_have_the_same_checksum(tmp_path):
    text = "Ein Hund.\nA dog.\n".encode()
    plain = write_bytes(tmp_path / "p.txt", text)
    packed = tmp_path / "p.txt.gz"
    with gzip.open(packed, "wb") as handle:
        handle.write(text)
    assert sha256_of_files([plain]) == sha256_of_files([packed])
    assert sha256_of_files([plain, plain]) != sha256_of_files([plain])
