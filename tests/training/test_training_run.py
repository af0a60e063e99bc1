"""Training runs on a small real slice of Multi30k (preset tiny with one layer per stack,
500 pairs, 200 steps).

Runs of the same command line (`scripts/train.py`, dropout 0, a checkpoint every
0.12 s, so that one of step 10 or more exists early even on a fast machine):

* reference: uninterrupted, in this process (`fit.train`, what the script calls);
* resumed: the script in a subprocess, SIGKILLed once a checkpoint of step >= 10 exists,
  then started again with the same command;
* stopped: the script with a checkpoint every 25 steps instead, sent SIGTERM once the
  one of step 25 exists: it saves the step it is on, exits with 143, and the same command
  resumes from there.

They show that the resumed runs continue from the saved step with the same optimizer
state and data position (they end with the reference's weights), that the model learns,
and that TensorBoard gets the scalars.
"""
from __future__ import annotations

import json
import math
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
STEPS = 200
EVAL_EVERY = 100
LOG_EVERY = 10
KILL_AFTER_STEP = 10  # SIGKILL once a checkpoint of at least this step exists


def train_args(data_dir, model_dir):
    return ["--data", str(data_dir), "--preset", "tiny", "--model-dir", str(model_dir),
            "--max-steps", str(STEPS), "--eval-every", str(EVAL_EVERY),
            "--log-every", str(LOG_EVERY), "--model-option", "dropout=0",
            "--model-option", "num_layers=1",
            "--training-option", "checkpoint_every_minutes=0.002", "--quiet",
            "--validation-sentences", "0"]  # (BLEU: checked on the reference run)


def latest_step(model_dir) -> int | None:
    """The newest checkpoint step recorded in MDIR/checkpoints/checkpoint (None if none)."""
    state = pathlib.Path(model_dir) / "checkpoints" / "checkpoint"
    try:
        match = re.search(r'^model_checkpoint_path: ".*ckpt-(\d+)"', state.read_text(), re.M)
    except FileNotFoundError:
        return None
    return int(match.group(1)) if match else None


def model_weights(model_dir, checkpoint):
    """Model weights of a checkpoint, restored into a fresh Transformer of the run."""
    from transformer_tf.models.transformer import Transformer
    from transformer_tf.rundir import checkpoints, model_dir as model_dir_lib

    model = Transformer(model_dir_lib.read_run_config(model_dir).model)
    model.build()
    checkpoints.load_weights(model, checkpoint)
    return {w.path.split("/", 1)[1]: w.numpy() for w in model.weights}


def summaries(logdir, run):
    """{tag: [(step, value), ...]} from the TensorBoard event files of logdir/run; values
    are floats (scalars), str (text) or lists of PNG bytes (images)."""
    import tensorflow as tf
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(pathlib.Path(logdir) / run), size_guidance={"tensors": 0})
    events.Reload()
    found = {}
    for tag in events.Tags()["tensors"]:
        for event in events.Tensors(tag):
            value = tf.make_ndarray(event.tensor_proto)
            if value.dtype == object and value.size > 1:  # images: width, height, PNGs
                value = list(value[2:])
            else:
                value = (value.item().decode("utf-8") if value.dtype == object
                         else float(value))
            found.setdefault(tag, []).append((event.step, value))
    return found


@pytest.fixture(scope="module")
def reference(tiny_multi30k, tmp_path_factory, gc_frozen, optimized_graphs):
    """The uninterrupted run, in this process: `fit.train` (what the script runs) with the
    options the script makes of `train_args`, its graphs optimized as the script's are."""
    from transformer_tf.training.fit import TrainOptions, train

    model_dir = tmp_path_factory.mktemp("reference")
    with gc_frozen(), optimized_graphs():
        return train(TrainOptions(
            data_dir=str(tiny_multi30k.directory), model_dir=str(model_dir), preset="tiny",
            model_overrides={"dropout": 0, "num_layers": 1},
            training_overrides={"checkpoint_every_minutes": 0.002},
            max_steps=STEPS, eval_every=EVAL_EVERY, log_every=LOG_EVERY, verbose=0))


@pytest.fixture(scope="module")
def resumed(tiny_multi30k, tmp_path_factory):
    """Kill the script with SIGKILL after a checkpoint, then run the same command again."""
    work = tmp_path_factory.mktemp("resumed")
    model_dir = work / "model"
    command = [sys.executable, str(REPO / "scripts" / "train.py"),
               *train_args(tiny_multi30k.directory, model_dir)]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    with open(work / "killed.log", "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 240
        try:
            while (latest_step(model_dir) or 0) < KILL_AFTER_STEP:
                assert process.poll() is None, "the run ended before it could be killed"
                assert time.monotonic() < deadline, "no checkpoint within 240 s"
                time.sleep(0.02)
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()
    killed_at = latest_step(model_dir)
    killed_checkpoints = sorted(p.name for p in (model_dir / "checkpoints").iterdir())
    from transformer_tf.rundir.checkpoints import trained_seconds
    killed_seconds = trained_seconds(model_dir / "checkpoints" / f"ckpt-{killed_at}")
    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-3000:]
    lines = second.stdout.splitlines()
    result = json.loads("\n".join(lines[max(i for i, x in enumerate(lines) if x == "{"):]))
    return {"model_dir": model_dir, "killed_at": killed_at, "result": result,
            "killed_checkpoints": killed_checkpoints, "killed_pid": process.pid,
            "killed_seconds": killed_seconds,
            "second_stderr": second.stderr}


