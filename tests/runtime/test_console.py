"""The quiet console (transformer_tf/runtime/console.py): library noise filtered at fd level and in
Python, everything else passed on unchanged, also under a TF_CPP_MIN_LOG_LEVEL of 2 or 3
the user set; --verbose (or TRANSFORMER_TF_VERBOSE=1) or a lower level brings the noise
back. (A real script's stderr: tests/rundir/test_lock.py, tests/export/test_quiet_commands.py.)"""
import io
import os
import pathlib
import subprocess
import sys
import threading
import warnings

import pytest

from transformer_tf.runtime import console

REPO = pathlib.Path(__file__).resolve().parents[2]
# Written by TensorFlow 2.21, tensorflow-text and the CUDA stub on a machine without a GPU
# (copied from this machine's console).
NOISE = [
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
    b"I0000 00:00:1795391757.649891    7622 cudart_stub.cc:31] Could not find cuda drivers on "
    b"your machine, GPU will not be used.\n",
    b"I0000 00:00:1795391758.874945    7622 cpu_feature_guard.cc:227] This TensorFlow binary "
    b"is optimized to use available CPU instructions in performance-critical operations.\n",
    b"To enable the following instructions: AVX2 FMA, in other operations, rebuild "
    b"TensorFlow with the appropriate compiler flags.\n",
    b"E0000 00:00:1795391767.521281    7622 cuda_platform.cc:52] failed call to cuInit: "
    b"INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)\n",
    b"normalizer.cc(51) LOG(INFO) precompiled_charsmap is empty. use identity normalization.\n",
    b"E0000 00:00:1795503135.525306   26486 util.cc:131] oneDNN supports DT_INT64 only on "
    b"platforms with AVX-512. Falling back to the default Eigen-based implementation if "
    b"present.\n",
]
KEPT = [
    b"E0000 00:00:1795391767.521281    7622 op_kernel.cc:1830] OP_REQUIRES failed: "
    b"out of memory\n",  # a real TF error stays
    b"INFO transformer_tf.training.fit: precision float32\n",
    b"\r 40%|####      | 4/10 [00:01<00:02]",  # a progress bar: no newline, passed on at once
    b"\r100%|##########| 10/10 [00:03<00:00]\n",
    "error: ünïcode stays\n".encode(),
]
CHILD = r"""
import os, sys
from transformer_tf.runtime import console
chunks = [bytes.fromhex(h) for h in sys.argv[2:]]
with console.session(verbose=sys.argv[1] == "1"):
    for chunk in chunks:
        os.write(2, chunk)
    sys.stderr.write("python-level line\n")
"""


def run_child(verbose: bool, level: str | None = None) -> bytes:
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = str(REPO)
    if level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    order = [NOISE[0], KEPT[0], NOISE[1], KEPT[1], NOISE[2], KEPT[2], KEPT[3], NOISE[3],
             KEPT[4], NOISE[4], NOISE[5], NOISE[6]]  # (a bar's "\r" pieces stay together)
    chunks = [line.hex() for line in order]
    done = subprocess.run([sys.executable, "-c", CHILD, "1" if verbose else "0", *chunks],
                          capture_output=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stderr


@pytest.mark.parametrize("level", [None, "2", "3"])
def test_quiet_console_drops_noise_and_keeps_everything_else(level):
    # At 3 the user asked TensorFlow for no ERROR lines either: KEPT[0] is one.
    kept = KEPT if level != "3" else KEPT[1:]
    assert run_child(verbose=False, level=level) == b"".join(kept) + b"python-level line\n"


@pytest.mark.parametrize("how", ["--verbose", "TF_CPP_MIN_LOG_LEVEL=0"])
def test_verbose_or_a_users_log_level_shows_everything(how):
    err = run_child(verbose=how == "--verbose", level="0" if how != "--verbose" else None)
    for line in NOISE + KEPT:
        assert line in err


# Each line's TensorFlow log level, by hand (0 INFO, 1 WARNING, 2 ERROR; None: never
# dropped): the two errors that need no action rate as warnings.
RATINGS = [(NOISE[0], 1), (NOISE[1], 0), (NOISE[2], 0), (NOISE[3], 0), (NOISE[4], 1),
           (NOISE[5], 0), (NOISE[6], 1), (KEPT[0], 2), (KEPT[1], None), (KEPT[4], None),
           ((b"W0000 00:00:1795391757.649891    7622 gpu_device.cc:2342] Cannot dlopen "
             b"some GPU libraries.\n"), 1),
           (b"F0000 00:00:1795391757.649891    7622 check.cc:12] Check failed: x\n", None)]


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_a_line_is_dropped_when_the_level_is_above_its_rating(level):
    for line, rating in RATINGS:
        expected = rating is not None and rating < level
        assert console.is_noise(line.rstrip(b"\n"), level) == expected, (level, line)


@pytest.mark.parametrize("value, level", [("0", 0), ("1", 1), ("2", 2), ("3", 3), (" 2", 2),
                                          ("2abc", 2), ("9", 3), ("-1", 0), ("", 0),
                                          ("quiet", 0)])
def test_the_level_is_read_as_tensorflow_reads_it(value, level):
    # TensorFlow reads a leading integer and takes 0 when there is none.
    assert console.level_in_force(value) == level


@pytest.mark.parametrize("value, verbose", [(None, False), ("1", True), ("true", True),
                                            ("yes", True), ("0", False), ("", False),
                                            ("off", False), ("False", False)])
def test_transformer_tf_verbose_is_the_default_of_verbose(monkeypatch, value, verbose):
    import argparse

    monkeypatch.delenv(console.VERBOSE_VARIABLE, raising=False)
    if value is not None:
        monkeypatch.setenv(console.VERBOSE_VARIABLE, value)
    parser = argparse.ArgumentParser()
    console.add_verbose_flag(parser)
    assert parser.parse_args([]).verbose is verbose
    assert parser.parse_args(["--verbose"]).verbose is True


@pytest.mark.parametrize("users_level", [None, "2"])
def test_sentencepiece_line_of_a_real_tokenizer_is_filtered(capfd, monkeypatch, users_level):
    import io

    import sentencepiece as spm

    from transformer_tf.data.bpe import BpeTokenizer

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["a small corpus for a tiny model", "another line"] * 20),
        model_writer=model, vocab_size=30, model_type="bpe", pad_id=0, unk_id=1, bos_id=2,
        eos_id=3, normalization_rule_name="identity", minloglevel=2)
    proto = model.getvalue()

    def tokenize_once():  # a new tokenizer creates a new sentencepiece resource
        tokenizer = BpeTokenizer(proto)
        return tokenizer.tokenize(["a line"]).to_list()

    capfd.readouterr()
    tokenize_once()
    assert b"precompiled_charsmap is empty" in capfd.readouterr().err.encode()
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL")
    if users_level is not None:
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", users_level)
    with console.session():
        tokenize_once()
    assert "precompiled_charsmap" not in capfd.readouterr().err
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "2"  # the user's, or ours


