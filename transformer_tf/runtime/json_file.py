"""Reading the JSON files the library writes beside data, runs and exports, with errors
that name the file."""
from __future__ import annotations

import json
import pathlib
from typing import Any


class JsonFileError(ValueError):
    """A JSON file that cannot be read as one; the message names the file and the place."""


def read_json_file(path) -> Any:
    """The value `path` holds. A file that is not valid UTF-8 JSON (truncated, edited by
    hand, empty) raises JsonFileError naming it, the line and the column."""
    path = pathlib.Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise JsonFileError(f"{path}: not valid JSON ({error.msg} at line {error.lineno}, "
                            f"column {error.colno})") from None
    except UnicodeDecodeError as error:
        raise JsonFileError(f"{path}: not valid JSON (invalid UTF-8 at byte "  # from 0
                            f"{error.start})") from None
