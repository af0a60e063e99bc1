"""Translating a file as a stream (`translate --src FILE --output FILE`): memory bounded
whatever the input's size, output in input order, resumable after a kill.

The input is read lazily, `window` lines at a time. Each window is translated in
length-sorted batches (`batch.translate_lines`), and its output lines are written in
input order in one write, flushed and synced to disk, so memory holds one window and a
kill loses at most the window being written. Such an output file is resumed by counting
its complete lines (`resume_point`): a partial last line (a kill during a write) is cut
off, and the input lines already translated are skipped. The lines show the format they
were written in (`--n-best`: "LINE ||| text ||| score", `--scores`: a tab and a score at
the end), and a resume in another format is refused rather than mixed into the file.
"""
from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import os
import pathlib
import re
import sys
from collections.abc import Iterable, Iterator
from typing import BinaryIO


from transformer_tf.data.text_lines import open_binary, strip_newline
from transformer_tf.evaluation.hypothesis_files import SCORE_PATTERN
from transformer_tf.inference.batch import LoadedTranslator, translate_lines
from transformer_tf.runtime.progress import counting

logger = logging.getLogger(__name__)

_BLOCK = 1 << 20  # bytes read at a time when counting lines
_NAMED_BAD_LINES = 5  # lines with invalid UTF-8 named one by one in warnings

