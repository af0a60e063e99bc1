"""A second model family goes through the same machinery as the Transformer.

ConvS2S is trained by the training driver (scripts/train.py's code path: its Nesterov
optimizer, plateau state and validation BLEU included), averaged, exported as a SavedModel,
served through its signature, and reloaded from a model directory whose prepared data
is gone; nothing Transformer-specific may run (building a Transformer fails during the
test). A toy GRU family, sharing no code with either beyond the contract's base class,
checks that the contract alone is enough for cached decoding."""
from __future__ import annotations

import dataclasses
import json
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import PAD_ID, DecodingConfig, _Serialisable
from transformer_tf.presets import Preset, get_preset, register_preset, unregister_preset
from transformer_tf.decoding.model_driver import DecoderState, search_model
from transformer_tf.export.saved_model import export_model_dir
from transformer_tf.inference.batch import load_translator, translate_lines
from transformer_tf.models import registry
from transformer_tf.models.contract import Seq2SeqModel
from transformer_tf.models.transformer import Transformer
from transformer_tf.rundir import checkpoints
from transformer_tf.training import averaging
from transformer_tf.training.fit import TrainOptions, build_model_and_optimizer, train

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
SENTENCES = ["A man is riding a bicycle.", "Two dogs play in the snow.", ""]


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


def test_a_family_and_its_preset_register_by_name():
    registry.register_family(ToyGru.family, ToyGru, ToyGruConfig)
    tiny = get_preset("tiny")
    register_preset("toy_gru", Preset(model=ToyGruConfig(), family=ToyGru.family,
                                      training=tiny.training, decoding=tiny.decoding))
    try:
        preset = get_preset("toy_gru")
        model = registry.build_model(preset.family, preset.model.get_config())
        assert isinstance(model, ToyGru) and model.built
        assert registry.config_class("toy_gru") is ToyGruConfig
        with pytest.raises(ValueError, match="family"):
            registry.register_family("other", ToyGru, ToyGruConfig)
    finally:
        unregister_preset("toy_gru")
        registry.FAMILIES.pop(ToyGru.family)


@pytest.fixture
def no_transformer(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a Transformer was built for a ConvS2S run")

    monkeypatch.setattr(Transformer, "__init__", refuse)


def test_nesterov_training_lowers_the_convs2s_loss():
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


def test_second_family_trains_exports_and_serves(no_transformer, tiny_multi30k, tmp_path,
                                                 gc_frozen):
    data_dir = tmp_path / "data"
    shutil.copytree(tiny_multi30k.directory, data_dir)
    model_dir = tmp_path / "model"
    with gc_frozen():
        # No plan given: the preset's step plan (TrainingConfig.train_steps).
        # float32 pinned: the export is compared with the in-memory model token by token,
        # and a 4-step model's outputs are near-ties that bfloat16 rounding (what
        # --precision auto picks on an AVX512-BF16 CPU) can flip between two graphs.
        result = train(TrainOptions(
            data_dir=str(data_dir), model_dir=str(model_dir), preset="convs2s_tiny",
            eval_every=2, validation_sentences=4, verbose=0, precision="float32",
            training_overrides={"checkpoint_every_minutes": 1e-5, "train_steps": 4}))
    assert result.step == 4
    run_config = json.loads((model_dir / "run_config.json").read_text())
    assert run_config["family"] == "convs2s"
    assert run_config["training"]["optimizer"] == "nesterov"
    # The plateau schedule's state is saved with the run; validation BLEU was decoded.
    reader = tf.train.load_checkpoint(str(checkpoints.checkpoint_dir(model_dir) / "ckpt-4"))
    assert reader.has_tensor("plateau/.ATTRIBUTES/VARIABLE_VALUE")
    assert any((model_dir / "logs" / "validation").iterdir())

    # The run directory is self-contained: the prepared data can go.
    shutil.rmtree(data_dir)
    averaged = averaging.average_run(model_dir, 2)
    assert len(averaged.sources) == 2
    export_dir = export_model_dir(model_dir, tmp_path / "saved" / "convs2s" / "1")
    info = json.loads((export_dir / "assets.extra" / "transformer_tf.json").read_text())
    assert info["family"] == "convs2s"
    assert info["decoding"]["length_penalty"] == "average"  # the preset's, recorded

    in_memory = load_translator(model_dir=str(model_dir))
    assert in_memory.owner.decoding.beam_size == 5  # the preset's (ConvS2S paper) beam
    expected, _ = translate_lines(in_memory, SENTENCES, progress=False)
    # The SavedModel is its traced graphs: loading it needs none of our Python classes
    # (tests/export/test_export.py loads a Transformer export in a fresh process).
    loaded = tf.saved_model.load(str(export_dir))
    out = loaded.signatures["serving_default"](text=tf.constant(SENTENCES))
    served = [t.decode() for t in out["translation"].numpy()]
    assert served == [row[0] for row in expected]
    assert served[2] == ""  # a blank row stays blank

    # And the search is a real one: n-best through the same glue, sorted by score.
    model = in_memory.owner.model
    ids = tf.constant([[5, 6, 7, 3], [8, 3, 0, 0]], tf.int32)
    beams = search_model(model, ids, DecodingConfig(beam_size=3, max_extra_length=4), n_best=3)
    assert beams.ids.shape[:2] == (2, 3)
    assert np.all(np.diff(beams.scores.numpy(), axis=1) <= 0)
