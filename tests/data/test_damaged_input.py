"""Damaged archives and odd bytes in corpora (data/text_lines.py): a truncated .gz or a plain file
named .gz is an error naming the file and the line reached (exit 2 from prepare_data.py
and evaluate.py); a UTF-8 BOM at the start of a file is dropped; lines with NUL or other
control characters are counted in a warning, or refused on request; an empty valid or
test split is warned about."""
import gzip
import logging

import pytest

from transformer_tf.cli import evaluate as evaluate_cli
from transformer_tf.cli import prepare_data as prepare_cli
from transformer_tf.data.text_lines import (
    ControlCharacterError,
    DamagedArchiveError,
    check_parallel_files,
    has_control_characters,
    iter_lines,
)

LINES = [f"sentence number {i} with a few words" for i in range(2000)]


@pytest.fixture
def truncated_gz(tmp_path):
    """A .gz of LINES cut in the middle, and how many whole lines it still holds."""
    whole = gzip.compress(("\n".join(LINES) + "\n").encode(), mtime=0)
    path = tmp_path / "cut.en.gz"
    path.write_bytes(whole[: len(whole) // 2])
    readable = 0
    with gzip.open(path, "rb") as handle:  # the expectation, from the gzip module itself
        try:
            for _ in handle:
                readable += 1
        except EOFError:
            pass
    assert 0 < readable < len(LINES)
    return path, readable


def test_truncated_gz_names_file_and_line(truncated_gz):
    path, readable = truncated_gz
    with pytest.raises(DamagedArchiveError) as error:
        list(iter_lines(path))
    assert str(error.value).startswith(f"{path}:{readable + 1}: damaged gzip file (it ends "
                                       "too early")
    assert error.value.lines_read == readable


def test_plain_file_named_gz(tmp_path):
    path = tmp_path / "plain.de.gz"
    path.write_text("not compressed\n")
    with pytest.raises(DamagedArchiveError, match=f"^{path}:1: damaged gzip file .*Not a gzip"):
        list(iter_lines(path))


def test_prepare_and_evaluate_exit_2_on_a_truncated_gz(truncated_gz, tmp_path, capsys):
    path, readable = truncated_gz
    plain = tmp_path / "whole.de"
    plain.write_text("\n".join(LINES) + "\n")
    code = prepare_cli.main(["--dataset", "files", "--src", "en", "--tgt", "de",
                             "--train-src", str(path), "--train-tgt", str(plain),
                             "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and f"error: {path}:{readable + 1}: damaged gzip file" in err, err
    assert "Traceback" not in err and not (tmp_path / "out").exists()
    with pytest.raises(SystemExit) as stop:
        evaluate_cli.main(["--hyp", str(plain), "--ref", str(path)])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and f"{path}:{readable + 1}: damaged gzip file" in err, err


def test_bom_at_the_start_of_a_file_is_dropped(tmp_path):
    plain = tmp_path / "bom.en"
    plain.write_bytes(b"\xef\xbb\xbfHello\n\xef\xbb\xbfinside stays\n")
    packed = tmp_path / "bom.en.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    for path in (plain, packed):
        assert list(iter_lines(path)) == ["Hello", "\ufeffinside stays"]


def test_control_characters_are_counted_or_refused(tmp_path, caplog):
    source, target = tmp_path / "a.en", tmp_path / "a.de"
    source.write_bytes(b"fine\twith a tab\nnul \x00 here\nbell \x07\nc1 \xc2\x85 next line\nok\n")
    target.write_bytes(b"eins\nzwei\ndrei\nvier\nfuenf\n")
    assert [has_control_characters(line) for line in iter_lines(source)] == [
        False, True, True, True, False]
    with caplog.at_level(logging.WARNING):
        assert check_parallel_files(source, target) == 5
    assert f"{source}: 3 line(s) hold NUL or other control characters (line 2, 3, 4)" \
        in caplog.text
    assert str(target) not in caplog.text
    with pytest.raises(ControlCharacterError, match=f"^{source}: 3 line"):
        check_parallel_files(source, target, reject_control_characters=True)


def test_empty_valid_split_is_warned_about(tmp_path, caplog, capsys):
    train_en, train_de = tmp_path / "t.en", tmp_path / "t.de"
    train_en.write_text("\n".join(LINES[:300]) + "\n")
    train_de.write_text("\n".join(reversed(LINES[:300])) + "\n")
    empty_en, empty_de = tmp_path / "v.en", tmp_path / "v.de"
    empty_en.write_text("")
    empty_de.write_text("")
    with caplog.at_level(logging.WARNING):
        code = prepare_cli.main(["--dataset", "files", "--src", "en", "--tgt", "de",
                                 "--vocab-size", "300", "--train-src", str(train_en),
                                 "--train-tgt", str(train_de), "--valid-src", str(empty_en),
                                 "--valid-tgt", str(empty_de), "--out", str(tmp_path / "o"),
                                 "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert f"the valid split is empty ({empty_en} / {empty_de})" in caplog.text
