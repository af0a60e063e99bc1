"""SIGKILL `transformer-tf-export --overwrite` (scripts/export.py, a subprocess) at several
moments of an export over an existing version: afterwards the earlier SavedModel still
loads, or the new complete one is in place, and the next export recovers what the killed
one left. The moments: 0.5 s and 5 s (start-up, loading), and three stages of writing the
new version (its temporary directory made, saved_model.pb written, assets.extra made). (test_versions.py kills the swap itself at each of its steps.)"""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the text export's ops)

from transformer_tf.export.versions import recover_interrupted
from transformer_tf.inference.loading import read_export_info

REPO = pathlib.Path(__file__).resolve().parents[2]
# When to kill: after a time (start-up, loading), or once the new version's temporary
# directory shows a stage of its writing (a path under it, polled every 10 ms).
# (The swap itself is killed at each of its steps in test_versions.py, without TensorFlow.)
MOMENTS = [("0.5 s", 0.5, None), ("saved_model.pb written", 0.0, "saved_model.pb")]
# The overwriting exports are ids-only (one signature to trace: quicker to reach writing).
OVERWRITE = ("--overwrite", "--beam-size", "3", "--ids-only")


def wait_for(child, path: pathlib.Path, timeout: float = 300.0) -> bool:
    """Wait until `path` exists (True) or `child` has ended (False)."""
    end = time.monotonic() + timeout
    while child.poll() is None and time.monotonic() < end:
        if path.exists():
            return True
        time.sleep(0.01)
    return False


def export_command(model_dir, out, *flags):
    return [sys.executable, str(REPO / "scripts" / "export.py"), "--model-dir", str(model_dir),
            "--out", str(out), *flags]


def beam_of(version: pathlib.Path) -> int:
    """The beam size the version at `version` was exported with, after loading it."""
    loaded = tf.saved_model.load(str(version))
    assert "serving_default" in loaded.signatures
    return read_export_info(version)["decoding"]["beam_size"]


@pytest.mark.slow
def test_sigkill_during_an_overwrite_loses_no_version(tiny_run, tmp_path):
    name = tmp_path / "saved_models" / "tiny"
    version = name / "1"
    started = time.monotonic()
    first = subprocess.run(export_command(tiny_run, version, "--beam-size", "1"),
                           capture_output=True, text=True, timeout=600)
    whole = time.monotonic() - started
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stdout.strip() == str(version) and beam_of(version) == 1

    seen = []
    for label, delay, stage in MOMENTS:
        child = subprocess.Popen(export_command(tiny_run, version, *OVERWRITE),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        reached = stage is None or wait_for(child, name / f".1.tmp.{child.pid}" / stage)
        time.sleep(delay)
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        code = child.wait()
        left = sorted(p.name for p in name.iterdir())
        # Version 1 is in place, or (killed between the two renames) aside.
        assert left[-1] == "1" or left == [f".1.old.{child.pid}", f".1.tmp.{child.pid}"], left
        recover_interrupted(name)
        assert os.listdir(name) == ["1"]
        beam = beam_of(version)  # loads: the old version (1) or the complete new one (3)
        assert beam in (1, 3)
        seen.append({"kill": label, "reached": reached, "exit": code, "left": left,
                     "beam": beam})
        if beam == 3:  # the new one made it: put the old one back for the next kill
            assert subprocess.run(export_command(tiny_run, version, "--overwrite",
                                                 "--beam-size", "1", "--no-warmup"),
                                  capture_output=True, timeout=600).returncode == 0
    print(json.dumps({"whole export (s)": round(whole, 1), "kills": seen}))
    assert all(s["exit"] == -signal.SIGKILL and s["reached"] for s in seen), seen
    assert sum(any(".1.tmp." in n for n in s["left"]) for s in seen) >= 1  # while writing

    # A killed export's leftovers, as the next export finds them: recovered first.
    os.rename(version, name / ".1.old.999999999")
    done = subprocess.run(export_command(tiny_run, version, *OVERWRITE),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "restored from .1.old.999999999" in done.stderr
    assert os.listdir(name) == ["1"] and beam_of(version) == 3
