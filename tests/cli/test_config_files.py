"""Configuration files (`--config FILE ...`, `--dump-config`; cli/config_files.py): a run's
run_config.json given back as --config resolves to the same run, files merge in order
with the command line last, and a bad file is an error naming it."""
import contextlib
import io
import json
import re

import pytest

from transformer_tf.cli import parse_job as parse_job_cli
from transformer_tf.cli import train as train_cli
from transformer_tf.cli.config_files import merge_config_files
from transformer_tf.config import ConfigError
from transformer_tf.presets.parsing import DEFAULT_PARSING_PRESET
from transformer_tf.rundir.model_dir import RunConfig
from transformer_tf.training.fit import TrainOptions, _run_config


def dumped(argv) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert train_cli.main([*argv, "--dump-config"]) == 0
    return json.loads(out.getvalue())


def train_options(data_dir, settings: dict) -> TrainOptions:
    """The TrainOptions a --config of `settings` (a dump) gives `train`."""
    return TrainOptions(data_dir=str(data_dir), model_dir="unused", preset=settings["preset"],
                        model_overrides=settings["model"],
                        training_overrides=settings["training"],
                        decoding_overrides=settings["decoding"])


def test_run_config_given_back_is_the_same_run(tiny_multi30k, tmp_path):
    data = str(tiny_multi30k.directory)
    first = _run_config(TrainOptions(
        data_dir=data, model_dir="unused", preset="tiny",
        model_overrides={"d_model": 24, "num_heads": 4},
        training_overrides={"warmup_steps": 50, "label_smoothing": 0.2},
        decoding_overrides={"beam_size": 3}), tiny_multi30k, "float32")
    recorded = tmp_path / "run_config.json"
    recorded.write_text(first.to_json())

    # --data comes from the file's data_dir; the resolved settings are the recorded ones.
    settings = dumped(["--config", str(recorded)])
    raw = json.loads(first.to_json())
    for key in ("preset", "family", "model", "training", "decoding", "data_dir"):
        assert settings[key] == raw[key], key
    again = _run_config(train_options(settings["data_dir"], settings), tiny_multi30k,
                        "float32")
    assert again.to_json() == first.to_json()


def test_files_merge_in_order_and_the_command_line_wins(tiny_multi30k, tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text("preset: tiny\nmodel:\n  d_model: 24\n  num_heads: 4\n"
                    "training:\n  warmup_steps: 50\n  seed: 3\n")
    later = tmp_path / "later.json"
    later.write_text(json.dumps({"training": {"warmup_steps": 70}, "decoding": {"alpha": 1.0}}))
    settings = dumped(["--data", str(tiny_multi30k.directory), "--config", str(base),
                       str(later), "--training-option", "seed=9", "--warmup-steps", "80"])
    assert settings["preset"] == "tiny" and settings["model"]["d_model"] == 24
    assert settings["model"]["vocab_size"] == tiny_multi30k.vocab_size  # the data's
    # later.json over base.yaml; --training-option and --warmup-steps over both: the dump
    # shows what the run would train with.
    assert settings["training"]["warmup_steps"] == 80 and settings["training"]["seed"] == 9
    assert settings["decoding"]["alpha"] == 1.0
    # Without data, no vocabulary size is claimed.
    assert "vocab_size" not in dumped(["--config", str(base)])["model"]


def test_an_option_flag_takes_several_fields_and_repeats():
    settings = dumped(["--preset", "tiny", "--model-option", "d_model=24", "num_heads=4",
                       "--training-option", "seed=9", "warmup_steps=70",
                       "--model-option", "d_ff=40"])
    assert (settings["model"]["d_model"], settings["model"]["num_heads"],
            settings["model"]["d_ff"]) == (24, 4, 40)
    assert (settings["training"]["seed"], settings["training"]["warmup_steps"]) == (9, 70)
    # A field of the other config after a flag is still named as not being one of its.
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()) as err:
        train_cli.main(["--preset", "tiny", "--model-option", "d_model=24", "seed=9",
                        "--dump-config"])
    assert "--model-option" in err.getvalue() and "seed" in err.getvalue()


