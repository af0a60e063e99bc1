"""One training run at a time per model directory: an exclusive lock held for the run's life.

Two runs writing the same MDIR would interleave their checkpoint saves, orphan each
other's checkpoints, and averaging would then mix two trajectories. So every command that
writes into a run directory (train, the main and parsing jobs, the Table 3 runner, average)
holds, through `hold_run`,

    MDIR/.run.lock       the lock itself: an OS lock (flock) on this file, via `filelock`
                         (the empty file stays after the run: deleting it would race
                         with the next taker)
    MDIR/run.lock.json   who holds it: {"pid", "host", "started" (UTC, ISO 8601), "argv"}

while it runs, from before it reads what decides its work until it has written the last
file. Under a multi-worker strategy the chief holds it (the other workers only read MDIR).
A job that holds the lock and calls another command's code (the main job training, then
averaging) holds it once: `hold_run` is re-entrant within a process. A second run on the
same MDIR fails at once with `RunLockedError`, whose message names the holder from
run.lock.json. A new MDIR that `hold_run` made for a run refused (or failed) before writing
anything is removed again, so a refused command leaves no empty run directory behind.

A crashed or SIGKILLed run cannot leave a stale lock behind: the operating system drops a
process's flock when the process ends, however it ends. What it leaves is its
run.lock.json; the next run takes the (free) lock, finds that file, logs that the previous
holder ended without releasing, and writes its own. Breaking it is safe because the lock
is won first: no live run can be holding the directory at that moment. (On a network file
system the lock works where the file system supports flock/fcntl locks, as NFSv4 does.)

Why `filelock` rather than `fcntl` directly: it is the maintained, widely used wrapper
(virtualenv, tox, Hugging Face use it), handles the platform differences (Windows too) and
the races around creating and reopening the lock file.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import pathlib
import socket
import sys
import threading

import filelock

logger = logging.getLogger(__name__)

LOCK_FILE = ".run.lock"
HOLDER_FILE = "run.lock.json"


_held: dict[pathlib.Path, int] = {}  # run directories this process holds: nesting depth
_held_guard = threading.Lock()


class RunLockedError(RuntimeError):
    """Another run holds the model directory; the message names it (pid, host, start)."""


def _describe(holder: dict | None) -> str:
    if not holder:
        return "a run that has not yet written its pid and host"
    return (f"pid {holder.get('pid')} on host {holder.get('host')}, started "
            f"{holder.get('started')}")


def describe_holder(model_dir) -> str:
    """Who holds (or last held) MDIR, in words: "pid 12 on host vm, started ..."."""
    return _describe(read_holder(model_dir))


def read_holder(model_dir) -> dict | None:
    """The holder record of MDIR (the current or the last run that held it), or None."""
    try:
        return json.loads((pathlib.Path(model_dir) / HOLDER_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return None


class RunLock:
    """The exclusive lock of a model directory, as a context manager.

    `acquire()` never waits: it raises `RunLockedError` if another run (another process,
    or another RunLock in this one) holds MDIR. Entering the `with` block acquires,
    leaving it releases (and removes run.lock.json).

    Attributes:
      previous_holder: after acquiring, the record left by a run that ended without
        releasing (crashed, killed), or None.
    """

    def __init__(self, model_dir):
        self.model_dir = pathlib.Path(model_dir)
        self._lock = filelock.FileLock(str(self.model_dir / LOCK_FILE))
        self.previous_holder = None

    def acquire(self) -> "RunLock":
        self.model_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire(timeout=0)
        except filelock.Timeout:
            raise RunLockedError(
                f"{self.model_dir} is in use by another run: "
                f"{_describe(read_holder(self.model_dir))}. Wait for it to finish, stop "
                "it, or train into another --model-dir") from None
        self.previous_holder = read_holder(self.model_dir)
        if self.previous_holder is not None:
            logger.warning("%s: the previous run (%s) ended without releasing its lock "
                           "(killed or crashed?); taking over", self.model_dir,
                           _describe(self.previous_holder))
        holder = {"pid": os.getpid(), "host": socket.gethostname(),
                  "started": datetime.datetime.now(datetime.timezone.utc)
                  .isoformat(timespec="seconds"),
                  "argv": sys.argv}
        path = self.model_dir / HOLDER_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(holder, indent=2))
        tmp.replace(path)
        return self

    def release(self, made_from: pathlib.Path | None = None) -> None:
        """Releases the lock. `made_from`: the first directory of MDIR's path that was made
        for this run (MDIR itself, or a parent): if MDIR holds nothing but the lock file,
        it is removed, lock file and all, before the lock goes, and so are the empty
        directories up to `made_from`: a refused or failed new run leaves no empty run
        directory behind."""
        (self.model_dir / HOLDER_FILE).unlink(missing_ok=True)
        if made_from is not None and [p.name for p in self.model_dir.iterdir()] == [LOCK_FILE]:
            # Removed while still held, so no run can be inside. A taker that opened the
            # file just before locks the removed file and cannot write its record; one
            # that made a new lock file since keeps the directory (rmdir fails).
            (self.model_dir / LOCK_FILE).unlink()
            _remove_empty_directories(self.model_dir, made_from)
        self._lock.release()

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc_info) -> None:
        self.release()


def _first_missing(path: pathlib.Path) -> pathlib.Path | None:
    """The first directory of `path` (from the root) that does not exist, or None."""
    path = path.absolute()
    missing = None
    while not path.exists():
        missing, path = path, path.parent
    return missing


def _remove_empty_directories(directory: pathlib.Path, up_to: pathlib.Path) -> None:
    """rmdir `directory`, then its parents up to and including `up_to`, stopping at the
    first that is not empty (or cannot be removed)."""
    directory, up_to = directory.absolute(), up_to.absolute()
    while True:
        try:
            directory.rmdir()
        except OSError:
            return
        if directory == up_to or directory.parent == directory:
            return
        directory = directory.parent


@contextlib.contextmanager
def hold_run(model_dir, create: bool = False):
    """Holds MDIR's `RunLock` for the block, or nothing more when this process already
    holds it (an outer `hold_run`); raises `RunLockedError` when another process does.
    A missing MDIR raises FileNotFoundError unless `create` (a new training run); an MDIR
    created so (with any parents made for it) is removed again at the end if nothing but
    the lock was written into it."""
    if not create and not pathlib.Path(model_dir).is_dir():
        raise FileNotFoundError(f"{model_dir}: no such run directory")
    key = pathlib.Path(model_dir).resolve()
    with _held_guard:
        outer = key in _held
        if not outer:
            made_from = _first_missing(pathlib.Path(model_dir))  # None: MDIR exists
            lock = RunLock(model_dir).acquire()
        _held[key] = _held.get(key, 0) + 1
    try:
        yield
    finally:
        with _held_guard:
            _held[key] -= 1
            if not _held[key]:
                del _held[key]
                if not outer:
                    lock.release(made_from)


@contextlib.contextmanager
def hold_run_if_free(model_dir):
    """Like `hold_run(model_dir, create=True)`, but yields False instead of raising when
    another process holds MDIR (a study's processes each take the rows no other holds)."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(hold_run(model_dir, create=True))
        except RunLockedError:
            yield False
            return
        yield True
