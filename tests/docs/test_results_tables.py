"""The result tables of README.md, bench/README.md and docs/ are what results/*.json render
to, and the renderer (`transformer_tf.evaluation.results_tables`) works as documented."""
import json
import pathlib
import subprocess
import sys

import pytest

from transformer_tf.evaluation import results_tables as rt
from transformer_tf.runtime.provenance import WHERE_KEYS

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"


def test_every_table_in_the_docs_matches_its_rendering():
    documents = rt.default_documents(ROOT)
    outcomes = rt.process(documents, RESULTS, write=False)
    stale = [str(outcome.path.relative_to(ROOT)) for outcome in outcomes if outcome.stale]
    assert not stale, f"run `python scripts/render_results.py`: stale tables in {stale}"
    assert sum(outcome.tables for outcome in outcomes) >= 1


@pytest.mark.parametrize("path", sorted(p for p in RESULTS.rglob("*.json")
                                        if "raw" not in p.relative_to(RESULTS).parts),
                         ids=lambda p: str(p.relative_to(RESULTS)))
def test_every_results_file_has_its_provenance(path):
    name = str(path.relative_to(RESULTS).with_suffix(""))
    data = rt.load(RESULTS, name)
    assert len(data["commit"]) >= 7 and all(c in "0123456789abcdef" for c in data["commit"])
    assert data["date"][:4].isdigit() and data["date"][4] == "-"
    rt.headline(data)                       # every key it names is a value
    if "rows" in data:
        keys = {column["key"] for column in data["columns"]}
        known = keys | {"key"} | set(WHERE_KEYS)  # where a row ran: in the conditions
        assert all(set(row) <= known for row in data["rows"]), "a row has unknown keys"


def _write(tmp_path, name, **fields):
    data = {"what": "a thing", "command": "make it", "commit": "abc1234",
            "commit_role": "measured", "machine": "a CPU", "date": "2026-01-01",
            "values": {"x": 1.5, "n": 1234}, "units": {"x": "s"},
            "headline": "x = {x}", **fields}
    path = tmp_path / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_markers_are_rendered_and_check_sees_a_stale_table(tmp_path):
    _write(tmp_path, "exp/one", columns=[{"key": "a", "label": "A", "format": "{:.1f}"}],
           rows=[{"a": 2.0}, {"a": None}])
    doc = tmp_path / "doc.md"
    doc.write_text("intro\n<!-- results:table exp/one -->\nold\n<!-- /results -->\n"
                   "<!-- results:summary exp/one -->\n<!-- /results -->\nend\n")
    [outcome] = rt.process([doc], tmp_path, write=True)
    assert outcome.stale and outcome.tables == 2
    text = doc.read_text()
    assert "old" not in text and "| 2.0 |" in text and "| x = 1.5 |" in text
    assert text.startswith("intro\n") and text.endswith("end\n")
    assert not rt.process([doc], tmp_path, write=False)[0].stale      # idempotent
    doc.write_text(text.replace("| 2.0 |", "| 2.1 |"))
    assert rt.process([doc], tmp_path, write=False)[0].stale


def test_values_render_with_units_and_thousands(tmp_path):
    _write(tmp_path, "v")
    out = rt.render_document("<!-- results:values v -->\n<!-- /results -->\n", tmp_path)
    assert "| `x` | 1.5 | s |" in out and "| `n` | 1,234 |  |" in out
    assert "Commit `abc1234`, 2026-01-01." in out


def test_sentences_are_rendered_from_the_values(tmp_path):
    _write(tmp_path, "s", sentences=["x is {x:.2f} s,", "n is {n:,}."])
    out = rt.render_document("<!-- results:sentences s -->\n<!-- /results -->\n", tmp_path)
    assert "x is 1.50 s, n is 1,234. (Data: `results/s.json`.)" in out
    _write(tmp_path, "bad", sentences=["{missing}"])
    with pytest.raises(rt.ResultsError, match="missing"):
        rt.render_document("<!-- results:sentences bad -->\n<!-- /results -->\n", tmp_path)
    with pytest.raises(rt.ResultsError, match="no sentences"):
        rt.render_document("<!-- results:sentences v -->\n<!-- /results -->\n",
                           _write(tmp_path, "v") or tmp_path)


def test_a_recorded_commit_is_said_to_be_one(tmp_path):
    _write(tmp_path, "r", commit_role="recorded")
    assert "recorded in `abc1234`" in rt.render_document(
        "<!-- results:summary r -->\n<!-- /results -->\n", tmp_path)


@pytest.mark.parametrize("marker, message", [
    ("<!-- results:table nowhere -->", "no results file"),
    ("<!-- results:chart v -->", "unknown results kind"),
    ("<!-- results:table v v -->", "one file"),
])
def test_bad_markers_are_named(tmp_path, marker, message):
    _write(tmp_path, "v")
    with pytest.raises(rt.ResultsError, match=message):
        rt.render_document(f"{marker}\n<!-- /results -->\n", tmp_path)


def test_the_script_checks_without_tensorflow():
    code = ("import runpy, sys; sys.argv = ['render_results.py', '--check'];\n"
            "try:\n    runpy.run_path('scripts/render_results.py', run_name='__main__')\n"
            "except SystemExit as e:\n    status = e.code\n"
            "assert 'tensorflow' not in sys.modules, 'TensorFlow was imported'\n"
            "sys.exit(status)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, env={"PYTHONPATH": str(ROOT), "PATH": ""}, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
