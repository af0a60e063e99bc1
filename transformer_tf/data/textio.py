"""Reading and checking parallel text files (one sentence per line, optional gzip).

Everything that can make a corpus unusable is found here, in Python, before any training
starts:

- source and target files with different line counts raise `LineCountMismatchError`,
  whose message names both paths and both counts;
- a line that is not valid UTF-8 raises `InvalidUtf8Error`, naming the file, the 1-based
  line number and the byte offset of the first bad byte in that line.

Lines are split on b"\\n" only (never on other Unicode line separators such as U+2028, which
are ordinary characters inside a sentence); one trailing b"\\r" is removed as well. This is
exactly how `tf.data.TextLineDataset` splits lines, so a line number here is the index (+1)
of the same sentence in a tf.data pipeline over the same file.
"""
from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path
from typing import BinaryIO, Iterator

PathLike = str | os.PathLike


class CorpusError(ValueError):
    """A corpus file is missing, malformed or inconsistent with its pair."""


class LineCountMismatchError(CorpusError):
    """Two texts aligned line by line hold different numbers of lines: the source and
    target files of a parallel corpus, or translations and their references (the one
    class for both; `transformer_tf.evaluation` raises it too).

    Attributes:
      source_path, target_path: the two files (str), or None for lines held in memory.
      source_lines, target_lines: their numbers of lines.
    """

    def __init__(self, source_path, source_lines: int, target_path, target_lines: int,
                 message: str | None = None):
        """`message` replaces the default one, which names both files and both counts."""
        self.source_path = None if source_path is None else str(source_path)
        self.target_path = None if target_path is None else str(target_path)
        self.source_lines = source_lines
        self.target_lines = target_lines
        super().__init__(message or (
            f"parallel files differ in length: {self.source_path} has {source_lines} lines "
            f"but {self.target_path} has {target_lines} lines; line i of one must translate "
            "line i of the other"
        ))


class InvalidUtf8Error(CorpusError):
    """A line of a corpus file is not valid UTF-8."""

    def __init__(self, path, line_number: int, byte_offset: int, reason: str):
        self.path = str(path)
        self.line_number = line_number
        self.byte_offset = byte_offset
        super().__init__(
            f"{self.path}:{line_number}: invalid UTF-8 at byte {byte_offset} of the line "
            f"({reason})"
        )


def is_gzip_path(path: PathLike) -> bool:
    """True when `path` names a gzip file (by its `.gz` suffix)."""
    return str(path).endswith(".gz")


def open_binary(path: PathLike) -> BinaryIO:
    """Opens `path` for reading bytes, decompressing `.gz` files transparently."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"corpus file not found: {path}")
    if is_gzip_path(path):
        return gzip.open(path, "rb")
    return open(path, "rb")


def strip_newline(raw: bytes) -> bytes:
    """One line's bytes without its "\n" or "\r\n" (a lone "\r" is text, not a line end,
    as for tf.data.TextLineDataset)."""
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    return raw


def iter_lines(path: PathLike) -> Iterator[str]:
    """Yields the lines of `path` as str, without line terminators.

    Raises:
      InvalidUtf8Error: at the first line that is not valid UTF-8.
      CorpusError: if the file does not exist.
    """
    with open_binary(path) as handle:
        for number, raw in enumerate(handle, start=1):
            raw = strip_newline(raw)
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise InvalidUtf8Error(path, number, error.start, error.reason) from None


def count_lines(path: PathLike) -> int:
    """Number of lines of `path` (a last line without a newline counts), checking UTF-8."""
    return sum(1 for _ in iter_lines(path))


def iter_parallel_lines(source_path: PathLike, target_path: PathLike) -> Iterator[tuple[str, str]]:
    """Yields (source, target) line pairs; checks UTF-8 and equal length while streaming.

    The length check fires when the shorter file ends, so a caller that consumes the whole
    iterator either sees every pair or gets `LineCountMismatchError` (with both full counts).
    """
    source_iter = iter_lines(source_path)
    target_iter = iter_lines(target_path)
    count = 0
    while True:
        source = next(source_iter, None)
        target = next(target_iter, None)
        if source is None and target is None:
            return
        if source is None or target is None:
            # Count the rest of the longer file so the message gives both full counts.
            rest = 1 + sum(1 for _ in (target_iter if source is None else source_iter))
            source_lines = count if source is None else count + rest
            target_lines = count if target is None else count + rest
            raise LineCountMismatchError(source_path, source_lines, target_path, target_lines)
        count += 1
        yield source, target


def check_parallel_files(source_path: PathLike, target_path: PathLike) -> int:
    """Checks that two files form a parallel corpus and returns its number of lines.

    Raises:
      LineCountMismatchError: the files have different line counts.
      InvalidUtf8Error: a line of either file is not valid UTF-8.
      CorpusError: a file does not exist.
    """
    source_lines = count_lines(source_path)
    target_lines = count_lines(target_path)
    if source_lines != target_lines:
        raise LineCountMismatchError(source_path, source_lines, target_path, target_lines)
    return source_lines


def sha256_of_files(paths) -> str:
    """Hex SHA-256 over `paths`, in order, of each file's decompressed size and SHA-256
    ("{size}:" then the 32-byte digest, per file).

    Not the digest of the concatenation (`cat | sha256sum` gives another value); moving
    bytes between files changes it, and a .gz file and its plain copy agree.
    """
    digest = hashlib.sha256()
    for path in paths:
        file_digest = hashlib.sha256()
        size = 0
        with open_binary(path) as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                file_digest.update(block)
                size += len(block)
        digest.update(f"{size}:".encode())
        digest.update(file_digest.digest())
    return digest.hexdigest()


def sha256_of_raw_file(path: PathLike) -> str:
    """Hex SHA-256 of the bytes of `path` as stored (no decompression)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
