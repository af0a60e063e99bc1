"""Every bench script that writes --out refuses an existing file up front
(bench/common.py's `refuse_existing_outputs`): the usage error, exit status 2, names the
path, and the file is left as it was.

The benchmarks themselves take minutes to hours, so none is run: the work each script
would start next is replaced by a tripwire, which a script that did not refuse would hit.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
USERS_BYTES = b"a file the user owns\n"

# script -> (its arguments besides --out, the files --out OUT writes, the first work it
# starts after parsing: an attribute of the script, or "module:attribute").
SCRIPTS = {
    "table2": (["runs/a", "runs/b"], [".md", ".json"], "describe_run"),
    "layer_scaling": ([], [".json", ".png"], "_layers"),
    "ct2_exactness": (["--model-dir", "runs/m"], [""], "read_lines"),
    "run_all": (["--quick"], [""], "run_suite"),
    "ensemble_gain": (["runs/a", "runs/b"], [""], "measure"),
    "alignment_error_rate": (["--model-dir", "runs/m"], [""],
                             "transformer_tf.inference.alignment:load_aligner"),
    "fast_path_runs": (["results/raw/run.json"], [""], "serving_runs:load_run"),
    "ctranslate2_runs": (["results/raw/run.json"], [""], "serving_runs:load_run"),
}
# (script, the suffixes of the files that exist already): each derived file alone, and
# both of table2's at once.
CASES = [(name, (suffix,)) for name, (_, suffixes, _) in SCRIPTS.items()
         for suffix in suffixes] + [("table2", (".md", ".json"))]


@pytest.fixture
def bench_script(monkeypatch):
    """Loads bench/NAME.py as a module (bench/ on sys.path, as when run as a script); the
    environment variables the scripts set on import are put back afterwards."""
    saved = dict(os.environ)
    monkeypatch.syspath_prepend(str(BENCH))

    def load(name: str):
        spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, spec.name, module)
        spec.loader.exec_module(module)
        return module

    yield load
    os.environ.clear()
    os.environ.update(saved)


def _tripwire(*args, **kwargs):
    raise AssertionError("the benchmark started: an existing --out was not refused first")


@pytest.mark.parametrize("name,existing", CASES,
                         ids=[f"{n}-{'+'.join(s or 'file' for s in e)}" for n, e in CASES])
def test_an_existing_output_is_refused_before_the_work(name, existing, tmp_path, bench_script,
                                                       monkeypatch, capsys):
    module = bench_script(name)
    arguments, _, work = SCRIPTS[name]
    if ":" in work:
        monkeypatch.setattr(work.replace(":", "."), _tripwire)
    else:
        monkeypatch.setattr(module, work, _tripwire)
    out = tmp_path / "results" / "out"
    out.parent.mkdir()
    paths = [pathlib.Path(f"{out}{suffix}") for suffix in existing]
    for path in paths:
        path.write_bytes(USERS_BYTES)
    with pytest.raises(SystemExit) as stopped:
        module.main([*arguments, "--out", str(out)])
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert "choose another name" in error
    for path in paths:
        assert str(path) in error
        assert path.read_bytes() == USERS_BYTES


def test_nothing_is_refused_when_no_output_exists(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import common
    parser = argparse.ArgumentParser()
    common.refuse_existing_outputs(parser, [None, tmp_path / "new.json", str(tmp_path / "x.md")])
