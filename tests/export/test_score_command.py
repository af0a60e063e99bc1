"""transformer-tf-score (`cli.score`) run in this process: from a SavedModel's `score`
signature (loaded once: loading the export takes seconds) and from a run's checkpoint, pairs on stdin or in two files; what it prints
agrees with the signature, and bad input ends with one error line naming the file and
line."""
import io
import logging
import sys

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.cli.score import main
from transformer_tf.config import EOS_ID
from transformer_tf.data.bpe import python_processor
from transformer_tf.inference.forced_decoding import forced_scores
from transformer_tf.inference.loading import load_trained

PAIRS = [("A man is riding a bicycle.", "Ein Mann fährt Fahrrad."),
         ("Two dogs play in the snow.", "Zwei Hunde spielen im Schnee."),
         ("A girl.", "")]


def run(argv, capsys, monkeypatch, stdin=b""):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    try:
        status = main(argv)
    except SystemExit as stop:
        status = stop.code
    out, err = capsys.readouterr()
    return status, out, err


def stdin_pairs(pairs):
    return "".join(f"{s} ||| {t}\n" for s, t in pairs).encode("utf-8")


@pytest.fixture(scope="module")
def pair_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("score_pairs")
    (root / "src.en").write_text("".join(s + "\n" for s, _ in PAIRS), encoding="utf-8")
    (root / "tgt.de").write_text("".join(t + "\n" for _, t in PAIRS), encoding="utf-8")
    (root / "short.de").write_text(PAIRS[0][1] + "\n", encoding="utf-8")
    (root / "scored.de").write_text("".join(f"{t}\t-1.0039\n" for _, t in PAIRS),
                                    encoding="utf-8")  # as translate --scores writes
    return root


def test_stdin_pairs_print_the_signature_scores(serving_exports, serving_translator, capsys,
                                                monkeypatch):
    status, out, err = run(["--model", str(serving_exports["text"]), "--per-token"], capsys,
                           monkeypatch, stdin_pairs(PAIRS))
    assert status == 0, err
    # The exported translator in memory: what the signature computes (test_score_signature).
    expected = serving_translator.score(tf.constant([s for s, _ in PAIRS]),
                                        tf.constant([t for _, t in PAIRS]))
    lines = out.splitlines()
    assert len(lines) == len(PAIRS)
    for row, line in enumerate(lines):
        total, per_token = line.split("\t")
        assert float(total) == pytest.approx(float(expected["log_prob"][row]), abs=1e-4)
        fields = per_token.split(" ")
        pieces, values = fields[0::2], [float(v) for v in fields[1::2]]
        assert pieces[-1] == "</s>" and len(pieces) == int(expected["length"][row])
        assert sum(values) == pytest.approx(float(total), abs=1e-3)
    assert lines[2].split("\t")[1].startswith("</s> ")  # an empty target: EOS alone


def test_files_from_a_run_directory_score_the_pieces(tiny_run, pair_files, capsys,
                                                    monkeypatch):
    status, out, err = run(["--model-dir", str(tiny_run), "--batch-size", "2", "--src",
                            str(pair_files / "src.en"), "--tgt", str(pair_files / "tgt.de")],
                           capsys, monkeypatch)
    assert status == 0, err
    # Independently: the run's model on the pieces sentencepiece gives, one pair at a time.
    model, tokenizer, _, _ = load_trained(tiny_run)
    processor = python_processor(tokenizer.model_proto)
    expected = [float(forced_scores(model, [processor.encode(s) + [EOS_ID]],
                                    [processor.encode(t) + [EOS_ID]]).log_prob[0])
                for s, t in PAIRS]
    np.testing.assert_allclose([float(v) for v in out.split()], expected, atol=1e-4)


@pytest.mark.parametrize("case", ["no_separator", "count_mismatch", "one_file",
                                  "scored_target", "scored_stdin"])
def test_bad_input_is_one_error_line_naming_file_and_line(case, tiny_run, pair_files, capsys,
                                                          monkeypatch):
    model = ["--model-dir", str(tiny_run)]
    argv, stdin, named = {
        "no_separator": (model, b"A dog. ||| Ein Hund.\nA cat without a target\n",
                         "<stdin>: line 2"),
        "count_mismatch": (model + ["--src", str(pair_files / "src.en"), "--tgt",
                                    str(pair_files / "short.de")], b"",
                           f"{pair_files / 'src.en'}: line 2"),
        "one_file": (model + ["--src", str(pair_files / "src.en")], b"", "--tgt"),
        "scored_target": (model + ["--src", str(pair_files / "src.en"), "--tgt",
                                   str(pair_files / "scored.de")], b"",
                          f"{pair_files / 'scored.de'}:1: "),
        "scored_stdin": (model, b"A dog. ||| Ein Hund.\t-1.2500\nA cat. ||| Eine Katze.\t-0.5\n",
                         "<stdin>:1: 'Ein Hund.\\t-1.2500': every line ends in a tab"),
    }[case]
    status, out, err = run(argv, capsys, monkeypatch, stdin)
    assert status == 2 and out == ""
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and named in errors[0], err


def test_a_target_too_long_is_nan_and_the_others_are_scored(tiny_run, capsys, monkeypatch,
                                                          caplog):
    # Batch size 3: the over-long target shares its batch with the two others.
    pairs = PAIRS[:1] + [("A dog.", "ein " * 40)] + PAIRS[1:2]
    with caplog.at_level(logging.WARNING):
        status, out, err = run(["--model-dir", str(tiny_run), "--batch-size", "3",
                                "--per-token"], capsys, monkeypatch, stdin_pairs(pairs))
    assert status == 0, err
    lines = out.splitlines()
    assert len(lines) == 3 and lines[1] == "nan"
    # The same two pairs scored without it: the same pieces and scores (up to the rounding
    # of another batch's padding).
    status, alone, _ = run(["--model-dir", str(tiny_run), "--per-token"], capsys, monkeypatch,
                           stdin_pairs([pairs[0], pairs[2]]))
    assert status == 0
    for with_it, without in zip([lines[0], lines[2]], alone.splitlines(), strict=True):
        fields, expected = with_it.replace("\t", " ").split(), without.replace("\t", " ").split()
        assert fields[1::2] == expected[1::2]  # the pieces; the total, then their scores
        np.testing.assert_allclose([float(v) for v in fields[0:1] + fields[2::2]],
                                   [float(v) for v in expected[0:1] + expected[2::2]],
                                   atol=1e-3)
    assert "<stdin>: line 2: the target is longer than the model's positions: not scored " \
           "(nan); 1 pair(s) in all" in caplog.text + err
