"""MultiWorkerMirroredStrategy with two local worker processes (TF_CONFIG on 127.0.0.1).

Each worker runs scripts/train.py --strategy multiworker (its `main`, with a hook that
keeps the model to save its weights afterwards): model.fit of our Transformer (preset
tiny) on a small Multi30k slice, with validation, TensorBoard and checkpoints. The run
resumes from a checkpoint already in the model directory, so it also shows that every
worker restores it (a worker starting from scratch would train different steps than the
other and wait for it forever).

The run has a time budget (--max-minutes), and worker 1's clock runs out at step
TIME_UP (patched): a worker stopping alone would leave the other waiting for it forever,
so both must stop there together.

Shows: both workers resume, train and stop at the same step with identical weights, the
work-arounds for keras-team/keras#20585 are active (a multi-worker strategy, logs of shape
[1]), and only the chief writes into the model directory.
"""
from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
# Resumed at step 4: one fit of steps 5-6 that ends with the validation at step 6, then
# a second fit (`fit.fit_on_the_validation_grid`), both across the workers.
START, STEPS, EVAL_EVERY = 4, 10, 6
TIME_UP = 8  # worker 1's time budget runs out after this step
TIMEOUT = 420  # seconds for both workers together

WORKER = r"""
import json, os, runpy, sys
import numpy as np
from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
from tensorflow.python.distribute import multi_worker_util
from tensorflow.python.distribute.cluster_resolver import TFConfigClusterResolver
from tensorflow.python.eager import context
from transformer_tf.training import callbacks, distribution, fit, multi_worker_fit

# The coordination service the strategy would set up, with 2 minutes of missed heartbeats
# before a worker is declared lost instead of TensorFlow's default (a 25 s pause of one
# worker already exceeds it): on 2 cores shared with the rest of the suite a worker can be
# starved that long (seen once, under a profiler).
context.context().configure_coordination_service(
    "standalone", multi_worker_util.coordination_leader(
        TFConfigClusterResolver().cluster_spec()),
    coordinated_jobs=[coordination_config_pb2.CoordinatedJob(name="worker", num_tasks=2)],
    heartbeat_timeout_in_ms=120_000)
out, time_up, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
if json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 1:
    callbacks.TimeBudget._out_of_time = (
        lambda self: int(self.model.optimizer.iterations.numpy()) >= time_up)
kept = {}
build = fit.build_model_and_optimizer
def keep(*args, **kwargs):
    kept["model"] = build(*args, **kwargs)
    return kept["model"]
fit.build_model_and_optimizer = keep
log_shapes = set()
shape_logs = multi_worker_fit.MultiWorkerFitMixin.shape_logs_for_strategy
def record(self, logs):
    logs = shape_logs(self, logs)
    log_shapes.update(tuple(v.shape) for v in logs.values())
    return logs
multi_worker_fit.MultiWorkerFitMixin.shape_logs_for_strategy = record

from transformer_tf.cli import launch
launch.end_process = sys.exit  # the script's exit: an exception here, the weights saved below
sys.argv = list(argv)  # argv[0] is the script
try:
    runpy.run_path(argv[0], run_name="__main__")
except SystemExit as exit:
    code = exit.code
model = kept["model"]
np.savez(out, iterations=int(model.optimizer.iterations.numpy()),
         multi_worker=distribution.is_multi_worker(model.distribute_strategy),
         log_shapes=np.array(sorted(log_shapes)),
         **{f"w{i}": w.numpy() for i, w in enumerate(model.weights)})
sys.stdout.flush()
# Exit at once: at a normal exit the chief waits ~15 s for the other worker's heartbeats.
os._exit(code or 0)
"""


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def existing_checkpoint(prepared, model_dir, options):
    """run_config.json and a checkpoint at step START, as a killed run would leave them."""
    import keras

    from transformer_tf.rundir import checkpoints, model_dir as model_dir_lib
    from transformer_tf.training import fit
    from transformer_tf.training.precision import resolve_precision

    run = fit._run_config(options, prepared, resolve_precision(options.precision)[0])
    model_dir_lib.write_run_config(model_dir, run)
    model = fit.build_model_and_optimizer(run.model, run.training)
    rng = np.random.default_rng(3)
    for weight in model.weights:  # not the seeded initialisation: restoring matters
        weight.assign(weight.numpy() + 0.1 * rng.normal(size=weight.shape).astype("float32"))
    model.optimizer.iterations.assign(START)
    checkpoints.make_manager(model.network, model.optimizer, model_dir, 5).save(checkpoint_number=START)
    keras.backend.clear_session()