# How an output line looks in each format (`OutputFormat.format`, read back by `_line_form`).
_SCORE = SCORE_PATTERN.encode()
_NBEST_LINE = re.compile(rb"(\d+) \|\|\| .* \|\|\| " + _SCORE, re.DOTALL)
_SCORED_LINE = re.compile(rb".*\t" + _SCORE, re.DOTALL)


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

    @property
    def kind(self) -> str:
        """"n-best", "scores" or "plain": the form of its lines (`_line_form`)."""
        if self.n_best > 1:
            return "n-best"
        return "scores" if self.scores else "plain"

    @property
    def options(self) -> str:
        """The `translate` options that give this format, as messages name them."""
        return {"n-best": f"--n-best {self.n_best}", "scores": "--scores",
                "plain": "neither --n-best nor --scores"}[self.kind]

    def writes(self, index: int, form: tuple[str, int]) -> bool:
        """Whether a line of `form` (`_line_form`) can be line `index` (from 0) of a file
        in this format. Any text is a plain translation, so "plain" takes every line."""
        if self.kind == "n-best":
            return form == ("n-best", index // self.n_best)
        return self.kind == "plain" or form[0] == self.kind

    def format(self, number: int, hypotheses: list[str], scores) -> str:
        """The output lines ("\\n" after each) of input line `number` (0-based)."""
        if self.n_best > 1:
            return "".join(f"{number} ||| {text} ||| {score:.4f}\n"
                           for text, score in zip(hypotheses, scores))
        if self.scores:
            return f"{hypotheses[0]}\t{scores[0]:.4f}\n"
        return hypotheses[0] + "\n"


def source_lines(handle: BinaryIO, name: str = "<stdin>") -> Iterator[str]:
    """The lines of a binary stream as `translate` reads them: split at "\\n" only (one
    "\\r" before it dropped too), invalid UTF-8 as U+FFFD, so N lines in give N out.

    A line with invalid UTF-8 is not refused (one bad line would sink the whole input) but
    warned about, naming `name` and the line (from 1): the first `_NAMED_BAD_LINES` each,
    the rest counted in one warning at the end."""
    bad = 0
    for number, raw in enumerate(handle, start=1):
        line = strip_newline(raw)
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as error:
            bad += 1
            if bad <= _NAMED_BAD_LINES:
                logger.warning("%s: line %d: invalid UTF-8 at byte %d (from 0); its bad bytes "
                               "read as U+FFFD", name, number, error.start)
            text = line.decode("utf-8", errors="replace")
        yield text
    if bad > _NAMED_BAD_LINES:
        logger.warning("%s: %d lines in all had invalid UTF-8 (the first %d named above), "
                       "their bad bytes read as U+FFFD", name, bad, _NAMED_BAD_LINES)


def count_source_lines(path) -> int:
    """Lines of `path` as `source_lines` reads them (a last line without "\\n" counts),
    counted in bytes (.gz decompressed)."""
    count, last = 0, b"\n"
    with open_binary(path) as handle:
        for block in iter(lambda: handle.read(_BLOCK), b""):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


def _line_form(line: bytes) -> tuple[str, int]:
    """What an output line (without its "\\n") looks like: ("n-best", the number of its
    input line) for 'LINE ||| text ||| score', ("scores", 0) for text, a tab and a score,
    else ("plain", 0)."""
    match = _NBEST_LINE.fullmatch(line)
    if match:
        return "n-best", int(match[1])
    return ("scores" if _SCORED_LINE.fullmatch(line) else "plain"), 0


def _written_with(handle: BinaryIO) -> str:
    """The options that wrote an output file, as its first lines show them: n-best lines
    numbered 0 (as many as --n-best), a score after a tab, or plain text."""
    handle.seek(0)
    forms = (_line_form(strip_newline(raw)) for raw in handle)
    kind, number = next(forms, ("plain", 0))
    if kind != "n-best":
        return OutputFormat(scores=kind == "scores").options
    if number != 0:
        return "n-best lines that do not start at input line 0"
    return f"--n-best {1 + sum(1 for _ in itertools.takewhile(('n-best', 0).__eq__, forms))}"


def _refusal(path, handle: BinaryIO, output_format: OutputFormat, number: int,
             line: bytes) -> ValueError:
    """The error for resuming `path` in `output_format` when its line `number` (from 1),
    `line`, is not one that format writes."""
    written = _written_with(handle)
    if written != output_format.options:
        return ValueError(
            f"{path}: was written with {written}, this run has {output_format.options}: "
            "resuming would mix two formats in the file and miscount the inputs it holds; "
            "resume with the options that wrote it, or write to another --output (the file "
            "was left as it is)")
    text = line.decode("utf-8", errors="replace")
    shown = text if len(text) <= 60 else text[:57] + "..."
    return ValueError(f"{path}: line {number}: {shown!r} is not a line that "
                      f"{output_format.options} writes: is the file another command's output? "
                      "Write to another --output (the file was left as it is)")


def resume_point(path, output_format: OutputFormat = OutputFormat()) -> int:
    """Input lines already translated in `path`, an output file `translate_stream` wrote
    (0 if it does not exist), to be continued in `output_format`.

    The file's lines must be those `output_format` writes, since an n-best file holds
    `n_best` lines per input and a mixed file is of no use: with --n-best N, line i
    (from 0) is 'i // N ||| text ||| score'; with --scores, each ends in a tab and a
    score; plain lines are any text, but a file whose every line has one of the other two
    forms was not written plain. Otherwise ValueError, naming the file and the options it
    was written with and those of this run (`OutputFormat.options`), or the line at
    fault; the file is left as it is.

    Its complete lines count, in whole groups of `output_format.lines_per_input`.
    Anything after the last whole group (a partial line or group, left by a kill during a
    write) is cut off the file, with a warning."""
    path = pathlib.Path(path)
    if not path.exists():
        return 0
    group = output_format.lines_per_input
    with open(path, "r+b") as handle:
        lines, offset, keep, kinds = 0, 0, 0, set()
        for raw in handle:
            if not raw.endswith(b"\n"):
                break  # a partial last line
            form = _line_form(raw[:-1])
            if not output_format.writes(lines, form):
                raise _refusal(path, handle, output_format, lines + 1, raw[:-1])
            kinds.add(form[0])
            lines, offset = lines + 1, offset + len(raw)
            if lines % group == 0:
                keep = offset
        if output_format.kind == "plain" and lines and "plain" not in kinds:
            handle.seek(0)
            raise _refusal(path, handle, output_format, 1, strip_newline(handle.readline()))
        size = handle.seek(0, os.SEEK_END)
        if keep < size:
            handle.truncate(keep)
            handle.flush()
            os.fsync(handle.fileno())
            logger.warning("%s: cut %d byte(s) after its last complete %s (left by an "
                           "interrupted run)", path, size - keep,
                           "line" if group == 1 else f"group of {group} lines")
    return lines // group


WINDOW_BATCHES = 16  # input lines read together by default: this many batches


def window_size(window: int | None, batch_size: int, typed: bool = False) -> int:
    """Input lines read, sorted by length and batched together: `window`, else
    WINDOW_BATCHES batches of `batch_size`; 1 for lines `typed` at a terminal (each
    answered as soon as it is entered)."""
    return 1 if typed else window or WINDOW_BATCHES * batch_size


def counted_windows(lines: Iterable[str], window: int, *, verb: str, progress: bool = True,
                    first: int = 0, total: int | None = None
                    ) -> Iterator[tuple[int, list[str]]]:
    """(number of its first line from 0, lines) for consecutive windows of `window` lines
    of `lines`, read lazily, the count starting at `first`; each window's lines are
    counted done (runtime.progress, "`verb` N of `total` sentences") once the caller
    asks for the next, and the closing line comes when `lines` ends."""
    iterator = iter(lines)
    number = first
    with counting(total, verb=verb, unit="sentences", bar_unit="sent", enabled=progress,
                  initial=first) as bar:
        while chunk := list(itertools.islice(iterator, window)):
            yield number, chunk
            number += len(chunk)
            bar.update(len(chunk))


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
    for first, chunk in counted_windows(iterator, window, verb="translated",
                                        progress=progress, first=number, total=total):
        translations, scores = translate_lines(translator, chunk, batch_size,
                                               progress=False, first_line=first + 1)
        out.write("".join(output_format.format(first + i, hypotheses, row_scores)
                          for i, (hypotheses, row_scores)
                          in enumerate(zip(translations, scores))).encode("utf-8"))
        out.flush()
        if durable:
            os.fsync(out.fileno())
        number = first + len(chunk)
    return number


def check_output(source, output, resume: bool, output_format: OutputFormat) -> int:
    """Before anything is loaded: the input lines an existing `output` already holds
    (`resume_point`, with `resume`; 0 for a new file). Raises ValueError, leaving the file
    as it is, for an existing output without `resume`, one that is the `source` file, or
    one written in another format than `output_format` (another --n-best, --scores given
    or not: `resume_point`)."""
    if output is None:
        return 0
    path = pathlib.Path(output)
    if source is not None and path.exists() and path.resolve() == pathlib.Path(source).resolve():
        raise ValueError(f"{output}: is the input file (--src); write to another --output")
    if path.exists() and not resume:
        raise ValueError(f"{output}: already exists; give --resume to continue it after an "
                         "interrupted run, or another --output (it was left as it is)")
    return resume_point(path, output_format)


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
        lines = source_lines(handle, str(source) if source is not None else "<stdin>")
        read = translate_stream(translator, lines, out, batch_size=batch_size, window=window,
                                output_format=output_format, skip=skip, total=total,
                                progress=progress, durable=output is not None)
    if read < skip:
        raise ValueError(f"{output}: holds the translations of {skip} lines, but the input "
                         f"had only {read}: is it the output of another input?")
    return read