@pytest.mark.parametrize("text, name, message", [
    ("preset: tiny\nmodel:\n  d_modle: 24\n", "a.yaml", r"a\.yaml: model\.d_modle is not a field"),
    ('{"trainig": {}}', "a.json", r"a\.json: unknown key\(s\) \['trainig'\]"),
    ('{"training": {"seed": 1,}}', "a.json", r"a\.json: not valid JSON"),
    ("- a list\n", "a.yml", r"a\.yml: expected a mapping"),
    ('{"training": [1, 2]}', "a.json", r"a\.json: 'training' must be a mapping"),
])
def test_a_bad_file_is_an_error_naming_it(tmp_path, capsys, text, name, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(SystemExit) as stop:
        train_cli.main(["--data", "unused", "--model-dir", "unused", "--config", str(path)])
    assert stop.value.code == 2
    assert re.search(message, capsys.readouterr().err)


def test_a_missing_file_and_a_vocabulary_size_that_is_not_the_datas(tiny_multi30k, tmp_path):
    with pytest.raises(ConfigError, match="missing.json: cannot read it"):
        merge_config_files([tmp_path / "missing.json"])
    with pytest.raises(ConfigError, match="vocab_size 123 differs from the prepared data's"):
        _run_config(TrainOptions(data_dir=str(tiny_multi30k.directory), model_dir="unused",
                                 preset="tiny", model_overrides={"vocab_size": 123}),
                    tiny_multi30k, "float32")


def test_the_recorded_run_config_reads_as_a_run_config(tiny_multi30k):
    """The dump's layout is run_config.json's: RunConfig reads a dump with data_dir back."""
    settings = dumped(["--data", str(tiny_multi30k.directory), "--preset", "tiny"])
    run = RunConfig.from_json(json.dumps(settings))
    assert run.preset == "tiny" and run.model.vocab_size == tiny_multi30k.vocab_size


def test_the_parsing_job_takes_its_run_config_back(tiny_multi30k, tmp_path, monkeypatch):
    """parse-job --config WORK/model/run_config.json resolves to the recorded settings, the
    job is given them, and the training options built from them record the same run."""
    first = _run_config(TrainOptions(
        data_dir=str(tiny_multi30k.directory), model_dir="unused", preset="tiny",
        model_overrides={"d_model": 24, "num_heads": 4},
        training_overrides={"warmup_steps": 50}, decoding_overrides={"beam_size": 3}),
        tiny_multi30k, "float32")
    work = tmp_path / "work"
    work.mkdir()
    (work / "data").symlink_to(tiny_multi30k.directory)  # the job's prepared data
    recorded = tmp_path / "run_config.json"
    recorded.write_text(first.to_json())

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert parse_job_cli.main(["--work-dir", str(work), "--config", str(recorded),
                                   "--dump-config"]) == 0
    settings, raw = json.loads(out.getvalue()), json.loads(first.to_json())
    for key in ("preset", "family", "model", "training", "decoding"):
        assert settings[key] == raw[key], key
    again = _run_config(train_options(tiny_multi30k.directory, settings), tiny_multi30k,
                        "float32")
    assert again.to_json() == first.to_json()

    # Without --dump-config the job gets the same settings (stopped before it starts).
    from transformer_tf.data.treebank_reader import TreebankError
    from transformer_tf.jobs import parse_job

    given = []

    def record(options):
        given.append(options)
        raise TreebankError("stopped by the test")

    monkeypatch.setattr(parse_job, "run_parse_job", record)
    assert parse_job_cli.main(["--work-dir", str(work), "--config", str(recorded),
                               "--treebank", str(tmp_path), "--quiet"]) == 2
    (options,) = given
    assert options.preset == raw["preset"]
    for section in ("model", "training", "decoding"):  # the file's sections, whole
        assert getattr(options, f"{section}_overrides") == raw[section], section


def test_the_parsing_job_has_its_own_default_preset_and_the_command_line_wins(tmp_path):
    def dump(argv):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert parse_job_cli.main(["--work-dir", str(tmp_path), *argv,
                                       "--dump-config"]) == 0
        return json.loads(out.getvalue())

    assert dump([])["preset"] == DEFAULT_PARSING_PRESET
    config = tmp_path / "c.yaml"
    config.write_text("preset: tiny\ntraining:\n  warmup_steps: 50\n")
    settings = dump(["--config", str(config), "--training-option", "warmup_steps=60"])
    assert (settings["preset"], settings["training"]["warmup_steps"]) == ("tiny", 60)
    assert settings["model"]["vocab_size"] == 4000  # --vocab-size's: nothing prepared yet