@pytest.fixture(scope="module")
def workers(tiny_multi30k, tmp_path_factory):
    from transformer_tf.training.fit import TrainOptions

    work = tmp_path_factory.mktemp("multiworker")
    model_dir = work / "model"
    existing_checkpoint(tiny_multi30k, model_dir, TrainOptions(
        data_dir=str(tiny_multi30k.directory), model_dir=str(model_dir), preset="tiny",
        model_overrides={"num_layers": 1},
        training_overrides={"checkpoint_every_minutes": 0.0001}))
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(2)]}
    args = [str(REPO / "scripts" / "train.py"), "--data", str(tiny_multi30k.directory),
            "--preset", "tiny", "--model-dir", str(model_dir), "--max-steps", str(STEPS),
            "--eval-every", str(EVAL_EVERY), "--log-every", "2", "--strategy", "multiworker",
            "--training-option", "checkpoint_every_minutes=0.0001", "--quiet",
            "--model-option", "num_layers=1",  # less to trace
            "--max-minutes", "30"]
    processes, logs = [], []
    for index in range(2):
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_CONFIG": json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": index}})}
        logs.append(work / f"worker{index}.log")
        with open(logs[-1], "w") as log:
            processes.append(subprocess.Popen(
                [sys.executable, "-c", WORKER, str(work / f"worker{index}.npz"), str(TIME_UP),
                 *args],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work))
    deadline = time.monotonic() + TIMEOUT
    try:
        for process in processes:
            process.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pytest.fail(f"the workers did not finish within {TIMEOUT} s (deadlock?):\n"
                    + "\n".join(log.read_text()[-3000:] for log in logs))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    texts = [log.read_text() for log in logs]
    for process, text in zip(processes, texts):
        assert process.returncode == 0, text[-5000:]
    results = []
    for text in texts:
        lines = text.splitlines()
        results.append(json.loads("\n".join(lines[max(i for i, x in enumerate(lines)
                                                      if x == "{"):
                                              1 + max(i for i, x in enumerate(lines)
                                                      if x == "}")])))
    return {"model_dir": model_dir,
            "weights": [dict(np.load(work / f"worker{i}.npz")) for i in range(2)],
            "results": results}


def test_both_workers_resume_and_stop_together(workers):
    for result, saved in zip(workers["results"], workers["weights"]):
        assert bool(saved["multi_worker"])
        assert result["start_step"] == START
        assert result["planned_steps"] == STEPS
        assert result["step"] == TIME_UP == int(saved["iterations"])
        assert result["stopped_by"] == "time"


def test_workers_end_with_identical_weights(workers):
    chief, other = workers["weights"]
    names = [k for k in chief if k.startswith("w")]
    assert len(names) > 40 and names == [k for k in other if k.startswith("w")]
    for name in names:
        np.testing.assert_array_equal(chief[name], other[name], err_msg=name)


def test_steps_return_logs_of_shape_one(workers):
    # Work-around 2 of keras-team/keras#20585: scalar logs would fail Keras' reduction.
    for saved in workers["weights"]:
        assert saved["log_shapes"].tolist() == [[1]]


def test_only_the_chief_writes_the_model_directory(workers):
    from transformer_tf.rundir import checkpoints

    model_dir = workers["model_dir"]
    assert sorted(p.name for p in model_dir.iterdir()) == [
        ".run.lock", "bpe.model", "checkpoints", "logs", "run_config.json",
        "validation.jsonl"]  # the chief's lock and validation log
    kept = [pathlib.Path(p).name for p in checkpoints.list_checkpoints(model_dir)]
    # The restored one, then one per step (checkpoint_every_minutes is tiny): the chief
    # saves alone, at any step, without waiting for an epoch end.
    assert kept == [f"ckpt-{step}" for step in range(START, TIME_UP + 1)]
    assert workers["results"][0]["last_checkpoint"].endswith(f"ckpt-{TIME_UP}")
    # One TensorBoard writer (the chief's) per run directory.
    for run in ("train", "validation"):
        assert len(list((model_dir / "logs" / run).iterdir())) == 1
    # The chief's last checkpoint holds the weights both workers ended with.
    import tensorflow as tf
    reader = tf.train.load_checkpoint(str(model_dir / "checkpoints" / f"ckpt-{TIME_UP}"))
    saved = sorted(reader.get_tensor(k).tobytes() for k in reader.get_variable_to_shape_map()
                   if k.startswith(("model/", "optimizer/_trainable_variables/")))
    final = workers["weights"][0]
    assert saved == sorted(final[k].tobytes() for k in final if k.startswith("w"))


@pytest.mark.parametrize("cluster, task_type, task_id, chief", [
    ({"worker": ["a:1", "b:1"]}, "worker", 0, True),
    ({"worker": ["a:1", "b:1"]}, "worker", 1, False),
    ({"chief": ["c:1"], "worker": ["a:1", "b:1"]}, "chief", 0, True),
    ({"chief": ["c:1"], "worker": ["a:1", "b:1"]}, "worker", 0, False),  # the chief writes
    ({"chief": ["c:1"], "worker": ["a:1"], "evaluator": ["e:1"]}, "evaluator", 0, False),
    ({}, None, None, True),
])
def test_is_chief(cluster, task_type, task_id, chief):
    import types

    import tensorflow as tf

    from transformer_tf.training.distribution import is_chief

    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), task_type=task_type, task_id=task_id)
    assert is_chief(types.SimpleNamespace(cluster_resolver=resolver)) is chief
    assert is_chief(types.SimpleNamespace()) is True  # the default strategy
