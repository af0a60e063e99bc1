"""Streaming translation (`translate --src FILE --output FILE [--resume]`) and decoding
batches that do not fit in memory.

A tiny Transformer with random weights (a run directory, the tiny Multi30k slice's
tokenizer) translates with greedy search and at most 3 extra tokens: the outputs are
nonsense but deterministic, which is all the comparisons need.
"""
from __future__ import annotations

import io
import itertools
import os
import pathlib
import signal
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.cli import translate as translate_cli
from transformer_tf.presets import get_preset
from transformer_tf.inference.batch import (
    LoadedTranslator,
    load_translator,
    translate_lines,
    translate_splitting,
)
from transformer_tf.inference.loading import source_decoding
from transformer_tf.inference.streaming import (
    OutputFormat,
    check_output,
    resume_point,
    source_lines,
    translate_file,
    translate_stream,
)
from transformer_tf.rundir import model_dir as model_dir_lib

REPO = pathlib.Path(__file__).resolve().parents[2]
SEARCH = ["--beam-size", "1", "--max-extra-length", "3"]
KILL_INPUT_LINES = 240


@pytest.fixture(scope="module")
def run_dir(tiny_multi30k, tmp_path_factory, write_checkpointed_run):
    model = get_preset("tiny").model.replace(vocab_size=tiny_multi30k.vocab_size, num_layers=1)
    directory = write_checkpointed_run(tmp_path_factory.mktemp("stream") / "run", model, [1], 1)
    model_dir_lib.write_tokenizer(directory, tiny_multi30k.bpe_model_path)
    return directory


@pytest.fixture(scope="module")
def translator(run_dir):
    decoding = source_decoding(model_dir=run_dir).replace(beam_size=1, max_extra_length=3)
    return load_translator(model_dir=str(run_dir), decoding=decoding)


@pytest.fixture(scope="module")
def sentences(tiny_multi30k) -> list[str]:
    """Training sentences of many lengths, a blank line and an over-long line among them."""
    lines = tiny_multi30k.files("train").source.read_text(encoding="utf-8").splitlines()
    return lines[:30] + ["", "word " * 200] + lines[30:KILL_INPUT_LINES - 2]


def test_the_stream_writes_what_the_whole_file_path_gives(translator, sentences):
    lines = sentences[:50]
    translations, scores = translate_lines(translator, lines, batch_size=8, progress=False)
    out = io.BytesIO()
    read = translate_stream(translator, iter(lines), out, batch_size=8, window=13,
                            output_format=OutputFormat(scores=True), progress=False,
                            durable=False)
    assert read == len(lines)
    rows = [line.split("\t") for line in out.getvalue().decode("utf-8").split("\n")[:-1]]
    assert [text for text, _ in rows] == [hypotheses[0] for hypotheses in translations]
    # (printed to 4 decimals; other batch companions move the 6th significant digit)
    np.testing.assert_allclose([float(score) for _, score in rows], scores[:, 0], rtol=1e-5,
                               atol=1e-4)
    assert rows[30] == ["", "0.0000"]  # the blank line


def test_invalid_utf8_is_read_and_each_bad_line_named(caplog):
    """Bad bytes become U+FFFD and the line stays (N lines in, N out); the first five bad
    lines are named with the offset of their first bad byte, the rest counted."""
    raw = [b"ok\n", b"caf\xe9 au lait\r\n", b"\xff\n", b"fine\n"] + [b"\x80x\n"] * 6 + [b"end"]
    with caplog.at_level("WARNING"):
        lines = list(source_lines(io.BytesIO(b"".join(raw)), "in.txt"))
    assert lines[:4] == ["ok", "caf\ufffd au lait", "\ufffd", "fine"]
    assert lines[4:] == ["\ufffdx"] * 6 + ["end"]
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == ("in.txt: line 2: invalid UTF-8 at byte 3 (from 0); its bad bytes "
                           "read as U+FFFD")
    assert [m.split(":")[1] for m in messages[:5]] == [" line 2", " line 3", " line 5",
                                                        " line 6", " line 7"]
    assert messages[5:] == ["in.txt: 8 lines in all had invalid UTF-8 (the first 5 named "
                            "above), their bad bytes read as U+FFFD"]
    assert len(messages) == 6


def test_a_translated_file_names_its_bad_lines(translator, tmp_path, caplog):
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_bytes(b"A dog runs.\nA \xffcat.\n")
    with caplog.at_level("WARNING"):
        assert translate_file(translator, str(source), str(output), progress=False) == 2
    assert len(output.read_text(encoding="utf-8").splitlines()) == 2
    assert any(r.getMessage().startswith(f"{source}: line 2: invalid UTF-8 at byte 2")
               for r in caplog.records)