CHECKPOINT_EVERY = 25  # the stopped run's checkpoint cadence, in steps


@pytest.fixture(scope="module")
def stopped(tiny_multi30k, tmp_path_factory):
    """SIGTERM to the script once its checkpoint of step CHECKPOINT_EVERY exists, then the
    same command again."""
    model_dir = tmp_path_factory.mktemp("stopped") / "model"
    command = [sys.executable, str(REPO / "scripts" / "train.py"),
               *train_args(tiny_multi30k.directory, model_dir),
               "--training-option", f"checkpoint_every_steps={CHECKPOINT_EVERY}"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
    deadline = time.monotonic() + 240
    while (latest_step(model_dir) or 0) < CHECKPOINT_EVERY:
        assert process.poll() is None, "the run ended before it could be stopped"
        assert time.monotonic() < deadline, "no checkpoint within 240 s"
        time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    _, first_stderr = process.communicate(timeout=120)
    stopped_files = {"checkpoint state": latest_step(model_dir),
                     "lock record": (model_dir / "run.lock.json").exists()}
    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-3000:]
    lines = second.stdout.splitlines()
    result = json.loads("\n".join(lines[max(i for i, x in enumerate(lines) if x == "{"):]))
    return {"model_dir": model_dir, "status": process.returncode, "stderr": first_stderr,
            **stopped_files, "result": result, "second_stderr": second.stderr}


def test_a_stopped_run_saves_its_step_says_so_and_releases_the_run(stopped):
    assert stopped["status"] == 128 + signal.SIGTERM, stopped["stderr"][-3000:]
    message = re.search(r"stopped by SIGTERM at step (\d+) \(checkpoint (\S+) saved\); "
                        r"the same command resumes the run from there", stopped["stderr"])
    assert message, stopped["stderr"][-3000:]
    step = int(message.group(1))
    # A signal that lands while step 25's callbacks run stops at 25 (its checkpoint is then
    # the periodic one).
    assert CHECKPOINT_EVERY <= step < STEPS, stopped["stderr"][-3000:]
    assert message.group(2).endswith(f"ckpt-{step}")
    assert stopped["checkpoint state"] == step  # the newest checkpoint: the stop's
    assert "Traceback" not in stopped["stderr"], stopped["stderr"][-3000:]
    assert not stopped["lock record"]  # released, unlike a killed run's
    assert "ended without releasing its lock" not in stopped["second_stderr"]
    assert stopped["result"]["start_step"] == step


def test_a_stopped_run_resumed_ends_like_the_uninterrupted_one(stopped, reference):
    # The stop's checkpoint holds the step's data position too: no batch read twice.
    ours = model_weights(stopped["model_dir"], stopped["result"]["last_checkpoint"])
    theirs = model_weights(reference.model_dir, reference.last_checkpoint)
    for name in ours:
        np.testing.assert_allclose(ours[name], theirs[name], rtol=1e-4, atol=1e-5,
                                   err_msg=name)


def test_killed_run_left_a_readable_checkpoint(resumed):
    assert KILL_AFTER_STEP <= resumed["killed_at"] < STEPS  # killed mid-way
    # Saves go through temporary names: only complete checkpoints are listed.
    listed = {f"ckpt-{resumed['killed_at']}.index"}
    assert listed <= set(resumed["killed_checkpoints"])


def test_restarted_run_breaks_the_killed_runs_lock(resumed):
    # The killed run held MDIR's lock (rundir/lock.py); the restart took it over.
    assert (f"the previous run (pid {resumed['killed_pid']} on host"
            in resumed["second_stderr"])
    assert not (resumed["model_dir"] / "run.lock.json").exists()  # released at the end


