"""How a command's process starts and ends: `main()`, then `end_process` with its status.

The installed commands' entry points (setup.py) are `transformer_tf.cli.launch:<module>`,
one per command module of transformer_tf.cli; scripts/<module>.py call
`end_process(main())` themselves. `main(argv=None)` itself only returns the status, so
that tests and other Python code can call it in-process.
"""
from __future__ import annotations

import atexit
import importlib
import importlib.util
import os
import sys
from typing import Callable, NoReturn


def end_process(status: int | None) -> NoReturn:
    """Ends this process with exit status `status` (None: 0), at once: the atexit hooks
    run (libraries' own clean-up: logging's handlers flushed, the files TensorFlow's
    autograph writes to the temporary directory removed, ...), stdout and stderr are
    flushed, then `os._exit`.

    By then the command has written everything it keeps: files and TensorBoard writers
    are closed, the checkpoint saved and the run's lock released as `main` unwound (a
    stopped run's too). What `os._exit` skips is the interpreter's teardown -- a last
    garbage collection over TensorFlow's objects, tf.data's threads joining -- seconds
    a user waits for nothing after any command that loaded TensorFlow, and after a stop
    the difference between ending within a scheduler's grace (30 s by default for
    Kubernetes and SLURM) and being killed.
    """
    atexit._run_exitfuncs()  # noqa: SLF001 -- what exit runs first (logging.shutdown too)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or gone (a closed pipe): nothing to keep
            pass
    os._exit(0 if status is None else int(status))


class Launcher:
    """The entry point of one command: runs `transformer_tf.cli.<module>.main()` and
    ends the process with its status. `main` is imported when the command runs, so that
    --help answers without importing the others."""

    def __init__(self, module: str):
        self.module = module

    @property
    def main(self) -> Callable[..., int]:
        return importlib.import_module(f"transformer_tf.cli.{self.module}").main

    def __call__(self) -> NoReturn:
        end_process(self.main())


def __getattr__(name: str) -> Launcher:
    """`launch.<module>`: the Launcher of transformer_tf.cli.<module> (setup.py's entry
    points name them so)."""
    if name.startswith("_") or importlib.util.find_spec(f"transformer_tf.cli.{name}") is None:
        raise AttributeError(f"transformer_tf.cli has no command module {name!r}")
    return Launcher(name)
