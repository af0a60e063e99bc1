"""Export version directories (transformer_tf.export.versions): what `--out` may be, what
`--overwrite` may replace, the swap that never loses a version, the recovery after a
killed export (SIGKILL at every step of the swap), and both export commands' one-line
errors. The commands are checked on a run directory whose loading is never reached."""
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from transformer_tf.export.versions import (
    CTRANSLATE2, SAVED_MODEL, OutDirError, check_out_dir, next_free_version,
    recover_interrupted, write_version)

REPO = pathlib.Path(__file__).resolve().parents[2]


def saved_model_dir(path: pathlib.Path, marker: str = "old") -> pathlib.Path:
    """A directory laid out as a SavedModel export (saved_model.pb holds `marker`)."""
    (path / "variables").mkdir(parents=True)
    (path / "saved_model.pb").write_text(marker)
    (path / "assets.extra").mkdir()
    return path


def ct2_dir(path: pathlib.Path, marker: str = "old") -> pathlib.Path:
    path.mkdir(parents=True)
    for name in ("model.bin", "config.json", "shared_vocabulary.json", "bpe.model"):
        (path / name).write_text(marker)
    (path / "transformer_tf.json").write_text("{}")
    return path


def dead_pid() -> int:
    """The id of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.fixture
def run_dir(tmp_path):
    """A run directory holding run_config.json, bpe.model and a checkpoint file."""
    from transformer_tf.presets import get_preset
    from transformer_tf.rundir.model_dir import RunConfig, write_run_config

    run = tmp_path / "run"
    run.mkdir()
    preset = get_preset("tiny")
    write_run_config(run, RunConfig(preset.model, preset.training, preset.decoding,
                                    data_dir=str(tmp_path), preset="tiny"))
    (run / "bpe.model").write_bytes(b"tokenizer")
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "ckpt-1.index").write_bytes(b"index")
    return run


def snapshot(root: pathlib.Path) -> dict:
    """{relative path: bytes or None for a directory} of everything under `root`."""
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
            for p in sorted(root.rglob("*"))}


# ---------------------------------------------------------------------------- the rules
def test_next_free_version(tmp_path):
    name = tmp_path / "saved_models" / "m"
    assert next_free_version(name) == 1
    for version in ("1", "3", "notes", "0012x"):
        (name / version).mkdir(parents=True)
    (name / "9").write_text("a file, not a version")
    assert next_free_version(name) == 4
    (name / f".7.old.{dead_pid()}").mkdir()  # moved aside by a killed export: still there
    (name / ".8.tmp").mkdir()  # an unfinished new version is not one
    assert next_free_version(name) == 8


@pytest.mark.parametrize("out, problem", [
    ("saved/en_de", "--out must end in an integer version directory"),
    ("saved/en_de/v1", "--out must end in an integer version directory"),
    ("saved/en_de/1.5", "--out must end in an integer version directory"),
    ("saved/en_de/\u0661", "--out must end in an integer version directory"),  # Arabic 1
])
def test_out_must_be_an_integer_version(tmp_path, out, problem):
    with pytest.raises(OutDirError, match=problem) as caught:
        check_out_dir(tmp_path / out)
    assert str(caught.value).startswith(f"{tmp_path / out}: ")
    assert isinstance(caught.value, ValueError)
    assert str(tmp_path / out / "1") in str(caught.value)  # says what to give


def test_files_in_the_way_are_named(tmp_path):
    file = tmp_path / "model.pb"
    file.write_text("x")
    for out in (file, file / "1", file / "m" / "1"):
        with pytest.raises(OutDirError, match=f"^{file}: is a file, not a directory"):
            check_out_dir(out)
    assert file.read_text() == "x"


def test_out_inside_a_run_directory_is_refused(run_dir, tmp_path):
    for out in (run_dir, run_dir / "1", run_dir / "checkpoints" / "1", run_dir / "a" / "b" / "1"):
        for overwrite in (False, True):
            with pytest.raises(OutDirError, match="training run"):
                check_out_dir(out, SAVED_MODEL, overwrite)
    with pytest.raises(OutDirError, match="is inside the model directory"):
        check_out_dir(tmp_path / "other" / "1", overwrite=True, model_dir=tmp_path / "other")
    check_out_dir(tmp_path / "saved" / "m" / "1", model_dir=run_dir)  # beside it: fine


def test_overwrite_replaces_only_what_the_export_writes(tmp_path):
    name = tmp_path / "saved" / "m"
    empty = name / "1"
    empty.mkdir(parents=True)
    check_out_dir(empty)  # an empty directory is written without --overwrite
    other = name / "2"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    (other / "data").mkdir()
    with pytest.raises(OutDirError, match=r"is not a SavedModel \(it holds data/, notes.txt; "
                                          r"no saved_model.pb\).*e.g. .*/m/3$"):
        check_out_dir(other, SAVED_MODEL, overwrite=True)
    model = saved_model_dir(name / "3")
    with pytest.raises(OutDirError, match="holds a SavedModel already; pass --overwrite"):
        check_out_dir(model)
    check_out_dir(model, SAVED_MODEL, overwrite=True)
    (model / "README").write_text("mine")
    with pytest.raises(OutDirError, match=r"files its export does not write \(README\)"):
        check_out_dir(model, SAVED_MODEL, overwrite=True)
    # Each export replaces only its own kind.
    ct2 = ct2_dir(name / "4")
    check_out_dir(ct2, CTRANSLATE2, overwrite=True)
    with pytest.raises(OutDirError, match="is not a SavedModel"):
        check_out_dir(ct2, SAVED_MODEL, overwrite=True)
    with pytest.raises(OutDirError, match="is not a CTranslate2 model"):
        check_out_dir(saved_model_dir(name / "5"), CTRANSLATE2, overwrite=True)


# ----------------------------------------------------------------- the swap and recovery
def test_write_version_swaps_in_and_keeps_the_old_one_on_failure(tmp_path):
    out = saved_model_dir(tmp_path / "m" / "1")

    def failing(tmp):
        saved_model_dir(tmp, "half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_version(out, failing, overwrite=True)
    assert (out / "saved_model.pb").read_text() == "old"
    assert sorted(os.listdir(out.parent)) == ["1"]
    write_version(out, lambda tmp: saved_model_dir(tmp, "new"), overwrite=True)
    assert (out / "saved_model.pb").read_text() == "new"
    assert sorted(os.listdir(out.parent)) == ["1"]


def test_a_failed_rename_puts_the_old_version_back(tmp_path, monkeypatch):
    out = saved_model_dir(tmp_path / "m" / "1")
    rename = os.rename

    def refuse_new(source, target):
        if ".tmp." in str(source):
            raise OSError("rename refused")
        rename(source, target)

    monkeypatch.setattr(os, "rename", refuse_new)
    with pytest.raises(OSError, match="rename refused"):
        write_version(out, lambda tmp: saved_model_dir(tmp, "new"), overwrite=True)
    assert (out / "saved_model.pb").read_text() == "old"
    assert sorted(os.listdir(out.parent)) == ["1"]


def test_recovery_restores_or_cleans_what_a_killed_export_left(tmp_path):
    name = tmp_path / "m"
    gone = dead_pid()
    saved_model_dir(name / f".1.old.{gone}", "v1")  # killed between the two renames
    saved_model_dir(name / "2", "v2 new")  # killed before deleting the old one
    saved_model_dir(name / f".2.old.{gone}", "v2 old")
    saved_model_dir(name / f".3.tmp.{gone}", "half")  # killed while writing
    saved_model_dir(name / ".4.old", "v4")  # written by an older version of the export
    saved_model_dir(name / f".5.tmp.{os.getpid()}", "in progress")  # a running export's
    saved_model_dir(name / f".6.old.{os.getpid()}", "in progress")
    done = recover_interrupted(name)
    assert len(done) == 4, done
    assert sorted(os.listdir(name)) == ["." + n for n in (f"5.tmp.{os.getpid()}",
                                                          f"6.old.{os.getpid()}")] + ["1", "2", "4"]
    assert [(name / v / "saved_model.pb").read_text() for v in "124"] == ["v1", "v2 new", "v4"]
    assert recover_interrupted(name) == []


# The swap in a child process that SIGKILLs itself just after its `step`-th file operation
# (0: once the new version is written, before any rename; 1: after moving the old version
# aside; 2: after renaming the new one into place, before deleting the old one).
KILLED_SWAP = textwrap.dedent("""
    import os, shutil, signal, sys
    from transformer_tf.export import versions

    out, step = sys.argv[1], int(sys.argv[2])
    done = [0]
    rename = os.rename

    def counted(source, target):
        rename(source, target)
        done[0] += 1
        if done[0] == step:
            os.kill(os.getpid(), signal.SIGKILL)

    def write(tmp):
        os.makedirs(tmp)
        open(os.path.join(tmp, "saved_model.pb"), "w").write("new")
        if step == 0:
            os.kill(os.getpid(), signal.SIGKILL)

    os.rename = counted
    versions.write_version(out, write, overwrite=True)