def generated_lines(count: int):
    return (f"line {i} " + "word " * (i % 13) for i in range(count))


def test_memory_does_not_grow_with_the_input():
    """50,000 generated lines through a stand-in translator hold no more memory at their
    peak than 5,000 do: one window at a time."""
    from transformer_tf.data.bpe import BpeOptions, python_processor, train_bpe

    proto = train_bpe(generated_lines(300), BpeOptions(vocab_size=300))
    python_processor(proto)  # (its first use allocates: before measuring)

    def upper(lines):
        return [[line.upper()] for line in lines], np.zeros((len(lines), 1), np.float32)

    class CountingSink:
        written = 0

        def write(self, data):
            self.written += len(data)

        def flush(self):
            pass

    stand_in = LoadedTranslator(upper, proto, max_source_tokens=10**6, n_best=1)

    def peak(count):
        lines = generated_lines(count)
        sink = CountingSink()
        tracemalloc.start()
        try:
            read = translate_stream(stand_in, lines, sink, batch_size=64, window=512,
                                    progress=False, durable=False)
            return read, sink.written, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, large = peak(5_000), peak(50_000)
    assert (small[0], large[0]) == (5_000, 50_000)
    assert large[1] > 9 * small[1]  # ten times the output went through
    assert large[2] < 1.25 * small[2], (small, large)


def test_resume_point_cuts_a_partial_line_or_group(tmp_path):
    path = tmp_path / "out.txt"
    assert resume_point(path) == 0  # no file yet
    path.write_bytes(b"")
    assert resume_point(path) == 0
    path.write_bytes(b"eins\nzwei\ndr")
    assert resume_point(path) == 2
    assert path.read_bytes() == b"eins\nzwei\n"
    assert resume_point(path) == 2  # nothing more to cut
    # n-best: whole groups of 3 lines only.
    path.write_bytes(b"0 ||| a ||| -1\n0 ||| b ||| -2\n0 ||| c ||| -3\n1 ||| d ||| -1\n1 ||| e")
    assert resume_point(path, OutputFormat(n_best=3)) == 1
    assert path.read_bytes() == b"0 ||| a ||| -1\n0 ||| b ||| -2\n0 ||| c ||| -3\n"


def written_lines(output_format, inputs):
    """What `output_format` writes for `inputs` input lines (made-up hypotheses)."""
    hypotheses = "abc"[:output_format.n_best]
    return "".join(output_format.format(number, [f"Satz {number}{h}" for h in hypotheses],
                                        [-1.5, -2.25, -3.0]) for number in range(inputs))


