"""Every installed command over a table of bad invocations: each ends with exit status 2 and
one `error:` line naming the file or flag, never a traceback (cli/errors.py), and writes
nothing into the run it was pointed at.

The commands run in this process (`transformer_tf.cli.<module>.main`, what the installed
launcher calls), so TensorFlow loads once; two run through their launchers in a process of
their own, as a user's shell runs them.
"""
from __future__ import annotations

import hashlib
import importlib
import io
import os
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
COMMAND_MODULES = {  # installed command -> transformer_tf.cli module (setup.py)
    "transformer-tf-prepare": "prepare_data", "transformer-tf-train": "train",
    "transformer-tf-average": "average_checkpoints", "transformer-tf-export": "export",
    "transformer-tf-export-ctranslate2": "export_ctranslate2",
    "transformer-tf-translate": "translate", "transformer-tf-score": "score",
    "transformer-tf-evaluate": "evaluate",
    "transformer-tf-main": "main_job", "transformer-tf-variations": "variations",
    "transformer-tf-attention": "attention", "transformer-tf-parse-job": "parse_job",
    "transformer-tf-parse": "parse", "transformer-tf-evalb": "evalb",
}
@pytest.fixture(scope="module")
def places(tiny_multi30k, tmp_path_factory, write_checkpointed_run, lock_held_elsewhere):
    """Paths the table refers to: a real data directory, a run whose every checkpoint is
    damaged, a run held by another process, a hypothesis file, missing paths."""
    from transformer_tf.presets import get_preset

    root = tmp_path_factory.mktemp("bad_invocations")
    model = get_preset("tiny").model.replace(vocab_size=tiny_multi30k.vocab_size).resolved()
    damaged = write_checkpointed_run(root / "damaged_run", model, [1, 2], 2)
    for data in damaged.glob("checkpoints/ckpt-*.data-*"):
        data.write_bytes(b"")
    held_work = root / "held_work"
    write_checkpointed_run(held_work / "model", model, [1], 1)
    hyp = root / "hyp.txt"
    hyp.write_text("a\nb\n")
    existing_export = root / "saved" / "held_work" / "1"
    existing_export.mkdir(parents=True)
    (existing_export / "saved_model.pb").write_bytes(b"")
    with lock_held_elsewhere(held_work / "model"):
        yield {"DATA": str(tiny_multi30k.directory), "DAMAGED": str(damaged),
               "HELD_WORK": str(held_work), "HELD": str(held_work / "model"), "HYP": str(hyp),
               "MISSING": str(root / "missing"), "SAVED": str(root / "saved"),
               "FILE": str(hyp)}


