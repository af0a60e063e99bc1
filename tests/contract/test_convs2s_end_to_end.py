"""ConvS2S through the whole machinery: scripts/train.py's code path (validation BLEU and
the plateau schedule's checkpointed state included), checkpoint averaging, SavedModel export and translation
in a fresh process; and its Nesterov training lowers the loss."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import keras
import numpy as np
import tensorflow as tf

from transformer_tf.config import get_preset
from transformer_tf.export.saved_model import export_model_dir
from transformer_tf.inference.batch import load_translator, translate_lines
from transformer_tf.training import checkpoints
from transformer_tf.training.fit import TrainOptions, build_model_and_optimizer, train

SENTENCES = ["A man is riding a bicycle.", "Two dogs play in the snow.", ""]

FRESH_PROCESS = r"""
import json, sys
import tensorflow as tf, tensorflow_text  # noqa: F401
loaded = tf.saved_model.load(sys.argv[1])
out = loaded.signatures["serving_default"](text=tf.constant(json.loads(sys.argv[2])))
print(json.dumps([t.decode() for t in out["translation"].numpy()]))
"""


def test_nesterov_training_lowers_the_loss():
    preset = get_preset("convs2s_tiny")
    trainer = build_model_and_optimizer(preset.model, preset.training, family="convs2s")
    assert isinstance(trainer.optimizer, keras.optimizers.SGD) and trainer.optimizer.nesterov
    rng = np.random.default_rng(0)
    source = rng.integers(4, 64, (8, 7)).astype(np.int32)
    target = rng.integers(4, 64, (8, 6)).astype(np.int32)
    labels = np.concatenate([target[:, 1:], np.full((8, 1), 3, np.int32)], axis=1)
    batch = ((tf.constant(source), tf.constant(target)), tf.constant(labels))
    losses = [float(trainer.train_on_batch(*batch, return_dict=True)["nll"]) for _ in range(40)]
    assert losses[-1] < 0.7 * losses[0], losses


def test_convs2s_trains_averages_exports_and_serves(tiny_multi30k, tmp_path, gc_frozen):
    data_dir = tmp_path / "data"
    shutil.copytree(tiny_multi30k.directory, data_dir)
    model_dir = tmp_path / "model"
    options = dict(data_dir=str(data_dir), model_dir=str(model_dir), preset="convs2s_tiny",
                   eval_every=2, validation_sentences=4, verbose=0,
                   # No plan given: the preset's step plan (TrainingConfig.train_steps).
                   training_overrides={"checkpoint_every_minutes": 1e-5, "train_steps": 4})
    with gc_frozen():
        result = train(TrainOptions(**options))
    assert result.step == 4
    run_config = json.loads((model_dir / "run_config.json").read_text())
    assert run_config["family"] == "convs2s"
    assert run_config["training"]["optimizer"] == "nesterov"
    reader = tf.train.load_checkpoint(str(checkpoints.checkpoint_dir(model_dir) / "ckpt-4"))
    assert reader.has_tensor("plateau/.ATTRIBUTES/VARIABLE_VALUE")
    assert any((model_dir / "logs" / "validation").iterdir())

    averaged = checkpoints.average_run(model_dir, 2)
    assert len(averaged.sources) == 2
    export_dir = export_model_dir(model_dir, tmp_path / "saved" / "convs2s" / "1")
    info = json.loads((export_dir / "assets.extra" / "transformer_tf.json").read_text())
    assert info["family"] == "convs2s"

    in_memory = load_translator(model_dir=str(model_dir))
    assert in_memory.owner.decoding.beam_size == 5  # the preset's (ConvS2S paper) beam
    expected, _ = translate_lines(in_memory, SENTENCES, progress=False)
    fresh = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(export_dir),
                            json.dumps(SENTENCES)],
                           capture_output=True, text=True, timeout=300, check=True)
    served = json.loads(fresh.stdout.strip().splitlines()[-1])
    assert served == [row[0] for row in expected]
    assert served[2] == ""  # a blank row stays blank
