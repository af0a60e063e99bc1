"""Reading hypothesis and reference files: one segment per line, strict UTF-8.

A file of N segments has N lines; the final newline is optional ("a\\nb" and "a\\nb\\n" both
hold 2 segments), a trailing "\\r" (Windows line ends) is dropped, and a UTF-8 byte-order mark
at the start is ignored. Only "\\n" separates lines (not the other Unicode line breaks that
`str.splitlines` honours, which may occur inside a sentence). Files ending in ".gz" are
decompressed. (The same reader as for corpora, `data.text_lines.iter_lines`.)

A hypothesis file whose every line ends in a tab and a number (what `translate --scores`
writes: "translation<TAB>-1.0039") is refused (`refuse_score_fields`): the numbers would
be scored as words, silently lowering BLEU.

Errors: `EvaluationInputError` for a file that cannot be read or scored;
`LineCountMismatchError` (the corpus reader's class, `data.text_lines`, re-exported here) when
hypotheses and references differ in length.
"""
from __future__ import annotations

import os
import re
from typing import Sequence

from transformer_tf.data.text_lines import (
    CorpusError,
    LineCountMismatchError,
    iter_lines,
)

__all__ = [
    "EvaluationInputError",
    "LineCountMismatchError",
    "read_lines",
    "read_hypotheses_and_references",
    "refuse_score_fields",
    "SCORE_PATTERN",
]

# A number as `translate` prints a score (its --scores and --n-best lines end in one).
SCORE_PATTERN = r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|inf|nan)"
# A tab and a number at the end of a line: the score field `translate --scores` appends.
_SCORE_FIELD = re.compile(r"\t" + SCORE_PATTERN + r"\Z")


class EvaluationInputError(ValueError):
    """An input file cannot be scored; the message names the file (and line) at fault."""


def read_lines(path: str | os.PathLike) -> list[str]:
    """The lines of a UTF-8 text file, without their line ends (a leading BOM dropped).

    Reads with the corpus reader `transformer_tf.data.text_lines.iter_lines`, so segment files
    and corpora follow the same rules and report errors the same way.

    Raises:
      EvaluationInputError: the file is missing, holds bytes that are not UTF-8 (the
        message gives the file, the 1-based line number and the 0-based byte offset), or
        is a damaged .gz file (the message gives the line reached).
    """
    try:
        return list(iter_lines(path))
    except CorpusError as error:  # missing, not UTF-8, a damaged .gz
        raise EvaluationInputError(str(error)) from error


def refuse_score_fields(path: str | os.PathLike, lines: Sequence[str]) -> None:
    """Refuse translations that carry a score field: every line of `path` ending in a tab
    and a number, as `translate --scores` writes them.

    Refused rather than warned about: a warning still prints a wrong score (and --json
    readers never see it), while refusing loses nothing (the file is not touched) and one
    command strips the field. Only a file where every line has the field is refused, so
    a tab inside some translations is not taken for a score.

    Raises:
      EvaluationInputError: naming the file and showing its first line.
    """
    if not lines or not all(_SCORE_FIELD.search(line) for line in lines):
        return
    first = lines[0] if len(lines[0]) <= 60 else lines[0][:57] + "..."
    name = os.fspath(path)
    strip = "pipe it through `cut -f1`" if name == "<stdin>" else f"`cut -f1 {name}`"
    raise EvaluationInputError(
        f"{name}:1: {first!r}: every line ends in a tab and a number, the score field "
        "`translate --scores` writes; the numbers would be read as words of the "
        f"translations. Strip it first ({strip} keeps the text alone), or translate "
        "without --scores")


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
      EvaluationInputError: unreadable or non-UTF-8 file, hypotheses with a score field
        (`refuse_score_fields`), or no reference file given.
      LineCountMismatchError: a reference file's line count differs from the hypotheses'.
    """
    if isinstance(ref_paths, (str, os.PathLike)):
        ref_paths = [ref_paths]
    ref_paths = list(ref_paths)
    if not ref_paths:
        raise EvaluationInputError("no reference file given")
    hypotheses = read_lines(hyp_path)
    refuse_score_fields(hyp_path, hypotheses)
    streams = []
    for ref_path in ref_paths:
        references = read_lines(ref_path)
        if len(references) != len(hypotheses):
            raise LineCountMismatchError(
                hyp_path, len(hypotheses), ref_path, len(references),
                f"line counts differ: hypothesis file {os.fspath(hyp_path)} has "
                f"{len(hypotheses)} lines but reference file {os.fspath(ref_path)} has "
                f"{len(references)} lines; each hypothesis line must translate the same "
                f"line of the references"
            )
        streams.append(references)
    return hypotheses, streams
