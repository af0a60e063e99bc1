"""The main job keeps the averaged checkpoint only when it beats the latest one on the dev
set: a run with a bad checkpoint in its final part never ends worse than its latest."""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import tensorflow as tf

from transformer_tf.data.prepared import load_prepared
from transformer_tf.inference.loading import load_trained
from transformer_tf.inference.selection import average_and_choose, choose
from transformer_tf.training import checkpoints
from transformer_tf.training.fit import TrainOptions, train

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_a_bad_tail_checkpoint_never_makes_the_result_worse(tiny_multi30k, tmp_path, gc_frozen,
                                                            capsys):
    model_dir = tmp_path / "model"
    with gc_frozen():
        train(TrainOptions(
            data_dir=str(tiny_multi30k.directory), model_dir=str(model_dir), preset="tiny",
            model_overrides={"num_layers": 1}, max_steps=20, eval_every=20,
            validation_sentences=0, verbose=0,
            training_overrides={"checkpoint_every_minutes": 1e-5, "keep_checkpoints": 30}))
    available = checkpoints.list_checkpoints(model_dir)
    tail = checkpoints.tail_checkpoints(available, 3)
    assert [checkpoints.checkpoint_step(p) for p in tail] == [18, 19, 20]

    # Ruin ckpt-19 (inside the averaged tail): noise on every weight.
    model, _, _, _ = load_trained(model_dir, tail[1])
    rng = np.random.default_rng(0)
    for weight in model.weights:
        weight.assign(weight.numpy() + rng.normal(0, 1.0, weight.shape).astype("float32"))
    tf.train.Checkpoint(model=model).write(tail[1])

    prepared = load_prepared(tiny_multi30k.directory)
    with gc_frozen():  # (as the main job does between its stages)
        selection = average_and_choose(model_dir, prepared, 3, beam_size=2, alpha=0.6,
                                       bleu_limit=8)  # NLL on all 40 dev pairs
    assert selection.averaged_sources == tail
    latest, average = selection.scores
    assert (latest.name, average.name) == ("latest", "averaged")
    assert average.nll > latest.nll + 0.1  # the average really is worse here
    assert selection.chosen == latest

    # scripts/average_checkpoints.py --select dev says the same.
    spec = importlib.util.spec_from_file_location("average_script",
                                                  REPO / "scripts" / "average_checkpoints.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--model-dir", str(model_dir), "--last", "3", "--select", "dev",
                        "--beam-size", "2"]) == 0
    assert "better on the dev set: latest" in capsys.readouterr().out

    # With a good average, the choice goes the other way on the same rule.
    better = average.__class__(name="averaged", checkpoint=average.checkpoint, nll=latest.nll - 1,
                               bleu=latest.bleu + 1)
    assert choose([latest, better]) == better