# (command, arguments, what the error line must name); {NAME} from `places`.
TABLE = [
    ("transformer-tf-prepare", ["--dataset", "nope", "--out", "{MISSING}/p"], "nope"),
    ("transformer-tf-prepare", ["--vocab-size", "0", "--out", "{MISSING}/p"], "--vocab-size"),
    ("transformer-tf-prepare", ["--dataset", "files", "--src", "en", "--tgt", "de",
                                "--train-src", "{HYP}", "--train-tgt", "{HYP}", "--tokenizer",
                                "{MISSING}", "--out", "{MISSING}/p"], "{MISSING}"),
    ("transformer-tf-train", ["--data", "{MISSING}", "--model-dir", "{MISSING}/m",
                              "--preset", "tiny", "--max-steps", "1"], "{MISSING}"),
    ("transformer-tf-train", ["--data", "{DATA}", "--model-dir", "{MISSING}/m", "--preset",
                              "tiny", "--max-steps", "1", "--strategy", "multiworker"],
     "TF_CONFIG"),
    ("transformer-tf-train", ["--data", "{DATA}", "--model-dir", "{HELD}", "--preset", "tiny",
                              "--max-steps", "2"], "in use by another run"),
    ("transformer-tf-train", ["--data", "{DATA}", "--model-dir", "{DAMAGED}", "--preset",
                              "tiny", "--max-steps", "5"], "nothing was restored"),
    ("transformer-tf-train", ["--data", "{DATA}", "--model-dir", "{MISSING}/m", "--preset",
                              "tiny", "--max-steps", "0"], "--max-steps"),
    ("transformer-tf-train", ["--data", "{DATA}", "--model-dir", "{MISSING}/m", "--init-from",
                              "{MISSING}", "--max-steps", "1"], "{MISSING}"),
    ("transformer-tf-train", ["--data", "{DATA}", "--model-dir", "{MISSING}/m", "--init-from",
                              "{DAMAGED}", "--max-steps", "1"], "damaged"),
    ("transformer-tf-average", ["--model-dir", "{MISSING}", "--last", "2"], "{MISSING}"),
    ("transformer-tf-average", ["--model-dir", "{HELD}", "--last", "1"],
     "in use by another run"),
    ("transformer-tf-average", ["--model-dir", "{DAMAGED}", "--last", "2"], "damaged"),
    ("transformer-tf-average", ["--model-dir", "{DAMAGED}", "--last", "0"], "--last"),
    ("transformer-tf-export", ["--model-dir", "{MISSING}", "--out", "{SAVED}/x/1"],
     "{MISSING}"),
    ("transformer-tf-export", ["--model-dir", "{DAMAGED}", "--out", "{SAVED}/x/1"], "damaged"),
    ("transformer-tf-export-ctranslate2", ["--model-dir", "{MISSING}", "--out", "{SAVED}/c/1"],
     "{MISSING}"),
    ("transformer-tf-translate", ["--model-dir", "{DAMAGED}", "--batch-size", "0"],
     "--batch-size"),
    ("transformer-tf-translate", ["--model-dir", "{DAMAGED}", "--batch-size", "-1"],
     "--batch-size"),
    ("transformer-tf-translate", ["--model", "{MISSING}"], "{MISSING}"),
    ("transformer-tf-translate", ["--model-dir", "{DAMAGED}"], "damaged"),
    ("transformer-tf-score", ["--model-dir", "{DAMAGED}"], "<stdin>: line 1"),
    ("transformer-tf-score", ["--model-dir", "{DAMAGED}", "--src", "{HYP}", "--tgt",
                              "{MISSING}"], "{MISSING}"),
    ("transformer-tf-translate", ["--model-dir", "{DAMAGED}", "--resume"], "--resume"),
    ("transformer-tf-translate", ["--model-dir", "{DAMAGED}", "--src", "{MISSING}",
                                  "--output", "{HYP}"], "{HYP}: already exists"),
    ("transformer-tf-translate", ["--model-dir", "{DAMAGED}", "--src", "{HYP}",
                                  "--output", "{HYP}", "--resume"], "is the input file"),
    ("transformer-tf-evaluate", ["--hyp", "{MISSING}", "--ref", "{HYP}"], "{MISSING}"),
    ("transformer-tf-main", ["--work-dir", "{HELD_WORK}", "--preset", "tiny", "--max-steps",
                             "1", "--train-minutes", "0", "--saved-models-dir", "{MISSING}"],
     "in use by another run"),
    ("transformer-tf-main", ["--work-dir", "{HELD_WORK}", "--preset", "tiny", "--max-steps",
                             "1", "--train-minutes", "0", "--saved-models-dir", "{SAVED}",
                             "--export-version", "1"], "an export is already there"),
    ("transformer-tf-variations", ["--data", "{MISSING}", "--out", "{MISSING}/v",
                                   "--max-steps", "1"], "{MISSING}"),
    ("transformer-tf-attention", ["--model", "{MISSING}", "--out", "{MISSING}/a",
                                  "--text", "a"], "{MISSING}"),
    ("transformer-tf-parse-job", ["--treebank", "{MISSING}", "--work-dir", "{MISSING}/w",
                                  "--max-steps", "1"], "{MISSING}"),
    ("transformer-tf-parse", ["--model", "{MISSING}"], "{MISSING}"),
    ("transformer-tf-evalb", ["{MISSING}", "{HYP}"], "{MISSING}"),
    ("transformer-tf-evalb", ["{HYP}", "{HYP}", "--against", "{HYP}", "--samples", "0"],
     "--samples"),
]


def error_lines(stderr: str) -> list[str]:
    """Our `error: ...` lines and argparse's `PROG: error: ...` ones."""
    return [line for line in stderr.splitlines()
            if line.startswith("error:") or re.match(r"^\S+: error: ", line)]


def fill(text: str, places: dict) -> str:
    for name, value in places.items():
        text = text.replace("{" + name + "}", value)
    return text


def snapshot(directory) -> dict:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(pathlib.Path(directory).rglob("*"))
            if p.is_file() and "lock" not in p.name}


def test_the_table_covers_every_installed_command():
    assert {command for command, _, _ in TABLE} == set(COMMAND_MODULES)


@pytest.mark.parametrize("command, arguments, named", TABLE,
                         ids=[f"{c[15:]}-{i}" for i, (c, _, _) in enumerate(TABLE)])
def test_a_bad_invocation_is_one_error_line(places, command, arguments, named, capsys,
                                            monkeypatch, gc_frozen):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.setenv("TRANSFORMER_TF_DATA", places["MISSING"])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"A man .\n")))
    arguments = [fill(a, places) for a in arguments]
    before = {name: snapshot(places[name]) for name in ("DAMAGED", "HELD")}
    main = importlib.import_module(f"transformer_tf.cli.{COMMAND_MODULES[command]}").main
    with gc_frozen():
        try:
            status = main(arguments)
        except SystemExit as stop:  # argparse's own errors
            status = stop.code
    out, err = capsys.readouterr()
    assert status == 2, (out, err)
    errors = error_lines(err)
    assert len(errors) == 1, err
    assert fill(named, places) in errors[0]
    assert "Traceback" not in err + out
    assert {name: snapshot(places[name]) for name in ("DAMAGED", "HELD")} == before


@pytest.mark.parametrize("command, arguments", [
    ("transformer-tf-translate", ["--model", "{MISSING}", "--batch-size", "0"]),
    ("transformer-tf-train", ["--data", "{MISSING}", "--model-dir", "{MISSING}/m",
                              "--preset", "tiny", "--max-steps", "1"]),
])
def test_the_installed_launcher_reports_the_same(places, command, arguments):
    launcher = pathlib.Path(sys.executable).parent / command
    if not launcher.exists():
        pytest.skip(f"{launcher} not installed")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for variable in ("TF_CONFIG", "TF_CPP_MIN_LOG_LEVEL"):  # a user's plain shell
        env.pop(variable, None)
    result = subprocess.run([str(launcher)] + [fill(a, places) for a in arguments],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert len(error_lines(result.stderr)) == 1, result.stderr
