"""The Table 3 study's outputs (transformer_tf/jobs/variations.py): an --out directory or a
--results file that holds something this study did not write is refused before anything
is trained or written, and left as it was; the study's own directory and results file are
still resumed."""
import dataclasses
import json
import pathlib
import shutil

import pytest

from transformer_tf.jobs.variation_rows import parameter_count
from transformer_tf.jobs.variations import (
    KEPT_ROWS,
    STUDY_FILE,
    ForeignOutput,
    StudyMismatch,
    StudyOptions,
    run_study,
)

REPO = pathlib.Path(__file__).resolve().parents[2]
# A committed Table 3 results file that keeps no rows (no row_results).
COMMITTED_WITHOUT_ROWS = REPO / "results" / "table3" / "multi30k-1000-steps-avx2.json"


def _fake_result(row):
    return {"row": row.name, "group": row.group, "model": row.model.get_config(),
            "label_smoothing": row.label_smoothing, "parameters": parameter_count(row.model),
            "steps": 5, "dev_perplexity": 5.0, "dev_bleu": 20.0,
            "target_tokens_per_second": 1000.0, "train_seconds": 1.0, "checkpoint": "x"}


def _study(options, trained, plan_only=False):
    """run_study with fakes that note each row trained."""
    return run_study(options, lambda row, *rest: trained.append(row.name),
                     lambda row, row_dir, o: _fake_result(row), say=lambda message: None,
                     plan_only=plan_only)


def _contents(directory: pathlib.Path) -> dict:
    """{relative path: bytes} of every file under `directory`."""
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def _options(tiny_multi30k, out, results=None, **changes):
    return StudyOptions(**{"data_dir": str(tiny_multi30k.directory), "out_dir": str(out),
                           "groups": ("E",), "max_steps": 5, "results": results, **changes})


def _cli(tiny_multi30k, out, *more):
    from transformer_tf.cli.variations import main

    return main(["--data", str(tiny_multi30k.directory), "--out", str(out), "--rows", "E",
                 "--max-steps", "5", "--plan-only", "--quiet", *more])


@pytest.mark.parametrize("kind", ["committed, without row_results", "another kind",
                                  "not JSON", "a directory"])
@pytest.mark.parametrize("plan_only", [False, True])
def test_a_results_file_not_of_this_runner_is_refused_and_kept(tiny_multi30k, tmp_path,
                                                               capsys, kind, plan_only):
    results = tmp_path / "results" / "table3" / "theirs.json"
    results.parent.mkdir(parents=True)
    if kind == "committed, without row_results":
        shutil.copy(COMMITTED_WITHOUT_ROWS, results)
        assert KEPT_ROWS not in json.loads(results.read_text())
    elif kind == "another kind":
        results.write_text(json.dumps({"what": "a parsing ablation", "rows": [{"F1": 91.2}]}))
    elif kind == "not JSON":
        results.write_text("row,bleu\nbase,20.1\n")
    else:
        (results / "inside.txt").parent.mkdir()
        (results / "inside.txt").write_text("kept")
    before = _contents(tmp_path)
    trained = []
    with pytest.raises(ForeignOutput, match="give another --results") as error:
        _study(_options(tiny_multi30k, tmp_path / "out", str(results)), trained, plan_only)
    why = ("is a directory, not a results file" if kind == "a directory"
           else "is not a results file of this runner's study")
    assert str(results) in str(error.value) and why in str(error.value)
    assert trained == []
    assert _contents(tmp_path) == before  # nothing written: not the file, not --out
    assert not (tmp_path / "out").exists()
    # The command line refuses it the same way, exit 2, naming the file.
    assert _cli(tiny_multi30k, tmp_path / "out", "--results", str(results)) == 2
    assert str(results) in capsys.readouterr().err
    assert _contents(tmp_path) == before


