"""Bad values on the command line and in configuration files end the command with exit
status 2 and a message naming the flag or the field, before anything is written:
--model-option / --training-option values are read as their fields' types (a "False"
is false, not a true string), and the budgets (--epochs, --max-minutes,
--budget-minutes, --train-minutes) must be positive, 0 meaning "no time limit" only for
--train-minutes."""
import contextlib
import io
import json

import pytest

from transformer_tf.cli import main_job as main_job_cli
from transformer_tf.cli import parse_job as parse_job_cli
from transformer_tf.cli import train as train_cli
from transformer_tf.cli import variations as variations_cli
from transformer_tf.cli.model_flags import parse_overrides
from transformer_tf.config import ConfigError, ConvS2SConfig, ModelConfig, TrainingConfig


def dumped(main, argv) -> dict:
    """The configuration `main(argv + --dump-config)` prints."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*argv, "--dump-config"]) == 0
    return json.loads(out.getvalue())


def refused(main, argv, capsys) -> str:
    """stderr of `main(argv)`, which must stop at the arguments with exit status 2."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2, err
    assert "Traceback" not in err
    return err


# --model-option / --training-option: each value read as its field's type.

def test_option_values_take_their_fields_types():
    settings = dumped(train_cli.main, [
        "--preset", "tiny", "--model-option", "scale_embeddings=False", "source_cursor=yes",
        "key_dim=null", "layer_norm_epsilon=1e-5", "--training-option", "clip_norm=none",
        "learning_rate_scale=2", "seed=7"])
    model, training = settings["model"], settings["training"]
    assert model["scale_embeddings"] is False and model["source_cursor"] is True
    assert model["key_dim"] is None and model["layer_norm_epsilon"] == 1e-5
    assert training["clip_norm"] is None and training["learning_rate_scale"] == 2.0
    assert training["seed"] == 7


@pytest.mark.parametrize("flag, pair, expected", [
    ("--training-option", "learning_rate_scale=abc", "expected a number"),
    ("--training-option", "adam_epsilon=null", "expected a number"),
    ("--training-option", "clip_norm=big", "expected a number or null"),
    ("--training-option", "warmup_steps=1.5", "expected an integer"),
    ("--training-option", "label_smoothing=nan", "expected a finite number"),
    ("--model-option", "layer_norm_epsilon=abc", "expected a number"),
    ("--model-option", "scale_embeddings=maybe", "expected true or false"),
])
def test_a_value_not_of_its_fields_type_is_an_error_naming_it(capsys, flag, pair, expected):
    err = refused(train_cli.main, ["--preset", "tiny", flag, pair, "--dump-config"], capsys)
    assert f"error: {flag} {pair}: {expected}" in err, err


def test_the_conversion_covers_optional_and_tuple_fields():
    assert parse_overrides(["encoder_layers=[[16, 3], [32, 1]]", "decoder_attention=null",
                            "target_vocab_size=100"], ConvS2SConfig, "--model-option") == {
        "encoder_layers": ([16, 3], [32, 1]), "decoder_attention": None,
        "target_vocab_size": 100}
    with pytest.raises(ConfigError, match=r"--model-option encoder_layers=3: expected a JSON "
                                          r"list"):
        parse_overrides(["encoder_layers=3"], ConvS2SConfig, "--model-option")
    assert parse_overrides(["position_encoding=learned", "dropout=0"], ModelConfig) == {
        "position_encoding": "learned", "dropout": 0.0}
    assert parse_overrides(["cooldown_minutes=None"], TrainingConfig) == {
        "cooldown_minutes": None}


def test_a_configuration_file_value_of_the_wrong_type_is_an_error_naming_it(tmp_path, capsys):
    """Files are parsed as YAML or JSON, not by parse_overrides: the configs' own type
    check refuses a string where a number or a bool is declared."""
    for text, expected in (("training:\n  learning_rate_scale: abc\n",
                            "error: learning_rate_scale: expected a number, got 'abc'"),
                           ("model:\n  scale_embeddings: 'False'\n",
                            "error: scale_embeddings: expected true or false, got 'False'")):
        config = tmp_path / "c.yaml"
        config.write_text("preset: tiny\n" + text)
        assert train_cli.main(["--config", str(config), "--dump-config"]) == 2
        err = capsys.readouterr().err
        assert expected in err and "Traceback" not in err, err


# Budgets.

@pytest.mark.parametrize("flag, value", [("--epochs", "-1"), ("--epochs", "0"),
                                         ("--max-minutes", "-5"), ("--max-minutes", "0"),
                                         ("--max-minutes", "inf")])
def test_train_refuses_a_budget_that_is_not_positive(tmp_path, capsys, flag, value):
    run = tmp_path / "run"
    err = refused(train_cli.main, ["--data", str(tmp_path / "data"), "--preset", "tiny",
                                   "--model-dir", str(run), flag, value], capsys)
    assert f"argument {flag}: " in err and value in err, err
    assert not run.exists()


def test_train_takes_a_fraction_of_an_epoch():
    assert dumped(train_cli.main, ["--preset", "tiny", "--epochs", "0.5",
                                   "--max-minutes", "0.1"])["preset"] == "tiny"


@pytest.mark.parametrize("value", ["-3", "0"])
def test_variations_refuses_a_budget_that_is_not_positive(tmp_path, capsys, value):
    out = tmp_path / "study"
    err = refused(variations_cli.main, ["--data", str(tmp_path / "data"), "--out", str(out),
                                        "--budget-minutes", value, "--plan-only"], capsys)
    assert f"argument --budget-minutes: must be a finite number more than 0, got {value}" in err
    assert not out.exists()


@pytest.mark.parametrize("main, needs", [(main_job_cli.main, []),
                                         (parse_job_cli.main, ["--treebank", "unused"])])
def test_the_jobs_refuse_negative_minutes_and_keep_0_as_no_limit(tmp_path, capsys, main,
                                                                 needs):
    work = tmp_path / "work"
    err = refused(main, ["--work-dir", str(work), "--train-minutes", "-5"], capsys)
    assert "argument --train-minutes: must be a finite number, 0 or more, got -5" in err, err
    err = refused(main, ["--work-dir", str(work), "--epochs", "-2"], capsys)
    assert "argument --epochs: must be a finite number more than 0, got -2" in err, err
    assert not work.exists()
    # 0 is documented: no time limit, then --epochs or --max-steps.
    assert dumped(main, ["--work-dir", str(work), "--preset", "tiny", "--train-minutes", "0",
                         "--epochs", "2"])["preset"] == "tiny"
    err = refused(main, ["--work-dir", str(work), "--preset", "tiny", "--train-minutes", "0",
                         *needs], capsys)
    assert "--train-minutes 0 needs --epochs or --max-steps" in err, err
