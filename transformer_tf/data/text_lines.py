"""Reading and checking parallel text files (one sentence per line, optional gzip).

Everything that can make a corpus unusable is found here, in Python, before any training
starts:

- source and target files with different line counts raise `LineCountMismatchError`,
  whose message names both paths and both counts;
- a line that is not valid UTF-8 raises `InvalidUtf8Error`, naming the file, the 1-based
  line number and the byte offset of the first bad byte in that line;
- a `.gz` file that is truncated, or not gzip at all, raises `DamagedArchiveError`, naming
  the file and the last line read whole;
- lines holding NUL or other control characters (Unicode category Cc other than tab) are
  counted and reported with a warning by `check_parallel_files`, or refused
  (`ControlCharacterError`) when asked to.

A UTF-8 byte-order mark at the start of a file is not text: `iter_lines` drops it.

Lines are split on b"\\n" only (never on other Unicode line separators such as U+2028, which
are ordinary characters inside a sentence); one trailing b"\\r" is removed as well. This is
exactly how `tf.data.TextLineDataset` splits lines, so a line number here is the index (+1)
of the same sentence in a tf.data pipeline over the same file.
"""
from __future__ import annotations

import gzip
import hashlib
import logging
import os
import re
import zlib
from pathlib import Path
from typing import BinaryIO, Iterator

PathLike = str | os.PathLike

logger = logging.getLogger(__name__)

UTF8_BOM = b"\xef\xbb\xbf"
# Unicode category Cc (C0, DEL, C1 controls) except tab; "\n" never occurs inside a line.
CONTROL_CHARACTERS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")


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


class DamagedArchiveError(CorpusError):
    """A `.gz` file is truncated or not gzip; the message names it and the line reached."""

    def __init__(self, path, lines_read: int, reason: str):
        self.path = str(path)
        self.lines_read = lines_read
        super().__init__(
            f"{self.path}:{lines_read + 1}: damaged gzip file ({reason}); "
            f"{lines_read} complete line(s) were read before it")


class ControlCharacterError(CorpusError):
    """Lines hold NUL or other control characters and the caller refuses them."""


def has_control_characters(line: str) -> bool:
    """True if `line` holds a NUL or another control character other than tab."""
    return CONTROL_CHARACTERS.search(line) is not None


def is_gzip_path(path: PathLike) -> bool:
    """True when `path` names a gzip file (by its `.gz` suffix)."""
    return str(path).endswith(".gz")


def open_binary(path: PathLike) -> BinaryIO:
    """Opens `path` for reading bytes, decompressing `.gz` files transparently."""
    path = Path(path)
    if path.is_dir():
        raise CorpusError(f"{path} is a directory; give the file itself")
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


def _raw_lines(path: PathLike) -> Iterator[bytes]:
    """The lines of `path` as bytes (terminators kept); gzip damage -> DamagedArchiveError."""
    with open_binary(path) as handle:
        count = 0
        lines = iter(handle)
        while True:
            try:
                raw = next(lines)
            except StopIteration:
                return
            except (EOFError, zlib.error, gzip.BadGzipFile) as error:
                reason = str(error) or type(error).__name__
                if isinstance(error, EOFError):
                    reason = f"it ends too early: truncated? {reason}"
                raise DamagedArchiveError(path, count, reason) from None
            count += 1
            yield raw


def iter_lines(path: PathLike) -> Iterator[str]:
    """Yields the lines of `path` as str, without line terminators (nor a UTF-8 BOM at the
    start of the file).

    Raises:
      InvalidUtf8Error: at the first line that is not valid UTF-8.
      DamagedArchiveError: a `.gz` file is truncated or not gzip.
      CorpusError: if the file does not exist.
    """
    for number, raw in enumerate(_raw_lines(path), start=1):
        raw = strip_newline(raw)
        if number == 1 and raw.startswith(UTF8_BOM):
            raw = raw[len(UTF8_BOM):]
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise InvalidUtf8Error(path, number, error.start, error.reason) from None


def count_lines(path: PathLike) -> int:
    """Number of lines of `path` (a last line without a newline counts), checking UTF-8."""
    return sum(1 for _ in iter_lines(path))


def scan_lines(path: PathLike) -> tuple[int, list[int]]:
    """(number of lines, 1-based numbers of the lines with control characters) of `path`,
    checking UTF-8 and gzip as `iter_lines` does."""
    count, flagged = 0, []
    for count, line in enumerate(iter_lines(path), start=1):
        if has_control_characters(line):
            flagged.append(count)
    return count, flagged


def _report_control_characters(path: PathLike, flagged: list[int], reject: bool) -> None:
    if not flagged:
        return
    shown = ", ".join(str(n) for n in flagged[:5]) + (", ..." if len(flagged) > 5 else "")
    message = (f"{path}: {len(flagged)} line(s) hold NUL or other control characters "
               f"(line {shown})")
    if reject:
        raise ControlCharacterError(f"{message}; clean the file, or prepare it without "
                                    "--reject-control-characters to keep them")
    logger.warning("%s; kept as they are (--reject-control-characters refuses them)", message)


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


def check_parallel_files(source_path: PathLike, target_path: PathLike,
                         reject_control_characters: bool = False) -> int:
    """Checks that two files form a parallel corpus and returns its number of lines.

    Lines with control characters (`has_control_characters`) are counted and reported with
    a warning naming the file and the first such lines, or refused.

    Raises:
      LineCountMismatchError: the files have different line counts.
      InvalidUtf8Error: a line of either file is not valid UTF-8.
      DamagedArchiveError: a `.gz` file is truncated or not gzip.
      ControlCharacterError: with `reject_control_characters`, a line holds one.
      CorpusError: a file does not exist.
    """
    source_lines, source_flagged = scan_lines(source_path)
    target_lines, target_flagged = scan_lines(target_path)
    _report_control_characters(source_path, source_flagged, reject_control_characters)
    _report_control_characters(target_path, target_flagged, reject_control_characters)
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