def test_a_results_file_of_another_study_is_refused_even_before_its_first_row(
        tiny_multi30k, tmp_path):
    """A study planned with --plan-only keeps no rows yet; another study given its file
    would still replace it."""
    results = tmp_path / "theirs.json"
    _study(_options(tiny_multi30k, tmp_path / "a", str(results)), [], plan_only=True)
    assert json.loads(results.read_text())[KEPT_ROWS] == []
    before = results.read_bytes()
    trained = []
    for plan_only in (True, False):
        with pytest.raises(StudyMismatch, match="max_steps: was 5, now 6") as error:
            _study(_options(tiny_multi30k, tmp_path / "b", str(results), max_steps=6),
                   trained, plan_only)
        assert str(results) in str(error.value)
    assert trained == [] and results.read_bytes() == before
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("plan_only", [False, True])
def test_an_out_directory_not_of_this_study_is_refused_and_kept(tiny_multi30k, tmp_path,
                                                                capsys, plan_only):
    out = tmp_path / "out"
    out.mkdir()
    # What another run left there: names the study would write, and one it would not.
    (out / "results.json").write_text('{"what": "my own results"}\n')
    (out / "variations.md").write_text("my notes\n")
    (out / "provenance.json").write_text('{"commit": "not this study\'s"}\n')
    (out / "model").mkdir()
    (out / "model" / "weights.h5").write_bytes(b"\x00weights")
    before = _contents(out)
    trained = []
    with pytest.raises(ForeignOutput, match="give another --out") as error:
        _study(_options(tiny_multi30k, out), trained, plan_only)
    assert str(out) in str(error.value) and STUDY_FILE in str(error.value)
    assert trained == [] and _contents(out) == before
    # A --results file given with it is not written either.
    results = tmp_path / "r.json"
    with pytest.raises(ForeignOutput):
        _study(_options(tiny_multi30k, out, str(results)), trained, plan_only)
    assert not results.exists() and _contents(out) == before
    assert _cli(tiny_multi30k, out) == 2
    assert str(out) in capsys.readouterr().err
    assert _contents(out) == before


def test_an_out_path_that_is_a_file_is_refused_and_kept(tiny_multi30k, tmp_path):
    out = tmp_path / "out"
    out.write_text("mine\n")
    with pytest.raises(ForeignOutput, match="is a file, not a study directory"):
        _study(_options(tiny_multi30k, out), [])
    assert out.read_text() == "mine\n"


def test_the_studys_own_outputs_are_still_resumed(tiny_multi30k, tmp_path):
    """A new or empty --out begins a study; its directory and results file resume it, here
    and from a fresh --out, trained rows kept."""
    empty = tmp_path / "empty"
    empty.mkdir()
    results = tmp_path / "results" / "ours.json"
    options = _options(tiny_multi30k, empty, str(results))
    trained = []
    _study(options, trained, plan_only=True)  # plans into the empty directory
    assert trained == [] and (empty / STUDY_FILE).exists()
    _study(options, trained)  # resumed: its study.json, its results file (no rows yet)
    assert trained == ["base", "E: learned positions"]
    written = _contents(empty)
    _study(options, trained)  # resumed again: nothing to train
    _study(dataclasses.replace(options, out_dir=str(tmp_path / "new" / "out")), trained)
    assert trained == ["base", "E: learned positions"]  # a fresh --out keeps the file's rows
    assert [r["row"] for r in json.loads(results.read_text())[KEPT_ROWS]] == [
        "base", "E: learned positions"]
    assert set(_contents(empty)) == set(written)


def test_a_copy_of_the_out_results_file_continues_the_study(tiny_multi30k, tmp_path):
    """OUT/results.json has the form of a --results file (the settings and the kept rows),
    so copying it to results/table3/ (as the docs say) gives a file that continues the
    study in a fresh --out, nothing trained again."""
    trained = []
    _study(_options(tiny_multi30k, tmp_path / "first"), trained)
    copy = tmp_path / "results" / "copied.json"
    copy.parent.mkdir()
    shutil.copy(tmp_path / "first" / "results.json", copy)
    _study(_options(tiny_multi30k, tmp_path / "second", str(copy)), trained)
    assert trained == ["base", "E: learned positions"]
