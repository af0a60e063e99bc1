"""A SIGKILL during `main` or `average` leaves the run directory usable and every earlier
SavedModel version loadable (and the next `average` finishes; a whole main job resuming a
finished run: tests/inference/test_selection.py).

The run is trained (a tiny model, 12 steps) and exported as version 1 once; the main job
then resumes it with nothing left to train, so a killed job spends its time in the stages
after training. (A SIGKILL during training: tests/training/test_training_run.py; during an
export at several moments: tests/export/.)
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest

from transformer_tf.export.saved_model import export_model_dir
from transformer_tf.inference.loading import source_decoding
from transformer_tf.training.fit import TrainOptions, train

REPO = pathlib.Path(__file__).resolve().parents[2]
STEPS = 12
TRAINING = {"checkpoint_every_minutes": 1e-5, "keep_checkpoints": 30}
MAIN_ARGS = ["--preset", "tiny", "--model-option", "num_layers=1", "--max-steps", str(STEPS),
             "--train-minutes", "0", "--average-last", "3", "--beam-size", "2",
             "--test-limit", "4", "--dev-limit", "8", "--validation-sentences", "0",
             "--quiet"] + [f"--training-option={k}={v}" for k, v in TRAINING.items()]


@pytest.fixture(scope="module")
def work(tiny_multi30k, tmp_path_factory, gc_frozen):
    """WORK/data (tiny Multi30k with its dev pairs as the test split), WORK/model (trained)."""
    work = tmp_path_factory.mktemp("killed") / "work"
    shutil.copytree(tiny_multi30k.directory, work / "data")
    metadata = json.loads((work / "data" / "prepared.json").read_text())
    metadata["splits"]["test"] = metadata["splits"]["valid"]
    (work / "data" / "prepared.json").write_text(json.dumps(metadata))
    with gc_frozen():
        train(TrainOptions(data_dir=str(work / "data"), model_dir=str(work / "model"),
                           preset="tiny", model_overrides={"num_layers": 1}, max_steps=STEPS,
                           eval_every=STEPS, validation_sentences=0, verbose=0,
                           training_overrides=TRAINING))
        export_model_dir(work / "model", work.parent / "saved_models" / work.name / "1",
                         decoding=source_decoding(model_dir=work / "model").replace(
                             beam_size=2))  # an earlier version the jobs must not lose
    return work


def command(script: str, *arguments) -> list[str]:
    return [sys.executable, str(REPO / "scripts" / script), *map(str, arguments)]


def environment() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}


def kill_after_line(argv, marker: str, delay: float) -> str:
    """Run `argv`, SIGKILL it `delay` seconds after a stdout line containing `marker`;
    returns what it printed. Fails if it ends before being killed."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True, env=environment())
    seen = []
    for line in process.stdout:
        seen.append(line)
        if marker in line:
            time.sleep(delay)
            break
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL, "".join(seen)
    return "".join(seen)


def usable(model_dir, versions) -> dict:
    """Loads the run's default checkpoint and serves one sentence from each version."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SavedModels' tokenizer ops)

    from transformer_tf.inference.loading import load_trained
    from transformer_tf.rundir import checkpoints

    _, _, _, path = load_trained(model_dir)
    outputs = {str(v): tf.saved_model.load(str(v)).signatures["serving_default"](
        text=tf.constant(["A man ."]))["translation"].numpy()[0].decode() for v in versions}
    return {"checkpoint": path, "outputs": outputs,
            "steps": [checkpoints.checkpoint_step(p)
                      for p in checkpoints.list_checkpoints(model_dir)]}


def versions_of(name_dir) -> list[pathlib.Path]:
    return sorted((p for p in pathlib.Path(name_dir).iterdir() if p.name.isdigit()),
                  key=lambda p: int(p.name))


@pytest.mark.slow
def test_a_killed_main_job_loses_nothing(work, gc_frozen):
    saved = work.parent / "saved_models"
    argv = command("main_job.py", "--work-dir", work, "--saved-models-dir", saved, *MAIN_ARGS)
    name_dir = saved / work.name
    assert [p.name for p in versions_of(name_dir)] == ["1"]

    kill_after_line(argv, "==> 6/7", 2.0)  # while it exports
    with gc_frozen():
        state = usable(work / "model", versions_of(name_dir))
    assert state["steps"][-1] == STEPS
    assert set(state["outputs"]) == {str(p) for p in versions_of(name_dir)}
    # What the killed export left is hidden from TF Serving (a "." name) until the next
    # export into NAME/ recovers it (tests/export/test_versions.py).
    assert all(p.name.isdigit() or p.name.startswith(".") for p in name_dir.iterdir())


@pytest.mark.slow
def test_a_killed_average_loses_nothing(work, tmp_path, gc_frozen):
    model_dir = tmp_path / "model"
    shutil.copytree(work / "model", model_dir)
    argv = command("average_checkpoints.py", "--model-dir", model_dir, "--last", "5")
    for delay in (0.5, 2.0):
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   env=environment())
        deadline = time.monotonic() + 60  # from the moment it holds the lock
        while not (model_dir / "run.lock.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        with gc_frozen():
            assert usable(model_dir, [])["steps"][-1] == STEPS
    finished = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                              env=environment())
    assert finished.returncode == 0, finished.stderr[-3000:]
    with gc_frozen():
        assert usable(model_dir, [])["checkpoint"] == str(model_dir / "averaged" / "ckpt")
