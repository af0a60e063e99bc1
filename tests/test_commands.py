"""The installed commands (setup.py console entry points) and scripts/*.py run the same
functions, and every command answers --help without loading TensorFlow.

The venv's own install may point at another checkout, so the entry points are read from
this checkout's setup.py (`setup.py egg_info` into a temporary directory, the metadata pip
installs) and each one is loaded with importlib.metadata and called, as the generated
launcher does. Where this checkout is the installed one, the launchers in the venv's bin/
are run too.
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
CALL_HELP = r"""
import contextlib, importlib.metadata, io, json, sys
dist = importlib.metadata.PathDistribution.at(sys.argv[1])
report = {}
for ep in dist.entry_points.select(group="console_scripts"):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            ep.load()(["--help"])
            code = None
        except SystemExit as stop:
            code = stop.code
    report[ep.name] = {"code": code, "help": out.getvalue()}
report["heavy"] = sorted({"tensorflow", "keras"} & set(sys.modules))
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def entry_points(tmp_path_factory):
    base = tmp_path_factory.mktemp("egg")
    subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(base)],
                   cwd=REPO, check=True, capture_output=True, timeout=120)
    info = base / "transformer_tf.egg-info"
    return info, importlib.metadata.PathDistribution(info).entry_points.select(
        group="console_scripts")


def test_every_command_is_declared(entry_points):
    _, points = entry_points
    assert {ep.name for ep in points} == EXPECTED


def test_scripts_run_the_same_functions(entry_points):
    _, points = entry_points
    for ep in points:
        module = ep.value.split(":")[0].rsplit(".", 1)[1]
        wrapper = runpy.run_path(str(REPO / "scripts" / f"{module}.py"), run_name="wrapper")
        assert wrapper["main"] is ep.load(), ep.name


def test_every_command_answers_help_without_tensorflow(entry_points):
    import json

    info, _ = entry_points
    done = subprocess.run([sys.executable, "-c", CALL_HELP, str(info)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report.pop("heavy") == []
    assert set(report) == EXPECTED
    for name, result in report.items():
        assert result["code"] == 0, name
        assert result["help"].startswith("usage:") and "--verbose" in result["help"], name


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