""")


@pytest.mark.parametrize("step", [0, 1, 2])
def test_sigkill_at_each_step_of_the_swap_loses_no_version(tmp_path, step):
    out = saved_model_dir(tmp_path / "m" / "1")
    killed = subprocess.Popen([sys.executable, "-c", KILLED_SWAP, str(out), str(step)],
                              stderr=subprocess.PIPE, text=True)
    _, err = killed.communicate(timeout=120)
    assert killed.returncode == -9, err[-2000:]
    left = sorted(os.listdir(out.parent))
    assert left[-1] == "1" if step != 1 else left == [f".1.old.{killed.pid}",
                                                      f".1.tmp.{killed.pid}"]
    assert next_free_version(out.parent) == 2
    recover_interrupted(out.parent)
    assert os.listdir(out.parent) == ["1"]
    assert (out / "saved_model.pb").read_text() == ("new" if step == 2 else "old")
    # ... and the next export goes through.
    write_version(out, lambda tmp: saved_model_dir(tmp, "next"), overwrite=True)
    assert (out / "saved_model.pb").read_text() == "next"
    assert os.listdir(out.parent) == ["1"]


# ------------------------------------------------------------------------- the commands
def _bad_invocations(run_dir, tmp_path):
    """(arguments, the path or flag the error names, what it says) for both commands."""
    file = tmp_path / "model.pb"
    file.write_text("not a directory")
    not_ours = tmp_path / "saved" / "m" / "1"
    not_ours.mkdir(parents=True)
    (not_ours / "notes.txt").write_text("mine")
    existing = saved_model_dir(tmp_path / "saved" / "m" / "2")
    return [
        (["--out", str(run_dir), "--overwrite"], run_dir, "is a training run (it holds "),
        (["--out", str(run_dir / "export" / "1")], run_dir / "export" / "1",
         "is inside the training run"),
        (["--out", str(tmp_path / "saved" / "en_de")], tmp_path / "saved" / "en_de",
         "--out must end in an integer version directory"),
        (["--out", str(file)], file, "is a file, not a directory"),
        (["--out", str(file / "1")], file, "is a file, not a directory"),
        (["--out", str(not_ours), "--overwrite"], not_ours, "(it holds notes.txt; no "),
        (["--out", str(existing)], existing, "already; pass --overwrite"),
    ]


def _one_error_line(capsys, code, named, problem):
    out, err = capsys.readouterr()
    assert code == 2 and out == "", err
    assert err.count("\n") == 1 and err.startswith(f"error: {named}: "), err
    assert problem in err and "Traceback" not in err


def test_export_command_refuses_bad_out_in_one_line(run_dir, tmp_path, capsys):
    from transformer_tf.cli.export import main

    before = snapshot(tmp_path)
    for arguments, named, problem in _bad_invocations(run_dir, tmp_path):
        code = main(["--model-dir", str(run_dir), *arguments])
        _one_error_line(capsys, code, named, problem)
    with pytest.raises(SystemExit) as stopped:  # argparse: usage and one error line
        main(["--model-dir", str(run_dir), "--out", str(tmp_path / "s" / "1"),
              "--max-batch-rows", "-1"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.endswith("error: argument --max-batch-rows: must be 0 or "
                                            "more, got -1\n")
    after = snapshot(tmp_path)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing changed
    assert snapshot(run_dir) == {k[len("run/"):]: v for k, v in before.items()
                                 if k.startswith("run/")}


def test_ctranslate2_command_refuses_bad_out_in_one_line(run_dir, tmp_path, capsys):
    from transformer_tf.cli.export_ctranslate2 import main

    before = snapshot(run_dir)
    for arguments, named, problem in _bad_invocations(run_dir, tmp_path):
        if "--overwrite" not in arguments and "already" in problem:
            problem = "is not a CTranslate2 model"  # a SavedModel is not what it replaces
        code = main(["--model-dir", str(run_dir), *arguments])
        _one_error_line(capsys, code, named, problem)
    assert snapshot(run_dir) == before


def test_ctranslate2_export_keeps_the_old_version_until_the_new_one_is_in_place(
        tmp_path, monkeypatch, serving_bpe):
    """The conversion faked (no ctranslate2 needed): the old version stays whole when the
    new one cannot be moved into place; an export over it replaces it."""
    from transformer_tf.config import DecodingConfig
    from transformer_tf.presets import get_preset
    from transformer_tf.export import ctranslate2 as ct2_export

    class FakeSpec:
        def optimize(self, quantization=None):
            pass

        def save(self, path):
            for name in ("model.bin", "config.json", "shared_vocabulary.json"):
                (pathlib.Path(path) / name).write_text("new")

    class FakeModel:
        family = "transformer"
        config = get_preset("tiny").model
        max_source_length = max_target_length = 24

    monkeypatch.setattr(ct2_export, "transformer_spec", lambda model, tokens: FakeSpec())
    out = ct2_dir(tmp_path / "ct2" / "en_de" / "1")
    rename = os.rename

    def refuse_new(source, target):
        if ".tmp" in pathlib.Path(source).name:
            raise OSError("rename refused")
        rename(source, target)

    export = lambda: ct2_export.export_ctranslate2(  # noqa: E731
        FakeModel(), serving_bpe.model_proto, out, DecodingConfig(), overwrite=True)
    monkeypatch.setattr(os, "rename", refuse_new)
    with pytest.raises(OSError, match="rename refused"):
        export()
    assert (out / "model.bin").read_text() == "old"
    assert sorted(os.listdir(out.parent)) == ["1"]
    monkeypatch.setattr(os, "rename", rename)
    assert export() == out
    assert (out / "model.bin").read_text() == "new"
    assert json.loads((out / "transformer_tf.json").read_text())["family"] == "transformer"
    with pytest.raises(OutDirError, match="is not a CTranslate2 model"):
        ct2_export.export_ctranslate2(FakeModel(), serving_bpe.model_proto,
                                      saved_model_dir(tmp_path / "ct2" / "en_de" / "2"),
                                      DecodingConfig(), overwrite=True)
