"""The one way a command refuses to replace files it did not make: before any work, every
path it would write that already exists is named in one FileExistsError, with what to do.
(Light: no TensorFlow import, so the bench scripts and the command lines call it before
loading anything.)"""
from __future__ import annotations

import os
from collections.abc import Iterable


def refuse_existing(paths: Iterable, remedy: str) -> None:
    """Raises FileExistsError "<path>, <path>: already there; <remedy>" when any of `paths`
    (None entries skipped) exists; returns otherwise."""
    taken = [os.fspath(path) for path in paths if path is not None and os.path.exists(path)]
    if taken:
        raise FileExistsError(f"{', '.join(taken)}: already there; {remedy}")
