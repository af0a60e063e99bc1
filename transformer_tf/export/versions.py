"""Export version directories: where an export may write, and how it replaces a version
without ever losing one. Both exports (SavedModel and CTranslate2) follow these rules.

TF Serving watches `saved_models/NAME/` and serves the integer VERSION directories under
it, ignoring names that start with "."; an export's `out_dir` is one such
`NAME/VERSION`:

  * VERSION is digits only; `out_dir` is not a file and has no file among its parents;
    it is not inside a training run (a directory holding run_config.json), nor the
    model directory being exported or inside it.
  * An existing non-empty `out_dir` is replaced only with `overwrite`, and only when it
    holds what that export writes and nothing else (`SAVED_MODEL`: saved_model.pb;
    `CTRANSLATE2`: model.bin and transformer_tf.json); an empty one is written into.
  * The new version is written to `.VERSION.tmp.PID` beside it, then swapped in: the old
    version is renamed to `.VERSION.old.PID`, the new one renamed into place, and only
    then is the old one deleted.
  * `recover_interrupted(NAME)`, run at the start of every export, finishes what a killed
    export left behind: an aside copy whose version is missing is renamed back; one
    whose version is in place (the swap had finished) is deleted, as are temporary
    copies. Entries of processes still running are left alone.

Every refusal is an `OutDirError` (a ValueError) whose text is "<path>: <what>".
"""
from __future__ import annotations

import dataclasses
import fnmatch
import logging
import os
import pathlib
import re
import shutil
from typing import Callable

logger = logging.getLogger(__name__)

EXAMPLE = "saved_models/NAME/1"
_VERSION = re.compile(r"[0-9]+")
# .VERSION.tmp.PID / .VERSION.old.PID (older exports wrote them without the PID).
_LEFTOVER = re.compile(r"\.([0-9]+)\.(tmp|old)(?:\.([0-9]+))?")


@dataclasses.dataclass(frozen=True)
class ExportKind:
    """What one export writes into a version directory.

    Attributes:
      name: how messages call it ("SavedModel").
      required: entries that all exist in a directory this export wrote.
      allowed: glob patterns of every entry this export may write.
    """
    name: str
    required: tuple[str, ...]
    allowed: tuple[str, ...]


SAVED_MODEL = ExportKind("SavedModel", ("saved_model.pb",),
                         ("saved_model.pb", "fingerprint.pb", "variables", "assets",
                          "assets.extra"))
CTRANSLATE2 = ExportKind("CTranslate2 model", ("model.bin", "transformer_tf.json"),
                         ("model.bin", "config.json", "*vocabulary.json", "*vocabulary.txt",
                          "bpe.model", "transformer_tf.json"))


