"""Translating a file as a stream (`translate --src FILE --output FILE`): memory bounded
whatever the input's size, output in input order, resumable after a kill.

The input is read lazily, `window` lines at a time. Each window is translated in
length-sorted batches (`batch.translate_lines`), and its output lines are written in
input order in one write, flushed and synced to disk, so memory holds one window and a
kill loses at most the window being written. Such an output file is resumed by counting
its complete lines (`resume_point`): a partial last line (a kill during a write) is cut
off, and the input lines already translated are skipped.
"""
from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import os
import pathlib
import sys
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from tqdm import tqdm

from transformer_tf.data.text_lines import open_binary, strip_newline
from transformer_tf.inference.batch import LoadedTranslator, translate_lines

logger = logging.getLogger(__name__)

_BLOCK = 1 << 20  # bytes read at a time when counting lines


@dataclasses.dataclass(frozen=True)
class OutputFormat:
    """How translations are printed: the best one per line (with `scores`, a tab and its
    score after it), or with n_best > 1, n_best 'LINE ||| translation ||| score' lines
    per input line (LINE counted from 0)."""

    n_best: int = 1
    scores: bool = False

    @property
    def lines_per_input(self) -> int:
        return self.n_best  # 1: one line; more: one per hypothesis

    def format(self, number: int, hypotheses: list[str], scores) -> str:
        """The output lines ("\\n" after each) of input line `number` (0-based)."""
        if self.n_best > 1:
            return "".join(f"{number} ||| {text} ||| {score:.4f}\n"
                           for text, score in zip(hypotheses, scores))
        if self.scores:
            return f"{hypotheses[0]}\t{scores[0]:.4f}\n"
        return hypotheses[0] + "\n"


def source_lines(handle: BinaryIO) -> Iterator[str]:
    """The lines of a binary stream as `translate` reads them: split at "\\n" only (one
    "\\r" before it dropped too), invalid UTF-8 as U+FFFD, so N lines in give N out."""
    for raw in handle:
        yield strip_newline(raw).decode("utf-8", errors="replace")


def count_source_lines(path) -> int:
    """Lines of `path` as `source_lines` reads them (a last line without "\\n" counts),
    counted in bytes (.gz decompressed)."""
    count, last = 0, b"\n"
    with open_binary(path) as handle:
        for block in iter(lambda: handle.read(_BLOCK), b""):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


def _end_of_line(handle: BinaryIO, wanted: int) -> int:
    """The byte offset just after the `wanted`-th "\\n" of `handle` (0 for none)."""
    if wanted == 0:
        return 0
    handle.seek(0)
    seen, offset = 0, 0
    for block in iter(lambda: handle.read(_BLOCK), b""):
        in_block = block.count(b"\n")
        if seen + in_block >= wanted:
            position = -1
            for _ in range(wanted - seen):
                position = block.index(b"\n", position + 1)
            return offset + position + 1
        seen += in_block
        offset += len(block)
    raise ValueError(f"fewer than {wanted} lines")  # the caller counted them: not reached


def resume_point(path, lines_per_input: int = 1) -> int:
    """Input lines already translated in `path`, an output file `translate_stream` wrote
    (0 if it does not exist): its complete lines, in whole groups of `lines_per_input`.
    Anything after the last whole group (a partial line or group, left by a kill during
    a write) is cut off the file, with a warning."""
    path = pathlib.Path(path)
    if not path.exists():
        return 0
    with open(path, "r+b") as handle:
        newlines = sum(block.count(b"\n") for block in iter(lambda: handle.read(_BLOCK), b""))
        size = handle.tell()
        done = newlines // lines_per_input
        keep = _end_of_line(handle, done * lines_per_input)
        if keep < size:
            handle.truncate(keep)
            handle.flush()
            os.fsync(handle.fileno())
            logger.warning("%s: cut %d byte(s) after its last complete %s (left by an "
                           "interrupted run)", path, size - keep,
                           "line" if lines_per_input == 1 else
                           f"group of {lines_per_input} lines")
    return done


def translate_stream(translator: LoadedTranslator, lines: Iterable[str], out: BinaryIO, *,
                     batch_size: int = 64, window: int = 1024,
                     output_format: OutputFormat = OutputFormat(), skip: int = 0,
                     total: int | None = None, progress: bool = True,
                     durable: bool = True) -> int:
    """Translate `lines` (any iterable, read lazily) into `out`, a binary stream, in input
    order; returns the number of input lines read (`skip` included).

    Args:
      skip: input lines whose output is already in `out` (a resumed file): read past,
        not translated.
      window: input lines read, sorted by length and batched together at a time; the
        memory held is that of one window.
      total: the number of input lines, for the progress bar (None: unknown).
      durable: after each window, sync `out` to disk (os.fsync), not only flush it.
    """
    iterator = iter(lines)
    number = sum(1 for _ in itertools.islice(iterator, skip))
    with tqdm(total=total, initial=number, unit="sent", disable=not progress,
              file=sys.stderr) as bar:
        while chunk := list(itertools.islice(iterator, window)):
            translations, scores = translate_lines(translator, chunk, batch_size,
                                                   progress=False, first_line=number + 1)
            out.write("".join(output_format.format(number + i, hypotheses, row_scores)
                              for i, (hypotheses, row_scores)
                              in enumerate(zip(translations, scores))).encode("utf-8"))
            out.flush()
            if durable:
                os.fsync(out.fileno())
            number += len(chunk)
            bar.update(len(chunk))
    return number


def check_output(source, output, resume: bool, output_format: OutputFormat) -> int:
    """Before anything is loaded: the input lines an existing `output` already holds
    (`resume_point`, with `resume`; 0 for a new file). Raises ValueError for an existing
    output without `resume` (it is left as it is), or one that is the `source` file."""
    if output is None:
        return 0
    path = pathlib.Path(output)
    if source is not None and path.exists() and path.resolve() == pathlib.Path(source).resolve():
        raise ValueError(f"{output}: is the input file (--src); write to another --output")
    if path.exists() and not resume:
        raise ValueError(f"{output}: already exists; give --resume to continue it after an "
                         "interrupted run, or another --output (it was left as it is)")
    return resume_point(path, output_format.lines_per_input)


def translate_file(translator: LoadedTranslator, source, output, *, skip: int = 0,
                   batch_size: int = 64, window: int = 1024,
                   output_format: OutputFormat = OutputFormat(), progress: bool = True) -> int:
    """`translate_stream` from the file `source` (None: stdin) to the file `output`
    (None: stdout), appending after the `skip` input lines it holds (`check_output`).
    Returns the number of input lines. Raises ValueError when the input has fewer lines
    than `skip` (the output is another input's)."""
    total = count_source_lines(source) if source is not None else None
    if total is not None and total < skip:
        raise ValueError(f"{output}: holds the translations of {skip} lines, but {source} has "
                         f"only {total}: is it the output of another input?")
    with contextlib.ExitStack() as files:
        handle = (files.enter_context(open_binary(source)) if source is not None
                  else sys.stdin.buffer)
        out = files.enter_context(open(output, "ab")) if output is not None else sys.stdout.buffer
        read = translate_stream(translator, source_lines(handle), out, batch_size=batch_size,
                                window=window, output_format=output_format, skip=skip,
                                total=total, progress=progress, durable=output is not None)
    if read < skip:
        raise ValueError(f"{output}: holds the translations of {skip} lines, but the input "
                         f"had only {read}: is it the output of another input?")
    return read
