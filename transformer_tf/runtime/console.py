"""The console a user sees: what they need by default, library noise only with --verbose.

Every command (transformer_tf.cli.*) calls `console.session(verbose)` right after parsing
its arguments, before anything imports TensorFlow. Quiet (the default), it

- sets TF_CPP_MIN_LOG_LEVEL=2 (TensorFlow's C++ INFO and WARNING lines off) unless the user
  set the variable: then their level stands;
- filters, at file-descriptor level (C++ libraries write to fd 2 directly, past Python;
  see `StderrFilter`), the lines TensorFlow's libraries print whatever that level says:
  the start-up lines written before TensorFlow reads it ("All log messages before
  absl::InitializeLog()", `cudart_stub.cc` "Could not find cuda drivers",
  `cpu_feature_guard.cc` "rebuild TensorFlow with the appropriate compiler flags"),
  "failed call to cuInit" on machines without a GPU, oneDNN's "supports DT_INT64 only on
  platforms with AVX-512" (with TF_ENABLE_ONEDNN_OPTS=1 on other CPUs), and sentencepiece's
  "precompiled_charsmap is empty" (logged by the tensorflow-text op each time a tokenizer
  resource is created; that copy of sentencepiece has no public log-level switch), also
  when such a line lands after a progress bar on the bar's line. Each such line is rated
  at a TensorFlow log level (`RATED_LINES`; the two errors above are not actionable, so
  they rate as warnings) and dropped when the level in force is above its rating: the
  user's own TF_CPP_MIN_LOG_LEVEL is honoured both ways, 2 or 3 as quiet as the default
  (3 also drops absl ERROR lines, as TensorFlow does), 1 shows the warnings, 0 shows every
  line. Every other byte reaches the terminal unchanged (progress bars too: pieces ending
  in "\\r" are passed on at once);
- hides Keras' "`shuffle=True` was passed" warning (we shuffle in tf.data, on purpose) and
  its "Your input ran out of data" (said at the end of every pass over the finite
  validation set; our training data repeats), absl's INFO lines and TensorFlow's
  Python-side WARNINGs (checkpoint-restore chatter; our own code turns real problems into
  errors).

`--verbose` (or TRANSFORMER_TF_VERBOSE=1 in the environment, its default) leaves all of it
alone. The session ends (fd 2 restored, pending output flushed) when the `with` block
exits, so a command run in-process (tests) leaves the process as it found it. This module
imports neither TensorFlow nor Keras.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import signal
import subprocess
import sys
import warnings
from typing import Iterator

LEVEL_VARIABLE = "TF_CPP_MIN_LOG_LEVEL"
QUIET_LEVEL = 2
VERBOSE_VARIABLE = "TRANSFORMER_TF_VERBOSE"
_NOT_VERBOSE = ("", "0", "false", "no", "off")

# The lines quiet mode knows (bytes, without their terminator), each rated at the
# TensorFlow log level of its kind (0 INFO, 1 WARNING, 2 ERROR): a line is dropped when the
# level in force is above its rating. absl's C++ lines carry their own: I, W or E.
ABSL_PREFIX = rb"\d{4} \d\d:\d\d:[\d.]+ +\d+ "  # after the severity letter: date, time, thread
ABSL_SEVERITIES = {b"I": 0, b"W": 1, b"E": 2}
RATED_LINES = (
    (1, (rb"WARNING: All log messages before absl::InitializeLog\(\) is called are "
         rb"written to STDERR")),
    # Errors in name only, so rated as warnings: no GPU on a machine without one; and, with
    # TF_ENABLE_ONEDNN_OPTS=1 on a CPU without AVX-512, at every int64 op, Eigen's kernel
    # instead of oneDNN's.
    (1, rb"E" + ABSL_PREFIX + rb"cuda_\w+\.cc:\d+\] failed call to cuInit.*"),
    (1, rb"E" + ABSL_PREFIX + (rb"util\.cc:\d+\] oneDNN supports DT_INT64 only on "
                               rb"platforms with AVX-512\..*")),
    (0, rb"To enable the following instructions: .* rebuild TensorFlow .*"),  # (an I line's)
    (0, rb"normalizer\.cc\(\d+\) LOG\(INFO\) precompiled_charsmap is empty\..*"),
)
# A line that has begun like this may still become noise: hold it until it ends.
NOISE_STARTS = (b"WARNING: All log", b"I0", b"I1", b"W0", b"W1", b"E0", b"E1",
                b"To enable the", b"normalizer.cc(")


def is_terminal(stream=None) -> bool:
    """Whether `stream` (default sys.stdout) is a terminal; False for a file, a pipe or a
    stream that cannot tell. Commands read or print differently for a person at a terminal
    (progress redrawn in place, a sentence answered as soon as it is typed) than for a log
    file or another program."""
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:  # a closed stream
        return False


def add_verbose_flag(parser) -> None:
    """The `--verbose` option every command has (on by default when the environment has
    TRANSFORMER_TF_VERBOSE=1)."""
    parser.add_argument("--verbose", action="store_true", default=verbose_by_environment(),
                        help="show TensorFlow's, Keras' and sentencepiece's own log lines "
                             "(start-up, devices, warnings) and the traceback of an error; "
                             f"quiet by default ({VERBOSE_VARIABLE}=1 makes it the default)")


def verbose_by_environment() -> bool:
    """Whether TRANSFORMER_TF_VERBOSE asks for --verbose (any value but "", 0, false, no,
    off)."""
    return os.environ.get(VERBOSE_VARIABLE, "").strip().lower() not in _NOT_VERBOSE


def level_in_force(value: str) -> int:
    """The TensorFlow log level a TF_CPP_MIN_LOG_LEVEL value sets, read as TensorFlow reads
    it (a leading integer, else 0), within 0..3."""
    number = re.match(r"\s*([+-]?\d+)", value)
    return min(max(int(number.group(1)) if number else 0, 0), 3)


@functools.cache
def noise_lines(level: int) -> re.Pattern:
    """The whole lines (bytes, terminator removed) dropped at TensorFlow log level `level`
    (none at 0)."""
    letters = b"".join(letter for letter, rating in ABSL_SEVERITIES.items() if rating < level)
    kinds = [pattern for rating, pattern in RATED_LINES if rating < level]
    if letters:
        kinds.append(b"[" + letters + b"]" + ABSL_PREFIX + rb"[\w.]+:\d+\] .*")
    return re.compile(b"|".join(kinds) or rb"(?!)")  # (?!): matches nothing


def is_noise(line: bytes, level: int = QUIET_LEVEL) -> bool:
    """True for a whole stderr line (terminator removed) that quiet mode drops at `level`."""
    return noise_lines(level).fullmatch(line.rstrip(b"\r")) is not None


def _may_become_noise(partial: bytes) -> bool:
    return any(partial.startswith(s) or s.startswith(partial) for s in NOISE_STARTS)


def _without_noise(piece: bytes, tail_pattern: re.Pattern) -> bytes:
    """A piece ending in "\n" or "\r", without the noise line it ends with (if any):
    the whole piece, or only its tail after output that had no terminator."""
    tail = tail_pattern.search(piece[:-1])
    return piece if tail is None else piece[:tail.start()]


def _held_from(partial: bytes) -> int:
    """Where the part of an unterminated piece that may still become noise begins
    (len(partial): nothing to hold)."""
    return next((i for i in range(len(partial)) if _may_become_noise(partial[i:])),
                len(partial))


def filter_stream(source, sink, level: int = QUIET_LEVEL) -> None:
    """Copies bytes from `source` to `sink` (binary files, unbuffered), dropping the
    `is_noise` lines of `level`, also those that follow unterminated output on its line (a
    progress bar's last "\r" piece, then sentencepiece's line as the next pass's tokenizer
    is created); a partial line is passed on at once, except a tail that may become noise."""
    tail_pattern = re.compile(rb"(?:" + noise_lines(level).pattern + rb")\r?\Z")
    # read1: what the pipe has now. A buffered read(n) waits for n bytes or the end, which
    # would hold every log line and progress bar until the command exits.
    read = getattr(source, "read1", source.read)
    pending = b""
    while chunk := read(1 << 16):
        pending += chunk
        out = []
        for piece in re.split(rb"(?<=[\n\r])", pending):
            if piece.endswith((b"\n", b"\r")):
                out.append(_without_noise(piece, tail_pattern))
                pending = b""
            else:
                pending = piece
        held = _held_from(pending)
        out.append(pending[:held])
        pending = pending[held:]
        sink.write(b"".join(out))
        sink.flush()
    if pending and not is_noise(pending, level):
        sink.write(pending)
        sink.flush()


class StderrFilter:
    """Replaces fd 2 by a pipe into a small filter process (this file run as a script:
    standard library only) that writes what arrives to the original stderr, dropping
    `is_noise` lines of the given level. A process, not a thread: when the command dies
    abruptly (a C++ CHECK failure, a segfault, SIGKILL) the filter still passes on its last
    words. It ignores Ctrl-C, which reaches the whole process group, so it outlives the
    command's traceback. `close()` restores fd 2 and waits for the filter to drain."""

    def __init__(self, level: int = QUIET_LEVEL):
        sys.stderr.flush()
        self._original = os.dup(2)
        read_end, write_end = os.pipe()
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-u", os.path.abspath(__file__), str(level)],
                stdin=read_end, stdout=self._original, stderr=self._original)
        finally:
            os.close(read_end)
        os.dup2(write_end, 2)
        os.close(write_end)

    def close(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            sys.stderr.flush()
        os.dup2(self._original, 2)  # our end of the pipe goes: the filter sees EOF
        os.close(self._original)
        try:  # (processes this command started may still hold the pipe open)
            self._process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass


QUIET_LOGGERS = {"absl": logging.WARNING, "tensorflow": logging.ERROR}
KERAS_WARNINGS = (r"`shuffle=True` was passed", r"Your input ran out of data")


@contextlib.contextmanager
def _quiet_python_side() -> Iterator[None]:
    saved = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    with warnings.catch_warnings():
        for message in KERAS_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        for name, level in QUIET_LOGGERS.items():
            logging.getLogger(name).setLevel(level)
        try:
            yield
        finally:
            for name, level in saved.items():
                logging.getLogger(name).setLevel(level)


@contextlib.contextmanager
def session(verbose: bool = False) -> Iterator[None]:
    """The console of one command (see the module docstring). Enter it before the first
    TensorFlow import: TF reads TF_CPP_MIN_LOG_LEVEL once, when it loads."""
    if verbose:
        yield
        return
    level = level_in_force(os.environ.setdefault(LEVEL_VARIABLE, str(QUIET_LEVEL)))
    stderr_filter = None
    if level > 0:
        try:
            stderr_filter = StderrFilter(level)
        except OSError:  # no usable stderr (a daemon?): nothing to keep quiet
            stderr_filter = None
    try:
        with _quiet_python_side():
            yield
    finally:
        if stderr_filter is not None:
            stderr_filter.close()


if __name__ == "__main__":  # the filter process of StderrFilter
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    filter_stream(sys.stdin.buffer, sys.stdout.buffer, int(sys.argv[1]))
