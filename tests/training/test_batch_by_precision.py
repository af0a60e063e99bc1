"""A preset's training fields for mixed precision (`Preset.training_for`): a run takes
them in mixed precision only, a user's value wins, a resumed run keeps the batch it
began with, and --dump-config shows what a run on this machine would take."""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging

import pytest

from transformer_tf.cli import train as train_cli
from transformer_tf.presets import get_preset, register_preset, unregister_preset
from transformer_tf.training import fit

TINY = get_preset("tiny")
MIXED_BATCH = 1024  # tiny's own is 512
FAST = dataclasses.replace(TINY, mixed_precision_training={"tokens_per_batch": MIXED_BATCH})


@pytest.fixture
def fast_preset():
    register_preset("tiny_fast", FAST)
    yield "tiny_fast"
    unregister_preset("tiny_fast")


def test_the_fields_apply_in_mixed_precision_only():
    assert TINY.training.tokens_per_batch == 512
    assert FAST.training_for("float32") == TINY.training
    for policy in ("mixed_bfloat16", "mixed_float16"):
        assert FAST.training_for(policy) == TINY.training.replace(tokens_per_batch=MIXED_BATCH)
    assert TINY.training_for("mixed_bfloat16") == TINY.training  # no fields: unchanged


def test_dump_config_shows_the_multi30k_batch_of_the_given_precision():
    def dumped_batch(*argv):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert train_cli.main(["--preset", "multi30k", *argv, "--dump-config"]) == 0
        return json.loads(out.getvalue())["training"]["tokens_per_batch"]

    assert dumped_batch("--precision", "float32") == 2048
    assert dumped_batch("--precision", "mixed_bfloat16") == 4096
    assert dumped_batch("--precision", "mixed_float16") == 4096
    assert dumped_batch("--precision", "mixed_bfloat16", "--tokens-per-batch", "300") == 300
    assert dumped_batch("--precision", "mixed_bfloat16",
                        "--training-option", "tokens_per_batch=300") == 300


def test_a_run_takes_its_precisions_batch_and_keeps_it_when_resumed(
        fast_preset, tiny_multi30k, tmp_path, caplog, gc_frozen):
    def train(name, precision, max_steps=1, **training_overrides):
        options = fit.TrainOptions(
            data_dir=str(tiny_multi30k.directory), model_dir=str(tmp_path / name),
            preset=fast_preset, model_overrides={"num_layers": 1},
            training_overrides=training_overrides, max_steps=max_steps, precision=precision,
            validation_sentences=0, verbose=0)
        with gc_frozen():
            return fit.train(options)

    def recorded_batch(name):
        run_config = json.loads((tmp_path / name / "run_config.json").read_text())
        return run_config["training"]["tokens_per_batch"]

    assert train("float", "float32").tokens_per_batch == 512
    with caplog.at_level(logging.INFO, logger=fit.__name__):
        assert train("mixed", "mixed_bfloat16").tokens_per_batch == MIXED_BATCH
    assert recorded_batch("mixed") == MIXED_BATCH
    assert f"preset 'tiny_fast' in mixed_bfloat16: tokens_per_batch={MIXED_BATCH} (in " \
           "float32: tokens_per_batch=512)" in [r.getMessage() for r in caplog.records]

    # Resumed where the precision (or the preset) gives another batch: the run's own.
    with caplog.at_level(logging.INFO, logger=fit.__name__):
        resumed = train("float", "mixed_bfloat16", max_steps=2)
    assert (resumed.step, resumed.tokens_per_batch) == (2, 512)
    assert recorded_batch("float") == 512
    assert any(r.getMessage() == f"{tmp_path / 'float'} keeps its recorded tokens_per_batch "
                                 f"512 (its preset's here: {MIXED_BATCH})" for r in caplog.records)
    # A batch the user gives still wins, on resuming too (and over the mixed-precision
    # field: test_dump_config_shows_the_multi30k_batch_of_the_given_precision).
    assert train("float", "mixed_bfloat16", max_steps=3,
                 tokens_per_batch=300).tokens_per_batch == 300
