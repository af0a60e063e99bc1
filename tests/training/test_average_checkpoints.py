"""Checkpoint averaging: `averaging.average_checkpoints` and scripts/average_checkpoints.py.

The expected values are computed independently of the model: every checkpoint is read
with `tf.train.load_checkpoint` and its variables averaged element-wise in numpy.
"""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from transformer_tf.config import ModelConfig
from transformer_tf.models.transformer import Transformer
from transformer_tf.rundir import checkpoints, model_dir as model_dir_lib
from transformer_tf.training import averaging

REPO = pathlib.Path(__file__).resolve().parents[2]
MODEL = ModelConfig(vocab_size=40, num_layers=1, d_model=8, d_ff=16, num_heads=2,
                    max_position=16)
STEPS = (10, 20, 30, 40)
MODEL_PREFIX = "model/"


def load_script():
    spec = importlib.util.spec_from_file_location(
        "average_checkpoints_script", REPO / "scripts" / "average_checkpoints.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, write_checkpointed_run):
    """A run directory (run_config.json) with training checkpoints ckpt-10 ... ckpt-40 of
    model and Adam state, each with different random weights."""
    return write_checkpointed_run(tmp_path_factory.mktemp("run"), MODEL, STEPS, average_last=3)


def model_variables(path) -> dict:
    """{path of the variable from the model, e.g. "encoder_layer_0/feed_forward/inner/
    _kernel": array} for the model's variables in the checkpoint at `path`.

    A checkpoint stores each variable once, under its shortest path from the root object:
    in a training checkpoint most model variables are stored as
    "optimizer/_trainable_variables/N/...", in an averaged one as "model/...". So the keys
    are matched through the checkpoint's object graph: every path from the "model" object
    to a variable names it (a shared variable has several names).
    """
    reader = tf.train.load_checkpoint(str(path))
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    found = {}

    def walk(node_id, prefix, on_path):
        node = graph.nodes[node_id]
        for attribute in node.attributes:
            if attribute.name == "VARIABLE_VALUE":
                found[prefix] = reader.get_tensor(attribute.checkpoint_key)
        for child in node.children:
            if (child.node_id not in on_path and len(on_path) < 10
                    and child.local_name != "optimizer"):  # a compiled model's optimizer
                walk(child.node_id, f"{prefix}/{child.local_name}".lstrip("/"),
                     on_path | {child.node_id})

    (model,) = [c.node_id for c in graph.nodes[0].children if c.local_name == "model"]
    walk(model, "", {model})
    return found


def expected_mean(paths) -> dict:
    tables = [model_variables(p) for p in paths]
    assert all(t.keys() == tables[0].keys() for t in tables)
    return {key: np.mean([t[key].astype(np.float64) for t in tables], axis=0)
            for key in tables[0]}


def assert_checkpoint_is_mean(path, paths):
    got, want = model_variables(path), expected_mean(paths)
    assert got.keys() == want.keys()
    model = Transformer(MODEL)
    model.build()
    assert len(got) >= len(model.weights) > 40  # all of them (some twice: shared)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-6, atol=1e-7, err_msg=key)


def test_lists_checkpoints_oldest_first(model_dir):
    listed = checkpoints.list_checkpoints(model_dir)
    assert [pathlib.Path(p).name for p in listed] == [f"ckpt-{s}" for s in STEPS]


def test_average_equals_elementwise_mean(model_dir, tmp_path):
    paths = checkpoints.list_checkpoints(model_dir)[-3:]
    model = Transformer(MODEL)
    model.build()
    written = averaging.average_checkpoints(model, paths, tmp_path / "avg" / "ckpt")
    assert_checkpoint_is_mean(written, paths)
    # The model holds the average too, and a fresh model loads it.
    fresh = Transformer(MODEL)
    fresh.build()
    checkpoints.load_weights(fresh, written)
    for a, b in zip(model.weights, fresh.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # Only the model is written (no optimizer state).
    keys = tf.train.load_checkpoint(str(written)).get_variable_to_shape_map()
    assert not [k for k in keys if k.startswith("optimizer/")]


def test_script_averages_the_last_n(model_dir, tmp_path, capsys):
    out = tmp_path / "averaged" / "ckpt"
    code = load_script().main(["--model-dir", str(model_dir), "--last", "2", "--out", str(out)])
    assert code == 0
    assert "averaged 2 checkpoint(s) (ckpt-30, ckpt-40)" in capsys.readouterr().out
    assert_checkpoint_is_mean(out, checkpoints.list_checkpoints(model_dir)[-2:])


def test_script_defaults(model_dir, capsys):
    # --last defaults to the run's training.average_last (3), --out to MDIR/averaged/ckpt.
    assert load_script().main(["--model-dir", str(model_dir)]) == 0
    assert "(ckpt-20, ckpt-30, ckpt-40)" in capsys.readouterr().out
    assert_checkpoint_is_mean(model_dir_lib.averaged_prefix(model_dir),
                              checkpoints.list_checkpoints(model_dir)[-3:])


def test_script_fails_on_too_few_checkpoints_unless_allowed(model_dir, tmp_path, capsys):
    script = load_script()
    out = tmp_path / "few" / "ckpt"
    assert script.main(["--model-dir", str(model_dir), "--last", "6", "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert "has 4 checkpoint(s) (ckpt-10, ckpt-20, ckpt-30, ckpt-40), fewer than --last 6" in error
    assert "--allow-fewer" in error
    assert not out.parent.exists()
    assert script.main(["--model-dir", str(model_dir), "--last", "6", "--out", str(out),
                        "--allow-fewer"]) == 0
    assert "warning:" in capsys.readouterr().err
    assert_checkpoint_is_mean(out, checkpoints.list_checkpoints(model_dir))


def test_script_errors(tmp_path, capsys):
    script = load_script()
    (tmp_path / "saved_model.pb").write_bytes(b"not a run")
    assert script.main(["--model-dir", str(tmp_path)]) == 2
    assert "run_config.json not found" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["saved_model.pb"]  # no lock file
    with pytest.raises(SystemExit):
        script.main(["--model-dir", str(tmp_path), "--last", "0"])


def test_script_never_writes_over_a_checkpoint(model_dir, tmp_path, capsys):
    script = load_script()
    training = checkpoints.list_checkpoints(model_dir)
    newest = pathlib.Path(training[-1])
    before = {path.name: path.read_bytes() for path in newest.parent.iterdir()}
    # Onto the newest training checkpoint (a resumed run would lose its optimizer state),
    # or any new name among them: refused before anything is read or written.
    for out in (newest, newest.parent / "mine"):
        assert script.main(["--model-dir", str(model_dir), "--last", "2", "--out",
                            str(out)]) == 2
        assert f"--out {out}: inside {model_dir / 'checkpoints'}, the run's training " \
               "checkpoints" in capsys.readouterr().err
    assert {path.name: path.read_bytes() for path in newest.parent.iterdir()} == before
    # A prefix of the user's own is written once, then left as it is.
    out = tmp_path / "mine" / "ckpt"
    assert script.main(["--model-dir", str(model_dir), "--last", "2", "--out", str(out)]) == 0
    written = {path.name: path.read_bytes() for path in out.parent.iterdir()}
    assert script.main(["--model-dir", str(model_dir), "--last", "3", "--out", str(out)]) == 2
    assert f"--out {out}: a checkpoint already exists there (ckpt.index)" in \
        capsys.readouterr().err
    assert {path.name: path.read_bytes() for path in out.parent.iterdir()} == written
    assert_checkpoint_is_mean(out, training[-2:])
