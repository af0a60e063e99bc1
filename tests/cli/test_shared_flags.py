"""The flags several commands share are defined once (cli/flags.py): no command module
writes its own --beam-size, --alpha, --max-extra-length, --stopping or --precision, and
each command that takes them parses them to the same values with the same checks."""
import contextlib
import io
import pathlib
import re

import pytest

import transformer_tf.cli as cli_package
from transformer_tf.cli import flags

CLI = pathlib.Path(cli_package.__file__).parent
SHARED = ("--beam-size", "--alpha", "--max-extra-length", "--stopping", "--precision")
TAKES_SEARCH_FLAGS = ("translate", "export", "export_ctranslate2", "main_job", "parse",
                      "parse_job", "attention", "average_checkpoints")


def test_no_command_defines_a_shared_flag_itself():
    own = {path.name: sorted(set(re.findall(r'add_argument\(\s*"(--[a-z-]+)"', path.read_text()))
                             & set(SHARED))
           for path in CLI.glob("*.py") if path.name != "flags.py"}
    assert not {name: found for name, found in own.items() if found}


@pytest.mark.parametrize("module", TAKES_SEARCH_FLAGS)
def test_every_command_checks_the_search_flags_alike(module, capsys):
    import importlib

    main = importlib.import_module(f"transformer_tf.cli.{module}").main
    for bad, flag in (("0", "--beam-size"), ("-1", "--alpha"), ("nan", "--alpha")):
        with pytest.raises(SystemExit) as stop:
            main([flag, bad])
        assert stop.value.code == 2
        assert f"argument {flag}" in capsys.readouterr().err


def test_the_help_names_where_defaults_come_from():
    import argparse

    parser = argparse.ArgumentParser()
    flags.add_search_flags(parser, "the run's", length=True, stopping=True)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        parser.print_help()
    text = " ".join(out.getvalue().split())
    assert "(default: the run's; the paper's 4)" in text
    assert "(default: the run's; the paper's 0.6)" in text
    args = parser.parse_args(["--beam-size", "5", "--alpha", "1.5", "--stopping", "k_finished"])
    assert (args.beam_size, args.alpha, args.stopping, args.max_extra_length) == (
        5, 1.5, "k_finished", None)
