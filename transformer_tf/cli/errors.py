"""How a command fails, for every command: the one rule.

An expected failure -- a missing, unreadable or damaged file, a bad value, a run
directory that another process holds or that holds another run, a training run that
diverged -- ends the command with one line `error: <file or flag>: <what>` on stderr and
exit status 2, without a traceback (with --verbose the traceback follows). The messages
come from the library's exceptions, which name the file or field at fault. Anything else
is a bug and shows its traceback (exit status 1). Ctrl-C ends with "interrupted" and 130;
a training run stopped by a signal (`training.stop_signal.StopRequested`) says where it
saved and exits with 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM).
"""
from __future__ import annotations

import sys
import traceback
from typing import Callable

from transformer_tf.runtime import error_text

USAGE_ERROR = 2
INTERRUPTED = 130


def is_expected(error: BaseException) -> bool:
    """Whether `error` is a failure of the input or the situation rather than a bug."""
    if isinstance(error, (OSError, ValueError, KeyError)):  # ConfigError, CorpusError,
        return True                                        # CheckpointError, ... too
    expected = []
    for module, name in (("transformer_tf.rundir.lock", "RunLockedError"),
                         ("transformer_tf.training.fit", "TrainingDiverged")):
        loaded = sys.modules.get(module)  # not loaded: the error cannot be of its types
        if loaded is not None:
            expected.append(getattr(loaded, name))
    tensorflow = sys.modules.get("tensorflow")
    if tensorflow is not None:
        expected.append(tensorflow.errors.OpError)  # e.g. a SavedModel that is not one
    return isinstance(error, tuple(expected))


def message(error: BaseException) -> str:
    """The one-line text of an expected error: "<file>: <what>" for a system OSError,
    KeyError's without repr quotes, TensorFlow's op message (`error_text.summary`)."""
    if isinstance(error, KeyError) and error.args:
        key = str(error.args[0])
        return error_text.summary(key) if key.strip() else type(error).__name__
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"  # not "[Errno 13] ...: 'x'"
    return error_text.summary(error)


def run_command(run: Callable[..., int], *args, verbose: bool = False,
                also: tuple[type, ...] = ()) -> int:
    """`run(*args)`, with its expected failures (`is_expected`, or of the types in
    `also`) reported as `error: ...` and exit status 2."""
    try:
        return run(*args)
    except KeyboardInterrupt as interrupt:
        print(str(interrupt) or "interrupted", file=sys.stderr)
        return getattr(interrupt, "exit_status", INTERRUPTED)
    except Exception as error:  # noqa: BLE001 -- sorted into expected and bugs here
        if not (is_expected(error) or isinstance(error, also)):
            raise
        if verbose:
            traceback.print_exc()
        print(f"error: {message(error)}", file=sys.stderr)
        return USAGE_ERROR
