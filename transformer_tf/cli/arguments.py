"""Value types for the commands' flags: a bad number ends the command at parse time with
argparse's usage line and `error: argument --flag: ...` (exit status 2)."""
from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An integer >= 1 (batch sizes, counts)."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0 (limits where 0 means none)."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def non_negative_float(text: str) -> float:
    """A finite number >= 0 (length penalties)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number, 0 or more, got {text}")
    return value
