"""Reading hypothesis and reference files: one segment per line, strict UTF-8.

A file of N segments has N lines; the final newline is optional ("a\\nb" and "a\\nb\\n" both
hold 2 segments), a trailing "\\r" (Windows line ends) is dropped, and a UTF-8 byte-order mark
at the start is ignored. Only "\\n" separates lines (not the other Unicode line breaks that
`str.splitlines` honours, which may occur inside a sentence). Files ending in ".gz" are
decompressed.
"""
from __future__ import annotations

import gzip
import os
from typing import Sequence

__all__ = [
    "EvaluationInputError",
    "LineCountMismatchError",
    "read_lines",
    "read_hypotheses_and_references",
]


class EvaluationInputError(ValueError):
    """An input file cannot be scored; the message names the file (and line) at fault."""


class LineCountMismatchError(EvaluationInputError):
    """Hypothesis and reference files hold different numbers of lines."""


def read_lines(path: str | os.PathLike) -> list[str]:
    """The lines of a UTF-8 text file, without their line ends.

    Raises:
      EvaluationInputError: the file is missing or unreadable, or holds bytes that are not
        UTF-8 (the message gives the file, the 1-based line number and the byte offset).
    """
    path = os.fspath(path)
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as error:
        raise EvaluationInputError(f"cannot read {path}: {error}") from error
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data:
        return []
    raw_lines = data.split(b"\n")
    if raw_lines[-1] == b"":
        raw_lines.pop()  # the file's final newline ends the last line; it is not a new one
    lines = []
    for number, raw in enumerate(raw_lines, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            bad = raw[error.start:error.start + 4]
            raise EvaluationInputError(
                f"{path}: line {number}: invalid UTF-8 at byte {error.start + 1} of the line "
                f"({bad!r}: {error.reason}); convert the file to UTF-8"
            ) from error
        lines.append(line[:-1] if line.endswith("\r") else line)
    return lines


def read_hypotheses_and_references(
    hyp_path: str | os.PathLike, ref_paths: str | os.PathLike | Sequence[str | os.PathLike]
) -> tuple[list[str], list[list[str]]]:
    """Read a hypothesis file and one or more reference files of equal line counts.

    Args:
      hyp_path: the system output, one segment per line.
      ref_paths: a reference file, or a sequence of them (several references per segment).

    Returns:
      (hypotheses, reference_streams): the hypothesis lines, and one list of lines per
      reference file (sacrebleu's layout: reference_streams[k][i] is reference k of line i).

    Raises:
      EvaluationInputError: unreadable or non-UTF-8 file, or no reference file given.
      LineCountMismatchError: a reference file's line count differs from the hypotheses'.
    """
    if isinstance(ref_paths, (str, os.PathLike)):
        ref_paths = [ref_paths]
    ref_paths = list(ref_paths)
    if not ref_paths:
        raise EvaluationInputError("no reference file given")
    hypotheses = read_lines(hyp_path)
    streams = []
    for ref_path in ref_paths:
        references = read_lines(ref_path)
        if len(references) != len(hypotheses):
            raise LineCountMismatchError(
                f"line counts differ: hypothesis file {os.fspath(hyp_path)} has "
                f"{len(hypotheses)} lines but reference file {os.fspath(ref_path)} has "
                f"{len(references)} lines; each hypothesis line must translate the same "
                f"line of the references"
            )
        streams.append(references)
    return hypotheses, streams
