"""A training batch that does not fit in memory: the token budget is halved (saved state,
recorded, warned) and training goes on, down to the smallest budget that holds a longest
sentence; below it, a clear error.

The allocator's failure is injected through `fit.run_fit`: on its first calls a callback
raises tf.errors.ResourceExhaustedError once the run has made a given number of steps in
that call, as an allocation inside the next step would.
"""
from __future__ import annotations

import json
import logging
import shutil

import keras
import pytest
import tensorflow as tf

from transformer_tf.rundir import batch_budget, checkpoints
from transformer_tf.training import fit

OPTIONS = {"preset": "tiny", "model_overrides": {"num_layers": 1}, "validation_sentences": 0,
           "verbose": 0}
PAIRS_CHECKED = 5  # batches of each attempt's dataset whose padded size is checked


class _OutOfMemoryAt(keras.callbacks.Callback):
    def __init__(self, step: int):
        super().__init__()
        self.step = step

    def on_train_batch_begin(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) >= self.step:
            raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor "
                                                               "with shape[4096,4096] (injected)")


@pytest.fixture(scope="module")
def train_only_data(tiny_multi30k, tmp_path_factory):
    """The tiny Multi30k slice without its dev split (no validation pass to compile)."""
    data = tmp_path_factory.mktemp("oom") / "data"
    shutil.copytree(tiny_multi30k.directory, data)
    metadata = json.loads((data / "prepared.json").read_text())
    del metadata["splits"]["valid"]
    (data / "prepared.json").write_text(json.dumps(metadata))
    return str(data)


@pytest.fixture
def failing_allocator(monkeypatch):
    """A function (failures, steps_before) installing the failure; returns the list of
    calls: per `fit` call, its first step and the largest padded source batch (sentences
    x positions) among its first PAIRS_CHECKED batches."""
    def install(failures: int, steps_before: int):
        calls = []

        def run_fit(model, data, **kwargs):
            sizes = [int(tf.size(source)) for (source, _), _ in data.take(PAIRS_CHECKED)]
            first_step = int(model.optimizer.iterations.numpy())
            calls.append({"first_step": first_step, "largest_batch": max(sizes)})
            if len(calls) <= failures:
                kwargs["callbacks"] = [_OutOfMemoryAt(first_step + steps_before),
                                       *kwargs["callbacks"]]
            return model.fit(data, **kwargs)

        monkeypatch.setattr(fit, "run_fit", run_fit)
        return calls

    return install


def test_the_budget_is_halved_and_training_goes_on(failing_allocator, train_only_data, tmp_path,
                                                   caplog, gc_frozen):
    calls = failing_allocator(failures=1, steps_before=1)
    options = fit.TrainOptions(data_dir=train_only_data, model_dir=str(tmp_path / "run"),
                               max_steps=3, eval_every=3, **OPTIONS)
    with caplog.at_level(logging.WARNING, logger=fit.__name__), gc_frozen():
        result = fit.train(options)
    assert (result.step, result.tokens_per_batch) == (3, 256)  # tiny's 512, halved
    assert [c["first_step"] for c in calls] == [0, 1]  # goes on from the saved state
    for call, budget in zip(calls, (512, 256)):
        assert budget // 2 < call["largest_batch"] <= budget, calls
    assert [checkpoints.checkpoint_step(p)
            for p in checkpoints.list_checkpoints(tmp_path / "run")] == [1, 3]

    record = batch_budget.read_budget(tmp_path / "run")
    assert record["tokens_per_batch"] == 256
    assert [(e["step"], e["from"], e["to"]) for e in record["lowered"]] == [(1, 512, 256)]
    assert "injected" in record["lowered"][0]["error"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("at step 1" in w and "lowered from 512 to 256" in w for w in warnings), warnings
    run_config = json.loads((tmp_path / "run" / "run_config.json").read_text())
    assert run_config["training"]["tokens_per_batch"] == 256

    # A later resume (here with nothing left to train) keeps the lowered budget.
    with gc_frozen():
        assert fit.train(options).tokens_per_batch == 256


def test_below_the_smallest_budget_it_gives_up_clearly(failing_allocator, train_only_data,
                                                       tmp_path, gc_frozen):
    calls = failing_allocator(failures=10**6, steps_before=0)
    options = fit.TrainOptions(data_dir=train_only_data,
                               model_dir=str(tmp_path / "run"), max_steps=2,
                               training_overrides={"tokens_per_batch": 96}, **OPTIONS)
    with pytest.raises(tf.errors.ResourceExhaustedError) as error, gc_frozen():
        fit.train(options)
    # 96 -> 64 (not 48: tiny's max_length 64 must fit), then nothing lower to try.
    assert len(calls) == 2
    assert "even with tokens_per_batch=64, the smallest that holds 1 sentence(s) of " \
           "max_length 64" in error.value.message
    assert "--training-option max_length=N" in error.value.message
    record = batch_budget.read_budget(tmp_path / "run")
    assert [(e["from"], e["to"]) for e in record["lowered"]] == [(96, 64)]
