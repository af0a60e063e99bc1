"""The flags every command shares (--version) and the value types of flags: a bad number
ends the command at parse time with argparse's usage line and `error: argument --flag:
...` (exit status 2)."""
from __future__ import annotations

import argparse
import math
import shlex
import sys


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
    """A finite number >= 0 (length penalties; budgets where 0 means none)."""
    value = _finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number, 0 or more, got {text}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (budgets in minutes or passes)."""
    value = _finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number more than 0, got {text}")
    return value


def _finite_float(text: str) -> float:
    """`text` as a float; not a number, NaN or infinite: ArgumentTypeError."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text}")
    return value


def float_between(low: float, high: float):
    """The type of a flag taking a number in [low, high] (a share, a fraction)."""
    def number(text: str) -> float:
        value = _finite_float(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {text}")
        return value

    return number


# What --version names besides the package: the libraries a bug report needs.
VERSION_OF = ("tensorflow", "keras", "tensorflow-text")


def add_version_flag(parser: argparse.ArgumentParser) -> None:
    """The `--version` option every command has: prints `version_line(parser.prog)` and
    exits 0, without importing TensorFlow."""
    parser.add_argument("--version", action=_VersionAction, nargs=0,
                        help="print the version of transformer_tf (and of TensorFlow, Keras "
                             "and tensorflow-text) and exit")


def version_line(prog: str) -> str:
    """`PROG VERSION from PACKAGE_DIR (tensorflow X, keras Y, tensorflow-text Z; Python V)`:
    VERSION is transformer_tf.__version__, the one source setup.py reads too; the others
    come from the installed distributions' metadata ("not installed" if absent)."""
    import importlib.metadata
    import pathlib
    import platform

    import transformer_tf

    def installed(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    libraries = ", ".join(f"{name} {installed(name)}" for name in VERSION_OF)
    where = pathlib.Path(transformer_tf.__file__).parent
    return (f"{prog} {transformer_tf.__version__} from {where} "
            f"({libraries}; Python {platform.python_version()})")


class _VersionAction(argparse.Action):
    """argparse's "version" action with the line built only when asked for (reading the
    libraries' metadata costs time every command would otherwise pay)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line(parser.prog))  # on stdout, as argparse's own action does
        parser.exit()


def command_as_run(program: str, argv=None) -> str:
    """The command line a results file records: `program` (e.g. "python
    scripts/recipe_study.py") and the arguments (`argv`, else the process's own), each
    quoted for a POSIX shell so the line can be pasted back."""
    return " ".join([program, *map(shlex.quote, sys.argv[1:] if argv is None else argv)])
