"""Small files of a run directory written whole or not at all: to a temporary file beside
the target, synced, then renamed over it, so a kill (or a crash of the machine) leaves the
old file or the new one, never half of one."""
from __future__ import annotations

import json
import os
import pathlib


def write_text_atomically(path, text: str) -> None:
    """`text` (UTF-8) into `path`, creating its directory."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)


def write_json_atomically(path, value) -> None:
    """`value` as indented JSON into `path`."""
    write_text_atomically(path, json.dumps(value, indent=2))
