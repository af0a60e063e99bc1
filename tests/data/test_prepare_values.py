"""prepare_data.py's numeric flags: --max-length 0 keeps every length and
--max-bpe-sentences 0 trains on every sentence (as --help says), negatives are refused,
and a --character-coverage sentencepiece would refuse with a traceback is refused by
name, at the arguments (and by BpeOptions, for library callers)."""
import json

import pytest

from transformer_tf.cli import prepare_data as prepare_cli
from transformer_tf.data import bpe

WORDS = "a quick brown fox jumps over the lazy dog".split()


def _files(tmp_path, long_words: int):
    """A small parallel corpus whose last pair is `long_words` words long per side."""
    lines = [" ".join(WORDS[i % 9:] + WORDS[:i % 9]) + f" {i}" for i in range(200)]
    lines.append(" ".join(f"w{i}" for i in range(long_words)))
    paths = []
    for side in ("en", "de"):
        path = tmp_path / f"train.{side}"
        path.write_text("\n".join(lines) + "\n")
        paths.append(str(path))
    return paths


def test_0_keeps_every_length_and_every_sentence(tmp_path, capsys):
    source, target = _files(tmp_path, long_words=400)  # far over the default 256 tokens
    out = tmp_path / "out"
    code = prepare_cli.main(["--dataset", "files", "--src", "en", "--tgt", "de",
                             "--vocab-size", "300", "--train-src", source,
                             "--train-tgt", target, "--max-length", "0",
                             "--max-bpe-sentences", "0", "--out", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    metadata = json.loads((out / "prepared.json").read_text())
    assert metadata["bpe"]["max_training_sentences"] == 0
    kept = (out / "train.en").read_text().splitlines()
    assert len(kept) == 201 and len(kept[-1].split()) == 400  # the long pair too


@pytest.mark.parametrize("flag, value, expected", [
    ("--max-length", "-1", "must be 0 or more, got -1"),
    ("--max-bpe-sentences", "-5", "must be 0 or more, got -5"),
    ("--character-coverage", "5", "must be between 0.98 and 1.0, got 5"),
    ("--character-coverage", "-1", "must be between 0.98 and 1.0, got -1"),
    ("--character-coverage", "0.5", "must be between 0.98 and 1.0, got 0.5"),
    ("--character-coverage", "nan", "expected a finite number, got nan"),
])
def test_a_value_out_of_range_is_refused_by_name(tmp_path, capsys, flag, value, expected):
    source, target = _files(tmp_path, long_words=3)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as stop:
        prepare_cli.main(["--dataset", "files", "--src", "en", "--tgt", "de",
                          "--train-src", source, "--train-tgt", target, "--out", str(out),
                          flag, value])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and f"argument {flag}: {expected}" in err, err
    assert "Traceback" not in err and not out.exists()


def test_the_coverage_bounds_are_sentencepieces():
    for coverage in (0.98, 1.0, 1):
        bpe.BpeOptions(character_coverage=coverage)
    for coverage in (0.97, 1.0001, "0.99"):
        with pytest.raises(ValueError, match="character_coverage: expected a number from "
                                             "0.98 to 1.0"):
            bpe.BpeOptions(character_coverage=coverage)
