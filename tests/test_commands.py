"""The installed commands (setup.py console entry points) and scripts/*.py run the same
functions, and every command answers --help and --version without loading TensorFlow, under
its own name: the command's when installed, the script's file name when run as a script.

The venv's own install may point at another checkout, so the entry points are read from
this checkout's setup.py (the `setup_metadata` fixture) and each one is loaded with
importlib.metadata and called, as the generated launcher does. Where this checkout is the
installed one, the launchers in the venv's bin/ are run too.
"""
import importlib.metadata
import pathlib
import runpy
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
EXPECTED = {"transformer-tf-prepare", "transformer-tf-train", "transformer-tf-average",
            "transformer-tf-export", "transformer-tf-export-ctranslate2",
            "transformer-tf-translate", "transformer-tf-score", "transformer-tf-evaluate",
            "transformer-tf-main", "transformer-tf-variations", "transformer-tf-attention",
            "transformer-tf-parse-job", "transformer-tf-parse", "transformer-tf-evalb"}
# Calls each entry point as its launcher does (sys.argv[0] the command), then each script as
# `python scripts/NAME.py` does, with --help and with --version; the last stdout line is one
# JSON object.
CALL_EACH = r"""
import contextlib, importlib.metadata, io, json, pathlib, runpy, sys
dist = importlib.metadata.PathDistribution.at(sys.argv[1])
scripts = pathlib.Path(sys.argv[2])

def answer(call, argv0, flag):
    out = io.StringIO()
    sys.argv = [argv0, flag]
    with contextlib.redirect_stdout(out):
        try:
            call()
            code = None
        except SystemExit as stop:
            code = stop.code
    return {"code": code, "out": out.getvalue()}

report = {"commands": {}, "scripts": {}}
for ep in dist.entry_points.select(group="console_scripts"):
    main = ep.load()
    module = ep.value.split(":")[1]  # transformer_tf.cli.launch:<module>
    script = str(scripts / f"{module}.py")
    for flag in ("--help", "--version"):
        report["commands"][f"{ep.name} {flag}"] = answer(lambda: main(), ep.name, flag)
        report["scripts"][f"{module}.py {flag}"] = answer(
            lambda: runpy.run_path(script, run_name="__main__"), script, flag)
report["heavy"] = sorted({"tensorflow", "keras"} & set(sys.modules))
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def entry_points(setup_metadata):
    return setup_metadata, importlib.metadata.PathDistribution(setup_metadata).entry_points.select(
        group="console_scripts")


def test_every_command_is_declared(entry_points):
    _, points = entry_points
    assert {ep.name for ep in points} == EXPECTED


def test_scripts_run_the_same_functions(entry_points):
    _, points = entry_points
    for ep in points:
        module = ep.value.split(":")[1]  # transformer_tf.cli.launch:<module>
        wrapper = runpy.run_path(str(REPO / "scripts" / f"{module}.py"), run_name="wrapper")
        assert wrapper["main"] is ep.load().main, ep.name


def test_every_command_answers_help_and_version_without_tensorflow(entry_points):
    import json

    import transformer_tf

    info, _ = entry_points
    # setup.py reads the version from transformer_tf.__version__: one source.
    assert importlib.metadata.PathDistribution(info).version == transformer_tf.__version__
    done = subprocess.run([sys.executable, "-c", CALL_EACH, str(info), str(REPO / "scripts")],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["heavy"] == []
    assert {key.split()[0] for key in report["commands"]} == EXPECTED
    package = REPO / "transformer_tf"
    for kind in ("commands", "scripts"):  # prog: "transformer-tf-evaluate", "evaluate.py"
        for key, result in report[kind].items():
            prog, flag = key.split()
            assert result["code"] == 0, key
            if flag == "--help":
                assert result["out"].startswith(f"usage: {prog} "), (key, result["out"][:80])
                assert "--verbose" in result["out"] and "--version" in result["out"], key
            else:
                assert result["out"].startswith(
                    f"{prog} {transformer_tf.__version__} from {package} (tensorflow "), key
                assert result["out"].count("\n") == 1, key


def test_installed_launchers_in_the_venv():
    try:
        installed = importlib.metadata.distribution("transformer_tf")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("transformer_tf is not installed in this environment")
    names = {ep.name for ep in installed.entry_points.select(group="console_scripts")}
    if not EXPECTED <= names:
        pytest.skip("the installed transformer_tf predates the commands: pip install -e .")
    bin_dir = pathlib.Path(sys.executable).parent
    for name in sorted(EXPECTED):
        launcher = bin_dir / name
        assert launcher.exists(), launcher
    done = subprocess.run([str(bin_dir / "transformer-tf-evaluate"), "--help"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("usage:")
