"""Reading segment files: line ends, BOM, gzip, UTF-8 errors with file and line."""
import gzip

import pytest

from transformer_tf.data import text_lines
from transformer_tf.evaluation import (
    EvaluationInputError,
    LineCountMismatchError,
    guess_language,
    read_hypotheses_and_references,
    read_lines,
)


def test_line_ends(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"one\ntwo\n")
    assert read_lines(path) == ["one", "two"]
    path.write_bytes(b"one\ntwo")                       # no final newline
    assert read_lines(path) == ["one", "two"]
    path.write_bytes(b"\xef\xbb\xbfone\r\n\r\nthree" + "\u2028".encode())
    assert read_lines(path) == ["one", "", "three\u2028"]  # BOM, CRLF, empty line kept
    path.write_bytes(b"")
    assert read_lines(path) == []
    path.write_bytes(b"\n")
    assert read_lines(path) == [""]


def test_gzip(tmp_path):
    path = tmp_path / "r.de.gz"
    with gzip.open(path, "wb") as f:
        f.write("Straße\nÜber\n".encode())
    assert read_lines(path) == ["Straße", "Über"]


def test_utf8_error_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\nstill fine\nab\xffcd\n")
    with pytest.raises(EvaluationInputError, match=rf"{path}:3: invalid UTF-8 at byte 2"):
        read_lines(path)


def test_missing_file(tmp_path):
    with pytest.raises(EvaluationInputError, match="not found"):
        read_lines(tmp_path / "nope.txt")


def test_line_counts_must_match(tmp_path):
    hyp, ref = tmp_path / "h", tmp_path / "r"
    hyp.write_text("a\nb\n")
    ref.write_text("a\n")
    with pytest.raises(LineCountMismatchError) as info:
        read_hypotheses_and_references(hyp, ref)
    assert f"hypothesis file {hyp} has 2 lines but reference file {ref} has 1 lines" \
        in str(info.value)
    # One class for corpora and evaluation, with the corpus error's fields.
    assert LineCountMismatchError is text_lines.LineCountMismatchError
    assert (info.value.source_path, info.value.source_lines) == (str(hyp), 2)
    assert (info.value.target_path, info.value.target_lines) == (str(ref), 1)
    ref.write_text("x\ny\n")
    assert read_hypotheses_and_references(hyp, [ref, ref]) == (["a", "b"], [["x", "y"]] * 2)


def test_hypotheses_with_a_score_field_are_refused(tmp_path):
    """What `translate --scores` writes ("text<TAB>score", an empty translation "<TAB>0.0")
    was scored with the numbers as words; it is refused, naming the file and line 1."""
    hyp, ref = tmp_path / "hyp_scores.de", tmp_path / "ref.de"
    ref.write_text("Ein Hund läuft.\n\nZwei Katzen.\n", encoding="utf-8")
    held = "Ein Hund läuft.\t-1.0039\n\t0.0000\nZwei Katzen.\t-2.5e-01\n"
    hyp.write_text(held, encoding="utf-8")
    with pytest.raises(EvaluationInputError,
                       match=rf"^{hyp}:1: 'Ein Hund läuft.\\t-1.0039': every line ends in a "
                             rf"tab and a number.*cut -f1 {hyp}"):
        read_hypotheses_and_references(hyp, ref)
    assert hyp.read_text(encoding="utf-8") == held


def test_a_tab_in_some_translations_is_text(tmp_path):
    hyp, ref = tmp_path / "hyp.de", tmp_path / "ref.de"
    hyp.write_text("Zimmer\t12\nPreis\t-3.5 Euro\n", encoding="utf-8")
    ref.write_text("a\nb\n")
    assert read_hypotheses_and_references(hyp, ref)[0] == ["Zimmer\t12", "Preis\t-3.5 Euro"]


@pytest.mark.parametrize("name,lang", [
    ("test_2016_flickr.de.gz", "de"), ("newstest2014.tok.de", "de"), ("out.fr", "fr"),
    ("val.en.txt", "en"), ("ref.txt", None), ("ref", None), ("hyp.gz", None),
])
def test_guess_language(name, lang):
    assert guess_language(name) == lang
