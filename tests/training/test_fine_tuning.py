"""Fine-tuning (`train --init-from`): a new run starts from another run's checkpoint with a
fresh optimizer, on other data prepared with the source's tokenizer; both families.

Each source run is a run directory with one checkpoint of step 3 holding random weights
(N(0, 0.1)); each fine-tuned run trains one step at a learning rate of ~1e-33, so its
weights after that step are the weights it started from (to far below float32
resolution), while its own random initialisation differs from them by ~0.1.
"""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.cli import train as train_cli
from transformer_tf.config import DecodingConfig, ModelConfig, TrainingConfig
from transformer_tf.presets import get_preset
from transformer_tf.data.corpora import text_file_corpus
from transformer_tf.data.prepared_writer import prepare_corpus
from transformer_tf.data.text_lines import sha256_of_files
from transformer_tf.rundir import checkpoints
from transformer_tf.rundir import model_dir as model_dir_lib
from transformer_tf.training.fit import TrainOptions, build_model_and_optimizer, train

FAMILIES = {"transformer": ("tiny", {"num_layers": 1}, {"learning_rate_scale": 1e-30}),
            "convs2s": ("convs2s_tiny", {}, {"learning_rate": 1e-30})}
SOURCE_STEPS = 3
STEP_KEY = "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"


def write_source_run(directory, preset_name, model_overrides, prepared):
    """A run directory as training writes it, with one checkpoint ckpt-SOURCE_STEPS of
    random weights and an optimizer at step SOURCE_STEPS."""
    preset = get_preset(preset_name)
    run = model_dir_lib.RunConfig(
        model=preset.model.replace(vocab_size=prepared.vocab_size, **model_overrides).resolved(),
        training=preset.training, decoding=preset.decoding, data_dir=str(prepared.directory),
        preset=preset_name, family=preset.family, source_language="en", target_language="de",
        tokenizer_sha256=model_dir_lib.tokenizer_sha256(prepared.bpe_model_path.read_bytes()))
    model_dir_lib.write_run_config(directory, run)
    model_dir_lib.write_tokenizer(directory, prepared.bpe_model_path)
    trainer = build_model_and_optimizer(run.model, run.training, family=run.family)
    rng = np.random.default_rng(0)
    for weight in trainer.network.weights:
        weight.assign(rng.normal(0.0, 0.1, size=weight.shape).astype(np.float32))
    trainer.optimizer.iterations.assign(SOURCE_STEPS)
    checkpoints.make_manager(trainer.network, trainer.optimizer, directory, 5).save(
        checkpoint_number=SOURCE_STEPS)
    return directory


@pytest.fixture(scope="module")
def sources(tiny_multi30k, tmp_path_factory):
    """{family: source run directory}."""
    root = tmp_path_factory.mktemp("sources")
    return {family: write_source_run(root / family, preset, model, tiny_multi30k)
            for family, (preset, model, _) in FAMILIES.items()}


@pytest.fixture(scope="module")
def new_data(tiny_multi30k, sources, tmp_path_factory):
    """Other data (the slice's 40 dev pairs as training text) prepared with the sources'
    tokenizer (`prepare_data --tokenizer`)."""
    valid = tiny_multi30k.files("valid")
    corpus = text_file_corpus("en", "de", train=(valid.source, valid.target), name="domain")
    return prepare_corpus(corpus, tmp_path_factory.mktemp("domain"),
                          tokenizer=sources["transformer"] / "bpe.model").directory


def source_checkpoint(sources, family) -> pathlib.Path:
    return sources[family] / "checkpoints" / f"ckpt-{SOURCE_STEPS}"


def network_weights(family, model_dir, checkpoint) -> dict:
    from transformer_tf.models.registry import build_model

    model = build_model(family, model_dir_lib.read_run_config(model_dir).model)
    checkpoints.load_weights(model, checkpoint)
    return {w.path.split("/", 1)[1]: w.numpy() for w in model.weights}


def optimizer_step(checkpoint) -> int:
    return int(tf.train.load_checkpoint(str(checkpoint)).get_tensor(STEP_KEY))


def expected_record(sources, family) -> dict:
    checkpoint = source_checkpoint(sources, family)
    files = [f"{checkpoint}.index",
             *sorted(map(str, checkpoint.parent.glob(f"{checkpoint.name}.data-*")))]
    return {"model_dir": str(sources[family].resolve()), "checkpoint": str(checkpoint.resolve()),
            "step": SOURCE_STEPS, "checkpoint_sha256": sha256_of_files(files)}


def assert_started_from_the_source(family, sources, tuned_dir, tuned_checkpoint):
    tuned = network_weights(family, tuned_dir, tuned_checkpoint)
    source = network_weights(family, sources[family], source_checkpoint(sources, family))
    assert tuned.keys() == source.keys()
    for name, value in source.items():
        np.testing.assert_allclose(tuned[name], value, rtol=0, atol=1e-20, err_msg=name)
    assert optimizer_step(source_checkpoint(sources, family)) == SOURCE_STEPS
    assert optimizer_step(tuned_checkpoint) == 1  # a fresh optimizer: not SOURCE_STEPS + 1


def test_the_prepared_data_reuses_the_tokenizer(new_data, sources):
    assert (new_data / "bpe.model").read_bytes() == (sources["transformer"] / "bpe.model").read_bytes()