class OutDirError(ValueError):
    """`path` cannot become (or be replaced by) an export version directory; str() is
    "<path>: <problem>"."""

    def __init__(self, path, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = pathlib.Path(path)
        self.problem = problem


def is_version_name(name: str) -> bool:
    """True for a TF Serving version directory name: ASCII digits only."""
    return _VERSION.fullmatch(name) is not None


def next_free_version(name_dir) -> int:
    """1 + the highest integer version under `name_dir` (1 if none or no such
    directory). A version an interrupted export moved aside (`.VERSION.old.PID`) counts
    as present: `recover_interrupted` may still put it back."""
    name_dir = pathlib.Path(name_dir)
    if not name_dir.is_dir():
        return 1
    taken = [0]
    for entry in name_dir.iterdir():
        leftover = _LEFTOVER.fullmatch(entry.name)
        if is_version_name(entry.name) and entry.is_dir():
            taken.append(int(entry.name))
        elif leftover and leftover.group(2) == "old":
            taken.append(int(leftover.group(1)))
    return max(taken) + 1


def _pid_alive(pid: int | None) -> bool:
    """Whether process `pid` runs on this machine (None: unknown owner, taken as gone)."""
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _remove(path: pathlib.Path) -> None:
    """Delete a file, symlink or directory tree; nothing if absent."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.exists():
        shutil.rmtree(path)


def recover_interrupted(name_dir) -> list[str]:
    """Finish what killed exports left in `name_dir` (a saved_models/NAME directory):
    a version moved aside whose VERSION is missing is renamed back (the newest one if
    several), other aside copies (their version is in place) and temporary directories are
    deleted; those of a still running process are left alone. Returns one line per action
    (also logged as warnings)."""
    name_dir = pathlib.Path(name_dir)
    if not name_dir.is_dir():
        return []
    found: dict[str, dict[str, list[pathlib.Path]]] = {}
    for entry in name_dir.iterdir():
        match = _LEFTOVER.fullmatch(entry.name)
        if not match:
            continue
        pid = int(match.group(3)) if match.group(3) else None
        if _pid_alive(pid):
            continue
        found.setdefault(match.group(1), {"tmp": [], "old": []})[match.group(2)].append(entry)
    done = []
    for version, entries in sorted(found.items()):
        target = name_dir / version
        olds = sorted(entries["old"], key=lambda p: p.stat().st_mtime, reverse=True)
        if olds and not (target.exists() or target.is_symlink()):
            os.rename(olds[0], target)
            done.append(f"{target}: restored from {olds[0].name}, left aside by an "
                        "interrupted export")
            olds = olds[1:]
        for path in olds:
            _remove(path)
            done.append(f"{path}: deleted: an interrupted export had already put {target} "
                        "in its place")
        for path in entries["tmp"]:
            _remove(path)
            done.append(f"{path}: deleted: the unfinished output of an interrupted export")
    for line in done:
        logger.warning("%s", line)
    return done


def _describe(directory: pathlib.Path, names=None, limit: int = 6) -> str:
    """"a, b/, c and 3 more": entries of `directory` (or `names` in it), dirs with "/"."""
    names = sorted(names if names is not None else (p.name for p in directory.iterdir()))
    shown = [n + "/" if (directory / n).is_dir() else n for n in names[:limit]]
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(shown) + more


def _run_directory_around(out_dir: pathlib.Path) -> pathlib.Path | None:
    """`out_dir` itself or its nearest ancestor that holds a run_config.json, or None."""
    from transformer_tf.rundir.model_dir import RUN_CONFIG  # loads TensorFlow: late

    for path in (out_dir, *out_dir.parents):
        if (path / RUN_CONFIG).is_file():
            return path
    return None


def _foreign_entries(out_dir: pathlib.Path, kind: ExportKind) -> list[str]:
    """Entries of `out_dir` that `kind`'s export does not write."""
    return [p.name for p in out_dir.iterdir()
            if not any(fnmatch.fnmatchcase(p.name, pattern) for pattern in kind.allowed)]


def check_out_dir(out_dir, kind: ExportKind = SAVED_MODEL, overwrite: bool = False,
                  model_dir=None) -> pathlib.Path:
    """Raises OutDirError unless `kind`'s export may write the version directory `out_dir`
    (the rules of the module doc); `model_dir`: the run being exported. Returns
    `out_dir` as a Path. Reads only directory entries (milliseconds)."""
    out_dir = pathlib.Path(out_dir)
    for path in (out_dir, *out_dir.parents):
        if path.exists() and not path.is_dir():
            raise OutDirError(path, f"is a file, not a directory; --out names the version "
                                    f"directory to create, e.g. {EXAMPLE}")
    resolved = out_dir.resolve()
    run = _run_directory_around(resolved)
    if run is not None:
        where = "is a training run" if run == resolved else f"is inside the training run {run}"
        raise OutDirError(out_dir, f"{where} (it holds run_config.json); export outside it, "
                                   f"e.g. {EXAMPLE}")
    if model_dir is not None:
        model = pathlib.Path(model_dir).resolve()
        if resolved == model or model in resolved.parents:
            raise OutDirError(out_dir, f"is inside the model directory {model_dir} being "
                                       f"exported; export outside it, e.g. {EXAMPLE}")
    if not is_version_name(out_dir.name):
        raise OutDirError(out_dir, "--out must end in an integer version directory "
                                   "(digits only, TF Serving's saved_models/NAME/VERSION), "
                                   f"e.g. {out_dir / str(next_free_version(out_dir))}")
    if not out_dir.is_dir() or not any(out_dir.iterdir()):
        return out_dir
    next_free = out_dir.parent / str(next_free_version(out_dir.parent))
    missing = [name for name in kind.required if not (out_dir / name).exists()]
    if missing:
        raise OutDirError(out_dir, f"exists and is not a {kind.name} (it holds "
                                   f"{_describe(out_dir)}; no {', '.join(missing)}): an "
                                   f"export replaces only a {kind.name}; choose another "
                                   f"version, e.g. {next_free}")
    foreign = _foreign_entries(out_dir, kind)
    if foreign:
        raise OutDirError(out_dir, f"holds a {kind.name} and files its export does not "
                                   f"write ({_describe(out_dir, foreign)}), which "
                                   "--overwrite would delete; move them away or choose "
                                   f"another version, e.g. {next_free}")
    if not overwrite:
        raise OutDirError(out_dir, f"holds a {kind.name} already; pass --overwrite to "
                                   f"replace it, or export a new version, e.g. {next_free}")
    return out_dir


def prepare_out_dir(out_dir, kind: ExportKind = SAVED_MODEL, overwrite: bool = False,
                    model_dir=None) -> pathlib.Path:
    """`recover_interrupted` on `out_dir`'s NAME directory, then `check_out_dir`; call it
    at the start of every export, before the minutes of loading and tracing."""
    out_dir = pathlib.Path(out_dir)
    parent = out_dir.parent
    if parent.is_dir():  # a file in the way: check_out_dir says so
        recover_interrupted(parent)
    return check_out_dir(out_dir, kind, overwrite, model_dir)


def _sibling(out_dir: pathlib.Path, role: str) -> pathlib.Path:
    """.VERSION.<role>.PID beside `out_dir` (role "tmp" or "old")."""
    return out_dir.parent / f".{out_dir.name}.{role}.{os.getpid()}"


def swap_in(new: pathlib.Path, out_dir: pathlib.Path) -> None:
    """Rename the complete directory `new` to `out_dir`. An existing `out_dir` is renamed
    aside first and deleted only once `new` is in place (renamed back if that fails)."""
    aside = _sibling(out_dir, "old")
    _remove(aside)
    had_old = out_dir.exists() or out_dir.is_symlink()
    if had_old:
        os.rename(out_dir, aside)
    try:
        os.rename(new, out_dir)
    except BaseException:
        if had_old and not out_dir.exists():
            os.rename(aside, out_dir)
        raise
    if had_old:
        _remove(aside)


def write_version(out_dir, write: Callable[[pathlib.Path], None],
                  kind: ExportKind = SAVED_MODEL, overwrite: bool = False,
                  model_dir=None) -> pathlib.Path:
    """Write one export version: `prepare_out_dir`, then `write(tmp)` into a temporary
    sibling directory (`write` creates it), then the checks again (the writing took
    minutes) and `swap_in`. A failure removes the temporary directory and leaves
    `out_dir` as it was. Returns `out_dir` as a Path."""
    out_dir = prepare_out_dir(out_dir, kind, overwrite, model_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling(out_dir, "tmp")
    _remove(tmp)
    try:
        write(tmp)
        check_out_dir(out_dir, kind, overwrite, model_dir)
        swap_in(tmp, out_dir)
    except BaseException:
        _remove(tmp)
        raise
    return out_dir
