"""Progress of a count on stderr: plain lines, worked by hand, where stderr is not a
terminal; tqdm's bar where it is; nothing when disabled."""
import io

import pytest

from transformer_tf.runtime.progress import CountLines, counting


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_lines_come_every_thirty_seconds_with_share_pace_and_time_left():
    clock, out = Clock(), io.StringIO()
    count = CountLines(1000, verb="translated", unit="sentences", stream=out, clock=clock)
    clock.now += 20.0
    count.update(200)  # 20 s: too soon for a line
    assert out.getvalue() == ""
    clock.now += 12.0
    count.update(184)  # 32 s, 384 done: 12.0 a second, 616 left = 51.3 s = 0.9 min
    clock.now += 29.0
    count.update(100)  # 29 s after the line: none
    clock.now += 1.0
    count.update(16)  # 62 s, 500 done: 8.06 a second, 500 left = 62 s = 1.0 min
    clock.now += 18.0
    count.update(500)
    count.close()  # 80 s, 1000: 12.5 a second
    assert out.getvalue().splitlines() == [
        "translated 384 of 1000 sentences (38%) · 12.0 sentences/s · 0.9 min left",
        "translated 500 of 1000 sentences (50%) · 8.1 sentences/s · 1.0 min left",
        "translated 1000 sentences in 80.0 s (12.5 sentences/s)"]


def test_a_resumed_count_shows_its_share_from_the_start_and_its_pace_from_now():
    clock, out = Clock(), io.StringIO()
    count = CountLines(400, verb="translated", unit="sentences", stream=out, clock=clock,
                       initial=300)
    clock.now += 40.0
    count.update(40)  # 40 in 40 s: 1.0 a second; 60 left
    clock.now += 20.0
    count.update(60)
    count.close()
    assert out.getvalue().splitlines() == [
        "translated 340 of 400 sentences (85%) · 1.0 sentences/s · 1.0 min left",
        "translated 100 sentences in 60.0 s (1.7 sentences/s)"]


def test_an_unknown_total_shows_the_count_and_pace_only():
    clock, out = Clock(), io.StringIO()
    count = CountLines(None, verb="parsed", unit="trees", stream=out, clock=clock)
    clock.now += 30.0
    count.update(15)
    assert out.getvalue() == "parsed 15 trees · 0.5 trees/s\n"


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_log_gets_lines_a_terminal_gets_the_bar_and_disabled_gets_nothing():
    log, terminal, quiet = io.StringIO(), Terminal(), io.StringIO()
    for stream, enabled in ((log, True), (terminal, True), (quiet, False)):
        with counting(3, verb="translated", unit="sentences", bar_unit="sent", stream=stream,
                      enabled=enabled) as progress:
            progress.update(3)
    assert "\r" not in log.getvalue()
    assert log.getvalue().startswith("translated 3 sentences in ")
    assert "\r" in terminal.getvalue() and "3/3" in terminal.getvalue()
    assert quiet.getvalue() == ""


def test_a_count_cut_short_by_an_error_claims_no_end():
    log = io.StringIO()
    with pytest.raises(RuntimeError):
        with counting(3, verb="translated", unit="sentences", bar_unit="sent",
                      stream=log) as progress:
            progress.update(1)
            raise RuntimeError("out of memory")
    assert log.getvalue() == ""
