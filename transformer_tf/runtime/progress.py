"""Progress of a count of items (sentences translated, trees parsed) on stderr, shaped for
where stderr goes: on a terminal a bar redrawn in place (tqdm); in a log file, a pipe or CI
a plain line now and then, so that a log holds readable lines and not the bar's
carriage-return frames:

    VERB N of TOTAL UNIT (P%) · R UNIT/s · M min left

and one when the count ends ("VERB N UNIT in S s (R UNIT/s)"), e.g. "translated" and
"sentences" for a test set.
Lines come every `every_seconds` (the pace of training's progress lines), the first one
only after that long: a count that ends sooner prints its last line alone.
"""
from __future__ import annotations

import contextlib
import sys
import time
from typing import Iterator

from tqdm import tqdm

from transformer_tf.runtime.console import is_terminal

LINE_EVERY_SECONDS = 30.0


class CountLines:
    """Counts items and prints a line on `stream` every `every_seconds` and at `close`.

    Args:
      total: the number of items to come, or None when unknown (no share, no time left).
      verb, unit: the words of the line, e.g. "translated", "sentences".
      initial: items done before this count started (a resumed output file): counted in
        the share, not in the pace.
      clock: seconds (monotonic), for tests.
    """

    def __init__(self, total: int | None, *, verb: str, unit: str, stream=None,
                 initial: int = 0, every_seconds: float = LINE_EVERY_SECONDS,
                 clock=time.monotonic):
        self.total, self.verb, self.unit = total, verb, unit
        self.stream = sys.stderr if stream is None else stream
        self.every_seconds, self.clock = every_seconds, clock
        self.initial = self.done = initial
        self._started = self._last_line = clock()

    def describe(self, now: float) -> str:
        """The line for the count so far at `now`."""
        seconds = max(now - self._started, 1e-9)
        rate = (self.done - self.initial) / seconds
        parts = [f"{self.verb} {self.done}"]
        if self.total:
            parts[0] += f" of {self.total} {self.unit} ({100.0 * self.done / self.total:.0f}%)"
        else:
            parts[0] += f" {self.unit}"
        parts.append(f"{rate:.1f} {self.unit}/s")
        if self.total and rate > 0:
            parts.append(f"{(self.total - self.done) / rate / 60.0:.1f} min left")
        return " · ".join(parts)

    def update(self, count: int) -> None:
        self.done += count
        now = self.clock()
        if now - self._last_line >= self.every_seconds:
            self._print(self.describe(now))
            self._last_line = now

    def close(self) -> None:
        seconds = self.clock() - self._started
        counted = self.done - self.initial
        rate = f" ({counted / seconds:.1f} {self.unit}/s)" if seconds > 0 else ""
        self._print(f"{self.verb} {counted} {self.unit} in {seconds:.1f} s{rate}")

    def _print(self, line: str) -> None:
        print(line, file=self.stream, flush=True)


@contextlib.contextmanager
def counting(total: int | None, *, verb: str, unit: str, bar_unit: str,
             enabled: bool = True, initial: int = 0, stream=None) -> Iterator:
    """An object with `.update(count)` for the block: a tqdm bar counting `bar_unit` when
    `stream` (default sys.stderr) is a terminal, `CountLines` otherwise, nothing shown
    when not `enabled`. A block left by an exception prints no closing line."""
    stream = sys.stderr if stream is None else stream
    if not enabled:
        yield _Silent()
    elif is_terminal(stream):
        with tqdm(total=total, initial=initial, unit=bar_unit, file=stream) as bar:
            yield bar
    else:
        lines = CountLines(total, verb=verb, unit=unit, stream=stream, initial=initial)
        yield lines
        lines.close()


class _Silent:
    def update(self, count: int) -> None:
        pass
