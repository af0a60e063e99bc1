"""Every command line the README and docs/ show parses with that command's own arguments.

The command lines are read from the fenced code blocks and the inline code spans of the
user's documents: `transformer-tf-*` commands, `python scripts/*.py`, `bench/run_all.py` and
`make main MAIN_ARGS="..."`. Each is given to the command's `main`, whose parser is stopped
right after `parse_args` returns, so nothing runs: a flag that was renamed, a choice that
no longer exists or a value of the wrong type fails here, naming the page and line.
Lines that elide arguments with "..." are skipped (they are not meant to be run as shown).
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import importlib
import importlib.util
import io
import pathlib
import re
import shlex

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "bench" / "README.md",
             *sorted((ROOT / "docs").rglob("*.md"))]
SHELL_SEPARATORS = {"|", "||", "&&", ";", "&"}
# "< in", "> out", "2> log", ">> out", "2>&1": dropped before the line is split.
REDIRECTION = re.compile(r"(?<!\S)\d?(?:>>?|<)(?:&\d|\s*[^\s|;&<>]+)")


@dataclasses.dataclass
class CommandLine:
    where: str          # "docs/serving.md:42"
    program: str        # "transformer-tf-translate", "scripts/train.py", ...
    arguments: list[str]
    complete: bool      # a code block's line: parsed whole; an inline span: its flags exist


def installed_commands() -> dict[str, str]:
    """setup.py's COMMANDS: installed command name -> transformer_tf.cli module name."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "COMMANDS":
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no COMMANDS table")


def shell_snippets(text: str):
    """(line number, text, complete) of each shell command in the fenced blocks
    (continuation lines joined; complete) and of each inline code span (not complete: a
    span in prose may name a command and some of its flags)."""
    in_block, start, pending = False, 0, ""
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_block, pending = not in_block, ""
            continue
        if in_block:
            if not pending:
                start = number
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            yield start, pending + line, True
            pending = ""
        else:
            for span in re.findall(r"`([^`]+)`", line):
                yield number, span, False


def split_commands(snippet: str) -> list[list[str]]:
    """The simple commands of a shell line, each without redirections and leading
    variable assignments; [] where the line is not shell-like."""
    try:
        lexer = shlex.shlex(REDIRECTION.sub(" ", snippet), posix=True, punctuation_chars="|&;")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
    except ValueError:
        return []
    commands, current = [], []
    for token in tokens:
        if token in SHELL_SEPARATORS:
            commands.append(current)
            current = []
        else:
            current.append(token)
    commands.append(current)
    cleaned = []
    for command in commands:
        while command and re.match(r"^[A-Z_][A-Z0-9_]*=", command[0]):
            command = command[1:]
        cleaned.append(command)
    return [c for c in cleaned if c]


def as_command_line(tokens: list[str], where: str, commands: dict[str, str],
                    complete: bool = True):
    """A CommandLine for tokens that run one of ours, else None."""
    if tokens[0] in ("python", "python3") or tokens[0].endswith("/python"):
        tokens = tokens[1:]
    if not tokens:
        return None
    program = tokens[0]
    if program == "make" and tokens[1:2] == ["main"]:
        main_args = [t.split("=", 1)[1] for t in tokens[2:] if t.startswith("MAIN_ARGS=")]
        return CommandLine(where, "make main", shlex.split(main_args[0]) if main_args else [],
                           complete)
    if program in commands or re.fullmatch(r"(scripts/[a-z_]+|bench/run_all)\.py", program):
        return CommandLine(where, program, tokens[1:], complete)
    return None


def documented_command_lines() -> list[CommandLine]:
    commands = installed_commands()
    found = []
    for path in DOCUMENTS:
        for number, snippet, complete in shell_snippets(path.read_text(encoding="utf-8")):
            if "..." in snippet or "…" in snippet:
                continue
            for tokens in split_commands(snippet):
                line = as_command_line(tokens, f"{path.relative_to(ROOT)}:{number}", commands,
                                       complete)
                if line is not None and (line.complete or line.arguments):
                    found.append(line)
    return found


class _Parsed(Exception):
    """Raised in place of running the command once its arguments parsed."""


def main_of(program: str, commands: dict[str, str]):
    if program == "make main":
        module = "transformer_tf.cli.main_job"
    elif program in commands:
        module = f"transformer_tf.cli.{commands[program]}"
    elif program.startswith("scripts/") and importlib.util.find_spec(
            f"transformer_tf.cli.{pathlib.Path(program).stem}"):
        module = f"transformer_tf.cli.{pathlib.Path(program).stem}"
    else:  # bench/run_all.py, scripts of the repository only: loaded from their file
        spec = importlib.util.spec_from_file_location(pathlib.Path(program).stem, ROOT / program)
        script = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(script)
        return script.main
    return importlib.import_module(module).main