@pytest.mark.parametrize("written, resumed, named", [
    (OutputFormat(n_best=2), OutputFormat(), "--n-best 2, this run has neither --n-best "
                                             "nor --scores"),
    (OutputFormat(n_best=2), OutputFormat(n_best=3), "--n-best 2, this run has --n-best 3"),
    (OutputFormat(n_best=3), OutputFormat(n_best=2), "--n-best 3, this run has --n-best 2"),
    (OutputFormat(n_best=2), OutputFormat(scores=True), "--n-best 2, this run has --scores"),
    (OutputFormat(scores=True), OutputFormat(), "--scores, this run has neither --n-best "
                                                "nor --scores"),
    (OutputFormat(scores=True), OutputFormat(n_best=2), "--scores, this run has --n-best 2"),
    (OutputFormat(), OutputFormat(scores=True), "neither --n-best nor --scores, this run "
                                                "has --scores"),
    (OutputFormat(), OutputFormat(n_best=2), "neither --n-best nor --scores, this run has "
                                             "--n-best 2"),
])
def test_a_resume_in_another_output_format_is_refused(written, resumed, named, tmp_path):
    """Counting the lines of a file written in another format skips inputs (an n-best
    file holds several lines per input) and mixes two formats in one file: refused,
    naming the file and the options, with the file left as it is (partial line too)."""
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("".join(f"line {i}\n" for i in range(8)))
    held = written_lines(written, 3) + "Satz 3a ||| -"
    output.write_text(held, encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{output}: was written with {named}"):
        check_output(str(source), str(output), True, resumed)
    assert output.read_text(encoding="utf-8") == held


@pytest.mark.parametrize("output_format", [OutputFormat(), OutputFormat(scores=True),
                                           OutputFormat(n_best=2), OutputFormat(n_best=3)])
def test_a_resume_in_the_same_format_counts_inputs_not_lines(output_format, tmp_path):
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("".join(f"line {i}\n" for i in range(8)))
    whole = written_lines(output_format, 3)
    output.write_text(whole + written_lines(output_format, 4)[len(whole):][:-3],
                      encoding="utf-8")  # the fourth input's lines, cut by a kill
    assert check_output(str(source), str(output), True, output_format) == 3
    assert output.read_text(encoding="utf-8") == whole


def test_plain_lines_may_hold_tabs_and_bars(tmp_path):
    """Plain translations are any text: a file is taken for a --scores or n-best one only
    when every line has that form."""
    path = tmp_path / "out.txt"
    held = "Preis\t12.5\n0 ||| a ||| -1.0\nnur Text\n"
    path.write_text(held)
    assert resume_point(path) == 3
    assert path.read_text() == held


def test_a_damaged_line_of_a_scored_file_is_named(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("eins\t-1.0000\nzwei\n")
    with pytest.raises(ValueError, match=rf"^{path}: line 2: 'zwei' is not a line that "
                                         "--scores writes"):
        resume_point(path, OutputFormat(scores=True))
    assert path.read_text() == "eins\t-1.0000\nzwei\n"


def test_an_existing_output_is_refused_without_resume(tmp_path):
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("a\nb\n")
    output.write_text("A\n")
    with pytest.raises(ValueError, match="already exists; give --resume"):
        check_output(str(source), str(output), False, OutputFormat())
    assert output.read_text() == "A\n"
    with pytest.raises(ValueError, match="is the input file"):
        check_output(str(source), str(source), True, OutputFormat())
    assert check_output(str(source), str(output), True, OutputFormat()) == 1
    assert check_output(str(source), str(tmp_path / "new.txt"), False, OutputFormat()) == 0


def test_an_output_longer_than_the_input_is_refused(translator, tmp_path):
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("a\nb\n")
    output.write_text("A\nB\nC\n")
    with pytest.raises(ValueError, match="holds the translations of 3 lines, but .* has only 2"):
        translate_file(translator, str(source), str(output), skip=3, progress=False)
    assert output.read_text() == "A\nB\nC\n"


def test_the_command_refuses_to_overwrite_an_output(run_dir, tmp_path, capsys):
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("a\n")
    output.write_text("keep me\n")
    argv = ["--model-dir", str(run_dir), "--src", str(source), "--output", str(output),
            "--quiet"]
    assert translate_cli.main(argv) == 2  # (before the model is loaded)
    assert "already exists; give --resume" in capsys.readouterr().err
    assert output.read_text() == "keep me\n"
    with pytest.raises(SystemExit):
        translate_cli.main(["--model-dir", str(run_dir), "--resume"])
    assert "--resume needs --output" in capsys.readouterr().err


# A stand-in translator (each line's words reversed, 20 ms a batch), so that a run lasts
# long enough to be killed midway without a model to trace in the killed process.
STAND_IN = """
import sys, time
import numpy as np
from transformer_tf.inference.batch import LoadedTranslator
from transformer_tf.inference.streaming import OutputFormat, translate_file

def reverse_words(lines):
    time.sleep(0.02)
    return ([[" ".join(line.split()[::-1])] for line in lines],
            np.array([[-len(line)] for line in lines], np.float32))

def stand_in(bpe_model):
    with open(bpe_model, "rb") as handle:
        return LoadedTranslator(reverse_words, handle.read(), 10**6, 1)

if __name__ == "__main__":
    source, output, bpe_model = sys.argv[1:4]
    translate_file(stand_in(bpe_model), source, output, batch_size=1, window=1,
                   output_format=OutputFormat(scores=True), progress=False)
"""


def test_a_killed_translation_resumes_to_the_same_file(tiny_multi30k, sentences, tmp_path):
    namespace = {}
    exec(STAND_IN, namespace)  # noqa: S102  (the same code the killed process runs)
    stand_in = namespace["stand_in"](tiny_multi30k.bpe_model_path)
    source = tmp_path / "in.txt"
    source.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    one_run = tmp_path / "one_run.txt"
    translate_file(stand_in, str(source), str(one_run), output_format=OutputFormat(scores=True),
                   progress=False)
    assert one_run.read_bytes().count(b"\n") == KILL_INPUT_LINES

    output = tmp_path / "resumed.txt"
    process = subprocess.Popen(
        [sys.executable, "-c", STAND_IN, str(source), str(output),
         str(tiny_multi30k.bpe_model_path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"})
    deadline = time.monotonic() + 300
    while (not output.exists() or output.read_bytes().count(b"\n") < 2) \
            and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL, process.stderr.read().decode()[-2000:]
    written = output.read_bytes()
    assert 2 <= written.count(b"\n") < KILL_INPUT_LINES
    assert one_run.read_bytes().startswith(written)  # in input order, as one run writes
    with open(output, "ab") as handle:  # as a kill in the middle of a write leaves it
        handle.write(b"ein halber Sa")

    skip = check_output(str(source), str(output), True, OutputFormat(scores=True))
    assert skip == written.count(b"\n")
    assert output.read_bytes() == written  # the partial line cut off
    translate_file(stand_in, str(source), str(output), skip=skip, batch_size=16, window=64,
                   output_format=OutputFormat(scores=True), progress=False)
    assert output.read_bytes() == one_run.read_bytes()


def test_the_command_resumes_an_output(translator, run_dir, sentences, tmp_path, monkeypatch,
                                       capsys, caplog):
    """translate --src --output --resume, with the model loaded once for the module."""
    import transformer_tf.inference.batch as batch_module

    monkeypatch.setattr(batch_module, "load_translator", lambda **_: translator)
    lines = sentences[:20]
    expected, _ = translate_lines(translator, lines, batch_size=8, progress=False)
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    output.write_text("".join(h[0] + "\n" for h in expected[:7]) + "partial line",
                      encoding="utf-8")
    argv = ["--model-dir", str(run_dir), "--src", str(source), "--output", str(output),
            "--batch-size", "4", "--window", "6", "--quiet", *SEARCH]
    assert translate_cli.main([*argv, "--resume"]) == 0
    assert output.read_text(encoding="utf-8") == "".join(h[0] + "\n" for h in expected)
    assert any("cut 12 byte(s)" in r.getMessage() for r in caplog.records)
    capsys.readouterr()

    # --src alone writes to stdout, as the stdin path does.
    assert translate_cli.main(argv[:4] + argv[6:]) == 0
    assert capsys.readouterr().out == "".join(h[0] + "\n" for h in expected)


def test_lines_typed_at_a_terminal_are_answered_one_at_a_time(translator, run_dir, sentences,
                                                               stdin_read_by_windows,
                                                               monkeypatch, capsys):
    import transformer_tf.inference.batch as batch_module

    monkeypatch.setattr(batch_module, "load_translator", lambda **_: translator)
    lines = sentences[:3] + [""] + sentences[3:5]
    expected, _ = translate_lines(translator, lines, batch_size=8, progress=False)
    printed = io.StringIO()
    monkeypatch.setattr(sys, "stdout", printed)
    monkeypatch.setattr(sys, "stdin", stdin_read_by_windows(lines, printed, typed=True))
    assert translate_cli.main(["--model-dir", str(run_dir), *SEARCH]) == 0
    assert printed.getvalue() == "".join(h[0] + "\n" for h in expected)
    assert "each line as it is entered" in capsys.readouterr().err


@pytest.fixture(scope="module")
def nbest_translator(run_dir):
    decoding = source_decoding(model_dir=run_dir).replace(beam_size=2, max_extra_length=3)
    return load_translator(model_dir=str(run_dir), decoding=decoding, n_best=2)


def test_piped_lines_are_answered_a_window_at_a_time(nbest_translator, run_dir, sentences,
                                                     stdin_read_by_windows, monkeypatch):
    """From a pipe, --window 2: each window's n-best lines are printed before the next
    window is read, numbered on across windows, and equal to the whole input's."""
    import transformer_tf.inference.batch as batch_module

    monkeypatch.setattr(batch_module, "load_translator", lambda **_: nbest_translator)
    lines = sentences[:2] + [""] + sentences[2:4]
    hypotheses, scores = translate_lines(nbest_translator, lines, batch_size=8,
                                         progress=False)
    output_format = OutputFormat(n_best=2)
    expected = "".join(output_format.format(number, h, s)
                       for number, (h, s) in enumerate(zip(hypotheses, scores)))
    printed = io.StringIO()
    monkeypatch.setattr(sys, "stdout", printed)
    monkeypatch.setattr(sys, "stdin", stdin_read_by_windows(lines, printed, window=2,
                                                            per_line=2))
    assert translate_cli.main(["--model-dir", str(run_dir), "--beam-size", "2",
                               "--max-extra-length", "3", "--n-best", "2", "--window", "2",
                               "--quiet"]) == 0
    # The same lines; a score may differ in its last printed digit (other batches).
    got = [line.split(" ||| ") for line in printed.getvalue().splitlines()]
    want = [line.split(" ||| ") for line in expected.splitlines()]
    assert [row[:2] for row in got] == [row[:2] for row in want]
    assert [row[0] for row in got] == [str(n) for n in range(5) for _ in range(2)]
    np.testing.assert_allclose([float(row[2]) for row in got],
                               [float(row[2]) for row in want], atol=2e-4)


def test_the_command_refuses_to_resume_in_another_format(translator, nbest_translator,
                                                         run_dir, sentences, tmp_path,
                                                         monkeypatch, capsys):
    """The audit's case: two inputs translated with --n-best 2, then six resumed without
    it exited 0 with inputs 3-4 missing. Now refused (exit 2, the file left as it is);
    resumed with --n-best 2, the file holds all six inputs' groups, as one run writes."""
    import transformer_tf.inference.batch as batch_module

    monkeypatch.setattr(batch_module, "load_translator",
                        lambda **kwargs: nbest_translator if kwargs["n_best"] == 2
                        else translator)
    two, six = tmp_path / "two.en", tmp_path / "six.en"
    two.write_text("\n".join(sentences[:2]) + "\n", encoding="utf-8")
    six.write_text("\n".join(sentences[:6]) + "\n", encoding="utf-8")
    output, one_run = tmp_path / "o.txt", tmp_path / "one_run.txt"

    def translate(source, out, *options):
        return translate_cli.main(["--model-dir", str(run_dir), "--src", str(source),
                                   "--output", str(out), "--quiet", "--beam-size", "2",
                                   "--max-extra-length", "3", *options])

    assert translate(two, output, "--n-best", "2") == 0
    written = output.read_bytes()
    capsys.readouterr()
    for options in (["--resume"], ["--resume", "--scores"], ["--resume", "--n-best", "1"]):
        assert translate(six, output, *options) == 2
        err = capsys.readouterr().err
        assert f"error: {output}: was written with --n-best 2, this run has" in err
        assert output.read_bytes() == written

    assert translate(six, output, "--resume", "--n-best", "2") == 0
    assert translate(six, one_run, "--n-best", "2") == 0

    def numbers_and_texts(path):
        return [tuple(line.split(" ||| ")[:2])
                for line in path.read_text(encoding="utf-8").splitlines()]

    resumed = numbers_and_texts(output)
    assert [int(number) for number, _ in resumed] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert resumed == numbers_and_texts(one_run)


def test_a_batch_that_does_not_fit_is_split_down_to_one_sentence():
    """The stand-in allocator fails for more than 3 rows (on every call): 10 rows are
    translated as 5 + 5, then 2 + 3 each; the outputs are those of one call."""
    calls = []

    def translate_batch(lines):
        calls.append(len(lines))
        if len(lines) > 3:
            raise tf.errors.ResourceExhaustedError(None, None, "OOM (injected)")
        return [[line[::-1]] for line in lines], np.array([[len(line)] for line in lines],
                                                          np.float32)

    lines = [f"sentence {i}" + "!" * i for i in range(10)]
    texts, scores = translate_splitting(translate_batch, lines)
    assert texts == [[line[::-1]] for line in lines]
    np.testing.assert_array_equal(scores[:, 0], [len(line) for line in lines])
    assert calls == [10, 5, 2, 3, 5, 2, 3]

    calls.clear()
    with pytest.raises(tf.errors.ResourceExhaustedError):
        translate_splitting(lambda lines: translate_batch(lines * 4), ["too long alone"])
    assert calls == [4]


def test_translate_lines_splits_what_does_not_fit(translator, sentences):
    """The real model behind an allocator that fails on the first two calls whatever the
    size: the same outputs as without failures."""
    failures = itertools.count()

    def failing(lines):
        if next(failures) < 2:
            raise tf.errors.ResourceExhaustedError(None, None, "OOM (injected)")
        return translator.translate_batch(lines)

    flaky = LoadedTranslator(failing, translator.bpe_model_proto, translator.max_source_tokens,
                             n_best=1, owner=translator.owner)
    lines = sentences[:16]
    expected, _ = translate_lines(translator, lines, batch_size=8, progress=False)
    got, _ = translate_lines(flaky, lines, batch_size=8, progress=False)
    assert got == expected