def test_keras_shuffle_warning_is_hidden_only_in_the_session():
    message = "`shuffle=True` was passed, but will be ignored since the data `x` was provided"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with console.session(verbose=True):
            warnings.warn(message)
        with console.session():
            warnings.warn(message)
    assert len(seen) == 1


def test_last_words_of_a_killed_command_reach_the_terminal():
    # A C++ CHECK failure or a segfault ends the process at once; what it wrote last must
    # not die with it in the filter.
    child = ("import os, signal\nfrom transformer_tf.runtime import console\n"
             "with console.session():\n"
             "    os.write(2, " + repr(NOISE[0]) + " + b'F0000 Check failed: last words\\n')\n"
             "    os.kill(os.getpid(), signal.SIGKILL)\n")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, timeout=60,
                          env={**env, "PYTHONPATH": str(REPO)})
    assert done.returncode == -9
    assert done.stderr == b"F0000 Check failed: last words\n"


def test_a_line_reaches_the_terminal_while_the_command_still_runs():
    # A log line or a warning must show when it is written, not when the command exits:
    # the child writes one line, then waits until the parent has read it.
    child = ("import os, sys\nfrom transformer_tf.runtime import console\n"
             "with console.session():\n"
             "    os.write(2, b'INFO step 500: validation BLEU 8.50\\n')\n"
             "    sys.stdin.readline()\n"
             "    os.write(2, b'done\\n')\n")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    process = subprocess.Popen([sys.executable, "-c", child], stdin=subprocess.PIPE,
                               stderr=subprocess.PIPE, env={**env, "PYTHONPATH": str(REPO)})
    try:
        first = _line_within(process.stderr, seconds=30)
        process.stdin.write(b"go\n")
        process.stdin.close()
        assert first == b"INFO step 500: validation BLEU 8.50\n"
        assert process.stderr.read() == b"done\n"
    finally:
        process.kill()
        process.wait(timeout=30)


def _line_within(stream, seconds: float) -> bytes | None:
    """The next line of a pipe, or None if none ends within `seconds`."""
    lines = []
    reader = threading.Thread(target=lambda: lines.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(seconds)
    return lines[0] if lines else None


class _Chunks:
    """A binary source that `read` returns in the given chunks."""

    def __init__(self, chunks):
        self.chunks = list(chunks)

    def read(self, _size):
        return self.chunks.pop(0) if self.chunks else b""


def _filtered(chunks) -> bytes:
    import io

    sink = io.BytesIO()
    console.filter_stream(_Chunks(chunks), sink)
    return sink.getvalue()


def test_noise_after_a_progress_bar_on_its_line_is_dropped_wherever_the_chunks_split():
    """tqdm's last "\\r" piece has no terminator; sentencepiece's line, written when the
    next pass creates its tokenizer, lands on the bar's line. Every split of the stream
    into two chunks, and one chunk per byte, give the same output."""
    stream = (b"\r 40%|####      | 4/10]" + NOISE[5] + b"\r 50%|#####     | 5/10]"
              + NOISE[1] + b"\r100%|##########| 10/10]\n" + KEPT[0])
    expected = (b"\r 40%|####      | 4/10]\r 50%|#####     | 5/10]\r100%|##########| 10/10]\n"
                + KEPT[0])
    assert _filtered([stream]) == expected
    for cut in range(1, len(stream)):
        assert _filtered([stream[:cut], stream[cut:]]) == expected, cut
    assert _filtered([bytes([b]) for b in stream]) == expected
    # A noise line ended by "\r\n" goes too (its "\n" stays, as an empty line).
    assert _filtered([NOISE[5].replace(b"\n", b"\r\n") + KEPT[1]]) == b"\n" + KEPT[1]


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_is_told_from_a_file_a_closed_stream_or_one_that_cannot_tell():
    assert console.is_terminal(_Terminal())
    assert not console.is_terminal(io.StringIO())
    closed = io.StringIO()
    closed.close()  # its isatty() raises ValueError
    assert not console.is_terminal(closed)
    assert not console.is_terminal(object())
