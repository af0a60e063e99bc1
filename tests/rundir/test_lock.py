"""One training run per model directory (rundir/lock.py), with real processes.

A holder process takes MDIR's lock; a second `scripts/train.py` on MDIR stops at once
(exit 2) naming the holder's pid, host and start time; after the holder is SIGKILLed its
record is stale and the next taker breaks it. (A SIGKILLed *training* run resuming under
the lock: tests/training/test_training_run.py.)
"""
from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import pytest

from transformer_tf.rundir import checkpoints
from transformer_tf.rundir.lock import HOLDER_FILE, RunLock, RunLockedError

REPO = pathlib.Path(__file__).resolve().parents[2]
@pytest.fixture
def holder(tmp_path, lock_held_elsewhere):
    """A process holding the lock of tmp_path/model (killed at the end)."""
    model_dir = tmp_path / "model"
    with lock_held_elsewhere(model_dir) as process:
        yield model_dir, process


def test_second_taker_is_refused_naming_the_holder(holder):
    model_dir, process = holder
    with pytest.raises(RunLockedError) as refused:
        RunLock(model_dir).acquire()
    message = str(refused.value)
    assert f"pid {process.pid} on host {socket.gethostname()}, started 20" in message
    record = json.loads((model_dir / HOLDER_FILE).read_text())
    assert record["pid"] == process.pid and record["started"] in message


def test_a_holder_without_its_record_yet_is_described_in_plain_words(holder):
    # Between taking the lock and writing run.lock.json, the holder is still nameless.
    model_dir, _ = holder
    (model_dir / HOLDER_FILE).unlink()
    with pytest.raises(RunLockedError) as refused:
        RunLock(model_dir).acquire()
    assert f"{model_dir} is in use by another run: a run that has not yet written its pid " \
           "and host. Wait" in str(refused.value)


def test_second_train_script_stops_at_once(holder, tiny_multi30k):
    model_dir, process = holder
    started = time.monotonic()
    second = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "train.py"), "--data",
         str(tiny_multi30k.directory), "--preset", "tiny", "--model-dir", str(model_dir),
         "--max-steps", "5", "--quiet", "--validation-sentences", "0"],
        capture_output=True, text=True, timeout=300,
        env={k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"})
    assert second.returncode == 2, second.stderr[-3000:]
    # The quiet console (transformer_tf/runtime/console.py): TensorFlow's start-up lines and the
    # cuInit error are gone; what remains is our log and the one error line.
    errors = [line for line in second.stderr.splitlines() if not line.startswith("INFO ")]
    assert errors == [f"error: {model_dir} is in use by another run: pid "
                      f"{process.pid} on host {socket.gethostname()}, started "
                      f"{json.loads((model_dir / HOLDER_FILE).read_text())['started']}. Wait "
                      "for it to finish, stop it, or train into another --model-dir"], \
        second.stderr
    assert time.monotonic() - started < 120  # no training happened meanwhile
    assert not (model_dir / "checkpoints").exists() and process.poll() is None


def test_lock_of_a_killed_holder_is_broken_by_the_next_run(holder):
    model_dir, process = holder
    process.send_signal(signal.SIGKILL)
    process.wait()
    lock = RunLock(model_dir)
    with lock:  # the OS dropped the killed process's flock; its record is stale
        assert lock.previous_holder["pid"] == process.pid
        assert json.loads((model_dir / HOLDER_FILE).read_text())["pid"] == os.getpid()
        with pytest.raises(RunLockedError):  # and the new holder does hold it
            RunLock(model_dir).acquire()
    assert not (model_dir / HOLDER_FILE).exists()  # a clean exit leaves no record
    with RunLock(model_dir) as again:
        assert again.previous_holder is None


def test_interrupted_saves_are_removed(tmp_path):
    directory = checkpoints.checkpoint_dir(tmp_path)
    (directory / "ckpt-40_temp").mkdir(parents=True)
    (directory / "ckpt-40_temp" / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"x")
    kept = [directory / "ckpt-30.index", directory / "ckpt-30.data-00000-of-00001"]
    for path in kept:
        path.write_bytes(b"x")
    assert checkpoints.remove_interrupted_saves(tmp_path) == [directory / "ckpt-40_temp"]
    assert sorted(directory.iterdir()) == sorted(kept)


def test_hold_run_if_free_says_whether_it_holds(tmp_path):
    from transformer_tf.rundir.lock import HOLDER_FILE, RunLock, hold_run_if_free

    with hold_run_if_free(tmp_path / "a") as mine:
        assert mine and (tmp_path / "a" / HOLDER_FILE).exists()
    assert not (tmp_path / "a" / HOLDER_FILE).exists()  # released on leaving
    other = RunLock(tmp_path / "b").acquire()  # another holder (its own lock handle)
    try:
        with hold_run_if_free(tmp_path / "b") as mine:
            assert not mine
    finally:
        other.release()


def test_a_directory_made_for_a_run_that_wrote_nothing_is_removed(tmp_path):
    """hold_run(create=True) on a new MDIR: a run refused (or failing) before writing
    anything leaves no directory; one that wrote a file keeps it; an MDIR that existed
    before is never removed."""
    from transformer_tf.rundir.lock import LOCK_FILE, hold_run

    with pytest.raises(ValueError, match="refused"):
        with hold_run(tmp_path / "new", create=True):
            assert (tmp_path / "new" / LOCK_FILE).exists()
            raise ValueError("refused")
    assert not (tmp_path / "new").exists()

    with hold_run(tmp_path / "written", create=True):
        (tmp_path / "written" / "run_config.json").write_text("{}")
    assert sorted(p.name for p in (tmp_path / "written").iterdir()) == [
        LOCK_FILE, "run_config.json"]

    (tmp_path / "users").mkdir()
    with hold_run(tmp_path / "users", create=True):
        with hold_run(tmp_path / "users", create=True):  # nested: the outer one decides
            pass
    assert [p.name for p in (tmp_path / "users").iterdir()] == [LOCK_FILE]

    with hold_run(tmp_path / "nested", create=True):
        with hold_run(tmp_path / "nested", create=True):
            pass
        assert (tmp_path / "nested" / LOCK_FILE).exists()  # still held by the outer one
    assert not (tmp_path / "nested").exists()

    # Parents made for it go too, up to the first that existed; a parent that holds
    # something else stays.
    with pytest.raises(ValueError):
        with hold_run(tmp_path / "a" / "b" / "model", create=True):
            raise ValueError("refused")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["users", "written"]
    with pytest.raises(ValueError):
        with hold_run(tmp_path / "c" / "model", create=True):
            (tmp_path / "c" / "notes.txt").write_text("mine")
            raise ValueError("refused")
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["notes.txt"]
