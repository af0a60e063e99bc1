"""The flags several commands share are defined once (cli/flags.py): no command module
writes its own --beam-size, --alpha, --max-extra-length, --stopping or --precision, no flag
string is defined by two modules, and each command that takes the search flags parses them
to the same values with the same checks."""
import argparse
import collections
import contextlib
import io
import pathlib
import re

import pytest

import transformer_tf.cli as cli_package
from transformer_tf.cli import flags

CLI = pathlib.Path(cli_package.__file__).parent
SCRIPTS = CLI.parents[1] / "scripts"
SHARED = ("--beam-size", "--alpha", "--max-extra-length", "--stopping", "--precision")
TAKES_SEARCH_FLAGS = ("translate", "export", "export_ctranslate2", "main_job", "parse",
                      "parse_job", "attention", "average_checkpoints")
# Flag strings two modules may define, each because the meanings truly differ:
ALLOWED_TWICE = {
    # flags.py (recipe_study): the results file a study rewrites; scripts/render_results.py
    # (a maintenance script of this checkout, not a command): the results/ directory it
    # renders the documents' tables from.
    "--results": {"flags.py", "render_results.py"},
    # variations.py: comma-separated groups of Table 3 rows (A,B,...); parse_ablation.py:
    # the ablation's row keys, space-separated.
    "--rows": {"variations.py", "parse_ablation.py"},
}


def _definitions(text: str) -> set:
    return set(re.findall(r'add_argument\(\s*"(--[a-z0-9-]+)"', text))


def modules_defining_each_flag(paths) -> dict:
    """flag string -> the names of the modules whose own add_argument calls define it."""
    found = collections.defaultdict(set)
    for path in paths:
        for flag in _definitions(path.read_text()):
            found[flag].add(path.name)
    return found


def test_no_command_defines_a_shared_flag_itself():
    own = {path.name: sorted(_definitions(path.read_text()) & set(SHARED))
           for path in CLI.glob("*.py") if path.name != "flags.py"}
    assert not {name: found for name, found in own.items() if found}


def test_no_flag_is_defined_by_two_modules():
    found = modules_defining_each_flag([*CLI.glob("*.py"), *SCRIPTS.glob("*.py")])
    for shared in flags.SHARED.values():  # added by flags.add_flag, defined in flags.py
        found[shared.flag].add("flags.py")
    twice = {flag: sorted(modules) for flag, modules in found.items()
             if len(modules) > 1 and modules != ALLOWED_TWICE.get(flag)}
    assert not twice, f"define these once, in cli/flags.py: {twice}"
    # Every exception is still needed (an empty one would hide a new copy).
    assert all(found[flag] == modules for flag, modules in ALLOWED_TWICE.items())


def test_the_check_finds_a_copied_flag(tmp_path):
    (tmp_path / "one.py").write_text('parser.add_argument("--out", help="a")\n')
    (tmp_path / "two.py").write_text('group.add_argument(\n    "--out", required=True)\n')
    (tmp_path / "three.py").write_text('add_flag(parser, "out")\n')
    assert modules_defining_each_flag(tmp_path.glob("*.py")) == {"--out": {"one.py", "two.py"}}


def test_a_shared_flag_keeps_its_form_and_takes_the_commands_help():
    parser = argparse.ArgumentParser()
    flags.add_flag(parser, "eval_every", default=200, help="steps between dev evaluations")
    flags.add_flag(parser, "ensemble")
    flags.add_flag(parser, "source_file", help="the sentences to read")
    action = {a.dest: a for a in parser._actions}
    assert (action["eval_every"].default, action["eval_every"].help) == (
        200, "steps between dev evaluations")
    assert action["ensemble"].help == flags.SHARED["ensemble"].help
    assert parser.parse_args(["--eval-every", "7", "--ensemble", "a", "b"]).ensemble == ["a", "b"]
    with pytest.raises(SystemExit):
        parser.parse_args(["--eval-every", "0"])  # positive_int, whatever the command
    with pytest.raises(ValueError, match="--out"):
        flags.add_flag(parser, "out")  # no help that holds for every command: give one


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