def test_restarted_run_continues_from_the_saved_step(resumed):
    result = resumed["result"]
    assert result["start_step"] == resumed["killed_at"]
    assert result["step"] == result["planned_steps"] == STEPS
    assert result["last_checkpoint"].endswith(f"ckpt-{STEPS}")
    # The training time saved with the killed run's checkpoint is carried on.
    assert result["trained_seconds"] > resumed["killed_seconds"] > 0
    # The restarted process writes new event files; its first training scalars are
    # for the first logging step after the checkpoint, not for step LOG_EVERY.
    logdir = pathlib.Path(result["logdir"])
    newest = max((logdir / "train").iterdir(), key=lambda p: p.stat().st_mtime)
    import tensorflow as tf
    steps = sorted({event.step for event in tf.compat.v1.train.summary_iterator(str(newest))
                    if event.summary.value})
    first = (resumed["killed_at"] // LOG_EVERY + 1) * LOG_EVERY
    assert steps == list(range(first, STEPS + 1, LOG_EVERY))


def test_resumed_run_validates_at_the_uninterrupted_runs_steps(resumed, reference):
    # Killed between two validations, the run trains up to the next multiple of
    # EVAL_EVERY before validating, not EVAL_EVERY steps from where it resumed.
    assert resumed["killed_at"] % EVAL_EVERY, "killed on a validation step: nothing tested"
    ours = [step for step, _ in summaries(resumed["result"]["logdir"], "validation")["loss"]]
    theirs = [step for step, _ in summaries(reference.logdir, "validation")["loss"]]
    assert ours == theirs == list(range(EVAL_EVERY, STEPS + 1, EVAL_EVERY))


def test_every_kept_checkpoint_restores(resumed, gc_frozen):
    from transformer_tf.rundir import checkpoints

    model_dir = resumed["model_dir"]
    kept = checkpoints.list_checkpoints(model_dir)
    assert kept and kept[-1].endswith(f"ckpt-{STEPS}")
    with gc_frozen():  # a model built per checkpoint: late in a session, scans cost minutes
        for path in kept:
            weights = model_weights(model_dir, path)
            assert all(np.isfinite(w).all() for w in weights.values()), path


def test_resumed_run_ends_like_the_uninterrupted_one(resumed, reference):
    # Same step count, optimizer state (Adam moments, iteration count) and data position
    # (the seeded dataset replayed, consumed batches skipped): the same final weights.
    assert reference.step == STEPS
    ours = model_weights(resumed["model_dir"], resumed["result"]["last_checkpoint"])
    theirs = model_weights(reference.model_dir, reference.last_checkpoint)
    assert ours.keys() == theirs.keys()
    for name in ours:
        np.testing.assert_allclose(ours[name], theirs[name], rtol=1e-4, atol=1e-5,
                                   err_msg=name)


def test_the_model_learns(reference):
    loss = dict(summaries(reference.logdir, "train")["loss"])
    first, last = loss[LOG_EVERY], loss[STEPS]  # means over steps 1-10 and 191-200
    assert first > 5.5  # about log(500) = 6.2 at the start
    assert last < first - 1.5, loss
    validation = dict(summaries(reference.logdir, "validation")["loss"])
    assert validation[STEPS] < validation[EVAL_EVERY] < first


def test_tensorboard_scalars(reference, tiny_multi30k):
    from transformer_tf.training.schedule import transformer_learning_rate

    train = summaries(reference.logdir, "train")
    assert {"loss", "nll", "perplexity", "token_accuracy", "learning_rate",
            "target_tokens_per_second", "steps_per_second"} <= train.keys()
    logged_steps = list(range(LOG_EVERY, STEPS + 1, LOG_EVERY))
    for tag, values in train.items():
        assert [step for step, _ in values] == logged_steps, tag
        assert all(math.isfinite(value) for _, value in values), tag
    for (step, nll), (_, perplexity) in zip(train["nll"], train["perplexity"]):
        assert perplexity == pytest.approx(math.exp(nll), rel=1e-5)
    assert all(0 <= value <= 1 for _, value in train["token_accuracy"])
    assert all(value > 0 for _, value in train["target_tokens_per_second"])
    for step, rate in train["learning_rate"]:  # the rate of the next update (paper step + 1)
        assert rate == pytest.approx(transformer_learning_rate(step + 1, d_model=16,
                                                               warmup_steps=100), rel=1e-5)
    validation = summaries(reference.logdir, "validation")
    assert {"loss", "nll", "perplexity", "token_accuracy", "bleu", "examples"} <= \
        validation.keys()
    for tag, values in validation.items():
        assert [step for step, _ in values] == [EVAL_EVERY, STEPS], tag
    assert all(0 <= bleu <= 100 for _, bleu in validation["bleu"])
    # Example translations: a markdown table of dev sources, references and hypotheses.
    first_source = pathlib.Path(tiny_multi30k.files("valid").source).read_text().split("\n")[0]
    for _, table in validation["examples"]:
        assert table.startswith("| source | reference | hypothesis |")
        assert first_source.strip() in table
    # Attention heat maps of the first dev pair, one image per layer (one layer here).
    for kind in ("encoder", "decoder", "cross"):
        for _, pngs in validation[f"attention/{kind}"]:
            assert len(pngs) == 1 and pngs[0].startswith(b"\x89PNG\r\n\x1a\n")