def parse_only(main, arguments: list[str]) -> tuple[int | None, str]:
    """(exit status of argparse or None when the arguments parsed, its stderr)."""
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(parser, args=None, namespace=None):
        original(parser, args, namespace)
        raise _Parsed

    return _stopped_in(parse_then_stop, main, arguments)


def unknown_flags(main, arguments: list[str]) -> list[str]:
    """The --flags among `arguments` that the command's parser does not define."""
    seen = []

    def read_then_stop(parser, args=None, namespace=None):
        seen.append(parser)
        raise _Parsed

    _stopped_in(read_then_stop, main, arguments)
    known = seen[0]._option_string_actions
    return [a for a in arguments if a.startswith("--") and a.split("=")[0] not in known]


def _stopped_in(replacement, main, arguments):
    original = argparse.ArgumentParser.parse_args

    errors = io.StringIO()
    argparse.ArgumentParser.parse_args = replacement
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            main(arguments)
    except _Parsed:
        return None, ""
    except SystemExit as stop:
        return stop.code, errors.getvalue()
    finally:
        argparse.ArgumentParser.parse_args = original
    raise AssertionError("the command returned without parsing its arguments")


LINES = documented_command_lines()


def test_the_documents_show_commands_of_every_kind():
    """The reader finds the commands it is meant to check (it can fail: a change in how the
    documents are written that hides them from it)."""
    programs = {line.program for line in LINES}
    assert {"transformer-tf-train", "transformer-tf-translate", "make main",
            "bench/run_all.py"} <= programs, programs
    assert len(LINES) >= 40


@pytest.mark.parametrize("line", LINES, ids=lambda line: f"{line.where} {line.program}")
def test_a_documented_command_line_parses(line):
    main = main_of(line.program, installed_commands())
    if not line.complete:
        assert not unknown_flags(main, line.arguments), (
            f"{line.where}: `{line.program}` has no flag {unknown_flags(main, line.arguments)}")
        return
    status, errors = parse_only(main, line.arguments)
    assert status is None or (status == 0 and "--help" in line.arguments
                              or "--version" in line.arguments), (
        f"{line.where}: `{line.program} {shlex.join(line.arguments)}` does not parse: "
        f"{errors.strip().splitlines()[-1] if errors.strip() else status}")


def test_the_reader_splits_shell_lines_as_a_shell_does():
    commands = installed_commands()
    snippet = ("TRANSFORMER_TF_DATA=../shared/data python scripts/translate.py --model m "
               "< in.txt 2> log > out.txt | transformer-tf-evaluate --ref r --hyp - && "
               "make main MAIN_ARGS='--max-minutes 5 --tgt fr'  # a comment")
    lines = [as_command_line(t, "x", commands) for t in split_commands(snippet)]
    assert [(line.program, line.arguments) for line in lines] == [
        ("scripts/translate.py", ["--model", "m"]),
        ("transformer-tf-evaluate", ["--ref", "r", "--hyp", "-"]),
        ("make main", ["--max-minutes", "5", "--tgt", "fr"])]
    status, errors = parse_only(main_of("transformer-tf-translate", commands),
                                ["--model", "m", "--beam-size", "zero"])
    assert status == 2 and "--beam-size" in errors


def parsed_arguments(main, arguments: list[str]) -> argparse.Namespace | None:
    """The namespace the command's parser makes of `arguments` (nothing runs), or None
    where parsing exits (--help, --version)."""
    parsed = []
    original = argparse.ArgumentParser.parse_args

    def keep_then_stop(parser, args=None, namespace=None):
        parsed.append(original(parser, args, namespace))
        raise _Parsed

    _stopped_in(keep_then_stop, main, arguments)
    return parsed[0] if parsed else None


# The main job's run and exports, as the documents name them: their model is the preset's.
MAIN_JOB_MODEL = re.compile(r"^(runs/multi30k_en_de/model|saved_models/multi30k_en_de/\d+)$")


def test_commands_on_the_main_job_model_name_layers_and_heads_it_has():
    """A layer or head the documents ask of the main job's model exists in the `multi30k`
    preset (a command that parses can still exit at once on a 3-layer, 4-head model)."""
    from transformer_tf.presets import get_preset

    model = get_preset("multi30k").model
    checked = 0
    for line in LINES:
        if not line.complete or line.program not in ("transformer-tf-attention",
                                                     "transformer-tf-translate"):
            continue
        args = parsed_arguments(main_of(line.program, installed_commands()), line.arguments)
        if args is None or not any(MAIN_JOB_MODEL.match(str(getattr(args, name, None) or ""))
                   for name in ("model", "model_dir", "saved_model")):
            continue
        checked += 1
        for layer in (getattr(args, "layer", None), getattr(args, "alignment_layer", None)):
            assert layer is None or layer <= model.num_layers, (
                f"{line.where}: layer {layer} of a {model.num_layers}-layer model")
        for head in getattr(args, "heads", None) or ():
            assert head <= model.num_heads, (
                f"{line.where}: head {head} of a {model.num_heads}-head model")
    assert checked >= 3  # the documents' attention and alignment examples were read