def test_a_convs2s_run_fine_tunes_from_a_checkpoint(sources, new_data, tmp_path, gc_frozen,
                                                    monkeypatch):
    """With a batch that does not fit in memory at the first step, too: the run goes on
    with half the budget from the same starting point (tests/training/test_out_of_memory.py)."""
    from transformer_tf.training import fit

    attempts = []

    def out_of_memory_once(model, *args, **kwargs):
        attempts.append(int(model.optimizer.iterations.numpy()))
        if len(attempts) == 1:
            raise tf.errors.ResourceExhaustedError(None, None, "OOM (injected)")
        return model.fit(*args, **kwargs)

    monkeypatch.setattr(fit, "run_fit", out_of_memory_once)
    preset, model, near_zero_rate = FAMILIES["convs2s"]
    with gc_frozen():
        result = train(TrainOptions(
            data_dir=str(new_data), model_dir=str(tmp_path / "tuned"), preset=preset,
            model_overrides=model, training_overrides=near_zero_rate, max_steps=1, eval_every=1,
            validation_sentences=0, verbose=0,
            init_from=str(source_checkpoint(sources, "convs2s"))))
        assert (result.start_step, result.step) == (0, 1)
        assert_started_from_the_source("convs2s", sources, tmp_path / "tuned",
                                       result.last_checkpoint)
    assert attempts == [0, 0]
    assert result.tokens_per_batch == get_preset(preset).training.tokens_per_batch // 2
    assert result.init_from == expected_record(sources, "convs2s")
    assert model_dir_lib.read_run_config(tmp_path / "tuned").init_from == result.init_from


def test_the_command_line_fine_tunes_from_a_run_directory(sources, new_data, tmp_path, capsys,
                                                          gc_frozen):
    """--init-from MDIR: the run's default checkpoint and preset. Running again without
    --init-from resumes the fine-tuned run, which keeps its record; --init-from into it
    again is refused."""
    tuned = tmp_path / "tuned"
    common = ["--data", str(new_data), "--model-dir", str(tuned), "--model-option",
              "num_layers=1", "--eval-every", "1", "--validation-sentences", "0", "--quiet",
              "--max-steps", "1"]
    with gc_frozen():
        assert train_cli.main([*common, "--init-from", str(sources["transformer"]),
                               "--training-option", "learning_rate_scale=1e-30"]) == 0
        first = json.loads(capsys.readouterr().out)
        assert_started_from_the_source("transformer", sources, tuned, first["last_checkpoint"])
    assert first["init_from"] == expected_record(sources, "transformer")
    assert model_dir_lib.read_run_config(tuned).preset == "tiny"

    assert train_cli.main([*common, "--preset", "tiny"]) == 0  # nothing left to train
    assert json.loads(capsys.readouterr().out)["start_step"] == 1
    assert model_dir_lib.read_run_config(tuned).init_from == first["init_from"]

    assert train_cli.main([*common, "--init-from", str(sources["transformer"])]) == 2
    assert "already has checkpoints: --init-from starts a new run" in capsys.readouterr().err
    assert checkpoints.list_checkpoints(tuned) == [first["last_checkpoint"]]


def test_another_model_field_is_refused_before_anything_is_written(sources, new_data,
                                                                   tmp_path):
    with pytest.raises(model_dir_lib.RunMismatchError, match=r"d_model: the source's 16, "
                                                             r"requested 32") as error:
        train(TrainOptions(data_dir=str(new_data), model_dir=str(tmp_path / "tuned"),
                           preset="tiny", model_overrides={"num_layers": 1, "d_model": 32},
                           max_steps=1, validation_sentences=0, verbose=0,
                           init_from=str(source_checkpoint(sources, "transformer"))))
    assert "num_layers" not in str(error.value)
    assert not (tmp_path / "tuned").exists()  # not even its lock file is left


def test_the_identity_check_names_every_field_and_both_tokenizer_files(tmp_path):
    source = model_dir_lib.RunConfig(
        model=ModelConfig(vocab_size=64, num_layers=1, d_model=16, d_ff=32, num_heads=2),
        training=TrainingConfig(), decoding=DecodingConfig(), data_dir="a", preset="tiny",
        source_language="en", target_language="de", tokenizer_sha256="1" * 64)
    # Another language pair, data and training: allowed.
    same = model_dir_lib.RunConfig(
        model=source.model, training=TrainingConfig(warmup_steps=7), decoding=DecodingConfig(),
        data_dir="b", preset="tiny", source_language="fr", target_language="de",
        tokenizer_sha256="1" * 64)
    model_dir_lib.check_same_model(source, same, tmp_path / "src", "1" * 64, "new/bpe.model")
    other = model_dir_lib.RunConfig(
        model=source.model.replace(num_heads=4, d_ff=64), training=TrainingConfig(),
        decoding=DecodingConfig(), data_dir="b", preset="tiny", tokenizer_sha256="2" * 64)
    with pytest.raises(model_dir_lib.RunMismatchError) as error:
        model_dir_lib.check_same_model(source, other, tmp_path / "src", "1" * 64,
                                       "new/bpe.model")
    message = str(error.value)
    assert "d_ff: the source's 32, requested 64" in message
    assert "num_heads: the source's 2, requested 4" in message
    assert f"{tmp_path / 'src' / 'bpe.model'} (sha256 111111111111...) is not new/bpe.model " \
           "(sha256 222222222222...)" in message
    assert "language" not in message


def test_a_checkpoint_outside_any_run_directory_is_refused(sources, tmp_path):
    from transformer_tf.rundir import init_source

    loose = tmp_path / "loose"
    loose.mkdir()
    for path in (sources["transformer"] / "checkpoints").glob(f"ckpt-{SOURCE_STEPS}.*"):
        (loose / path.name).write_bytes(path.read_bytes())
    with pytest.raises(FileNotFoundError, match="no run directory around this checkpoint"):
        init_source.describe(loose / f"ckpt-{SOURCE_STEPS}")
    with pytest.raises(checkpoints.CheckpointError, match="not found"):
        init_source.describe(pathlib.Path(sources["transformer"]) / "checkpoints" / "ckpt-99")
