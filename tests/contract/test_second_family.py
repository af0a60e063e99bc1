"""A second model family goes through the same machinery as the Transformer: trained by
the training driver (scripts/train.py's code path, validation BLEU included), averaged,
exported as a SavedModel, translated from in a fresh process, and reloaded from a model
directory whose prepared data is gone. Nothing Transformer-specific may run: building a
Transformer fails during the test."""
from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import (
    PAD_ID, DecodingConfig, Preset, _Serialisable, get_preset, register_preset,
    unregister_preset)
from transformer_tf.decoding.model_search import DecoderState, search_model
from transformer_tf.export.saved_model import export_model_dir
from transformer_tf.inference.batch import load_translator, translate_lines
from transformer_tf.models import registry
from transformer_tf.models.contract import Seq2SeqModel
from transformer_tf.models.transformer import Transformer
from transformer_tf.training import checkpoints
from transformer_tf.training.fit import TrainOptions, train

# ---------------------------------------------------------------------------- the toy family
# A bag-of-words encoder (embedding, tanh layer, masked mean) and a one-layer GRU decoder
# started from it: it shares no code with the Transformer beyond the contract's base class.


@dataclasses.dataclass(frozen=True)
class ToyGruConfig(_Serialisable):
    vocab_size: int = 64
    width: int = 16
    max_length: int = 64

    def resolved(self) -> "ToyGruConfig":
        return self


class ToyGru(Seq2SeqModel):
    family = "toy_gru"

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = ToyGruConfig.from_config(config) if isinstance(config, dict) else config
        c = self.config
        self.embedding = keras.layers.Embedding(c.vocab_size, c.width, name="embedding")
        self.source_layer = keras.layers.Dense(c.width, activation="tanh", name="source_layer")
        self.decoder = keras.layers.GRU(c.width, return_sequences=True, name="decoder")
        self.output_layer = keras.layers.Dense(c.vocab_size, name="output_layer")

    def build(self, input_shape=None):
        c = self.config
        self.embedding.build((None, None))
        self.source_layer.build((None, None, c.width))
        self.decoder.build((None, None, c.width))
        self.output_layer.build((None, None, c.width))
        self.built = True

    source_vocab_size = target_vocab_size = property(lambda self: self.config.vocab_size)
    max_source_length = max_target_length = property(lambda self: self.config.max_length)
    model_width = property(lambda self: self.config.width)

    def call(self, inputs, training=None):
        source_ids, target_input_ids = self.check_inputs(inputs)
        state = self.encode(source_ids)
        return self.output_layer(self.decoder(self.embedding(target_input_ids),
                                              initial_state=state))

    def encode(self, source_ids, training=False):
        valid = tf.cast(tf.not_equal(source_ids, PAD_ID), tf.float32)[:, :, None]
        hidden = self.source_layer(self.embedding(source_ids)) * valid
        return tf.reduce_sum(hidden, 1) / tf.maximum(tf.reduce_sum(valid, 1), 1.0)  # [B, W]

    def init_cache(self, encoded, max_length) -> DecoderState:
        return DecoderState(per_sentence=(), per_beam={"state": encoded})

    def decode_step(self, ids, step, state: DecoderState):
        x = self.embedding(tf.cast(ids, tf.int32))
        output, (new_state,) = self.decoder.cell(x, [state.per_beam["state"]])
        return self.output_layer(output), state._replace(per_beam={"state": new_state})


# ---------------------------------------------------------------------------- tests
SENTENCES = ["A man is riding a bicycle.", "Two dogs play in the snow."]

FRESH_PROCESS = r"""
import json, sys
import tensorflow as tf, tensorflow_text  # noqa: F401
loaded = tf.saved_model.load(sys.argv[1])
out = loaded.signatures["serving_default"](text=tf.constant(json.loads(sys.argv[2])))
print(json.dumps([t.decode() for t in out["translation"].numpy()]))
"""


@pytest.fixture
def toy_family(monkeypatch):
    registry.register_family(ToyGru.family, ToyGru, ToyGruConfig)
    tiny = get_preset("tiny")
    register_preset("toy_gru", Preset(model=ToyGruConfig(), family=ToyGru.family,
                                      training=tiny.training, decoding=tiny.decoding))

    def no_transformer(*args, **kwargs):
        raise AssertionError("a Transformer was built for a toy_gru run")

    monkeypatch.setattr(Transformer, "__init__", no_transformer)
    yield
    unregister_preset("toy_gru")
    registry.FAMILIES.pop(ToyGru.family)


def test_contract_holds_for_the_toy_model():
    # Its cached decoding reproduces its own teacher-forced logits.
    model = ToyGru(ToyGruConfig())
    model.build()
    rng = np.random.default_rng(0)
    source = tf.constant(rng.integers(4, 64, (3, 5)), tf.int32)
    target = tf.constant(rng.integers(4, 64, (3, 6)), tf.int32)
    full = model((source, target)).numpy()
    state = model.init_cache(model.encode(source), 6)
    for t in range(6):
        logits, state = model.decode_step(target[:, t], t, state)
        np.testing.assert_allclose(logits.numpy(), full[:, t], atol=1e-5)


def test_second_family_trains_exports_and_serves(toy_family, tiny_multi30k, tmp_path, gc_frozen):
    data_dir = tmp_path / "data"
    shutil.copytree(tiny_multi30k.directory, data_dir)
    model_dir = tmp_path / "model"
    with gc_frozen():
        result = train(TrainOptions(
            data_dir=str(data_dir), model_dir=str(model_dir), preset="toy_gru", max_steps=4,
            eval_every=2, validation_sentences=4, verbose=0,
            training_overrides={"checkpoint_every_minutes": 1e-5}))
    assert result.step == 4
    run_config = json.loads((model_dir / "run_config.json").read_text())
    assert run_config["family"] == "toy_gru"
    # The validation BLEU callback decoded with the toy model.
    assert any((model_dir / "logs" / "validation").iterdir())

    # The run directory is self-contained: the prepared data can go.
    shutil.rmtree(data_dir)
    averaged = checkpoints.average_run(model_dir, 2)
    assert len(averaged.sources) == 2
    export_dir = export_model_dir(model_dir, tmp_path / "saved" / "toy" / "1")
    info = json.loads((export_dir / "assets.extra" / "transformer_tf.json").read_text())
    assert info["family"] == "toy_gru"

    in_memory = load_translator(model_dir=str(model_dir))
    expected, _ = translate_lines(in_memory, SENTENCES, progress=False)
    fresh = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(export_dir),
                            json.dumps(SENTENCES)],
                           capture_output=True, text=True, timeout=300, check=True)
    assert json.loads(fresh.stdout.strip().splitlines()[-1]) == [row[0] for row in expected]

    # And the search is a real one: beam 3 through the same glue.
    model = in_memory.owner.model
    ids = tf.constant([[5, 6, 7, 3], [8, 3, 0, 0]], tf.int32)
    beams = search_model(model, ids, DecodingConfig(beam_size=3, max_extra_length=4), n_best=3)
    assert beams.ids.shape[:2] == (2, 3)
    assert np.all(np.diff(beams.scores.numpy(), axis=1) <= 0)
