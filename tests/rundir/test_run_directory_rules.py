"""What a command may do to a run directory (issue: nothing a user owns is lost or silently
replaced): the checkpoint state file is never trusted over the files, a damaged newest
checkpoint is skipped, a resume with another tokenizer or language pair stops before
writing, the lock is taken before anything is decided, and export/translate use the
checkpoint the last choice kept.

One tiny run (20 steps, a checkpoint every step) is trained once; each test works on a copy.
"""
from __future__ import annotations

import hashlib
import json
import logging
import pathlib
import shutil

import pytest

from transformer_tf.rundir import checkpoints, model_dir as model_dir_lib
from transformer_tf.training import averaging
from transformer_tf.training.fit import TrainOptions, train
from transformer_tf.rundir.lock import RunLockedError

REPO = pathlib.Path(__file__).resolve().parents[2]
STEPS = 20


def options(data_dir, model_dir, **changes):
    base = dict(data_dir=str(data_dir), model_dir=str(model_dir), preset="tiny",
                model_overrides={"num_layers": 1}, max_steps=STEPS, eval_every=STEPS,
                validation_sentences=0, verbose=0, precision="float32",
                training_overrides={"checkpoint_every_minutes": 1e-5, "keep_checkpoints": 30})
    return TrainOptions(**{**base, **changes})


@pytest.fixture(scope="module")
def trained(tiny_multi30k, tmp_path_factory, gc_frozen):
    model_dir = tmp_path_factory.mktemp("trained") / "model"
    with gc_frozen():
        train(options(tiny_multi30k.directory, model_dir))
    return model_dir


@pytest.fixture
def run(trained, tmp_path):
    """A copy of the trained run, its own to change."""
    copy = tmp_path / "model"
    shutil.copytree(trained, copy)
    return copy


def steps(paths):
    return [checkpoints.checkpoint_step(p) for p in paths]


def snapshot(directory) -> dict:
    """{relative path: sha256} of every file under `directory`."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(pathlib.Path(directory).rglob("*")) if p.is_file()}


STATE_DAMAGE = {
    "missing": lambda path: path.unlink(),
    "garbled": lambda path: path.write_bytes(b"model_checkpoint_path: \x00{{{ garbage"),
    # As a run started again from step 0 leaves it: only its own ckpt-1 listed.
    "stale": lambda path: path.write_text('model_checkpoint_path: "ckpt-1"\n'
                                          'all_model_checkpoint_paths: "ckpt-1"\n'),
}


@pytest.mark.parametrize("damage", sorted(STATE_DAMAGE))
def test_the_checkpoint_files_decide_not_the_state_file(run, tiny_multi30k, gc_frozen,
                                                        caplog, damage):
    on_disk = checkpoints.checkpoints_on_disk(run)
    assert steps(on_disk)[-1] == STEPS
    STATE_DAMAGE[damage](checkpoints.checkpoint_dir(run) / checkpoints.STATE_FILE)

    with caplog.at_level(logging.WARNING):
        assert checkpoints.list_checkpoints(run) == on_disk  # average and export see them
    assert "using the" in caplog.text and "checkpoint(s) present" in caplog.text

    caplog.clear()
    with gc_frozen(), caplog.at_level(logging.WARNING):
        result = train(options(tiny_multi30k.directory, run, max_steps=STEPS + 1))
    assert (result.start_step, result.step) == (STEPS, STEPS + 1)  # not from step 0
    assert "rewrote it from the" in caplog.text
    assert checkpoints.state_problem(run) is None
    assert steps(checkpoints.list_checkpoints(run))[-2:] == [STEPS, STEPS + 1]


def test_a_truncated_newest_checkpoint_is_skipped_and_kept_aside(run, tiny_multi30k,
                                                                 gc_frozen, caplog):
    newest = checkpoints.checkpoints_on_disk(run)[-1]
    data = pathlib.Path(newest + ".data-00000-of-00001")
    truncated = data.read_bytes()[: data.stat().st_size // 3]
    data.write_bytes(truncated)
    with gc_frozen(), caplog.at_level(logging.WARNING):
        result = train(options(tiny_multi30k.directory, run))  # IndexError before
    assert result.start_step == STEPS - 1 and result.step == STEPS
    assert f"ckpt-{STEPS}" in caplog.text and "damaged" in caplog.text
    aside = checkpoints.checkpoint_dir(run) / checkpoints.DAMAGED_SUBDIR
    assert (aside / data.name).read_bytes() == truncated  # kept for inspection
    assert checkpoints.checkpoint_problem(newest) is None  # written again, whole
    # Damaged again at the same step: both copies are kept.
    again = data.read_bytes()[: data.stat().st_size // 2]
    data.write_bytes(again)
    with caplog.at_level(logging.WARNING):
        moved = checkpoints.repair_checkpoint_state(run)
    assert aside / "2" / data.name in moved
    assert (aside / "2" / data.name).read_bytes() == again
    assert (aside / data.name).read_bytes() == truncated


def test_a_run_whose_every_checkpoint_is_damaged_does_not_start_again(run, tiny_multi30k):
    for prefix in checkpoints.checkpoints_on_disk(run):
        pathlib.Path(prefix + ".data-00000-of-00001").write_bytes(b"")
    before = snapshot(run)
    with pytest.raises(checkpoints.CheckpointError, match="nothing was restored"):
        train(options(tiny_multi30k.directory, run, max_steps=STEPS + 5))
    assert {k: v for k, v in snapshot(run).items() if "lock" not in k} == \
           {k: v for k, v in before.items() if "lock" not in k}


@pytest.fixture(scope="module")
def other_pair(tiny_multi30k, tmp_path_factory):
    """Prepared data like tiny_multi30k's but another language pair and tokenizer."""
    from transformer_tf.data import bpe
    from transformer_tf.data.corpora import text_file_corpus
    from transformer_tf.data.prepared_writer import prepare_corpus

    files = {split: (tiny_multi30k.files(split).target, tiny_multi30k.files(split).source)
             for split in ("train", "valid")}  # de -> en
    corpus = text_file_corpus("de", "en", **files, name="tiny-de-en")
    prepared = prepare_corpus(corpus, tmp_path_factory.mktemp("de_en"),
                              bpe.BpeOptions(vocab_size=500, max_training_sentences=300, seed=7),
                              max_length=64)
    assert prepared.bpe_model_path.read_bytes() != tiny_multi30k.bpe_model_path.read_bytes()
    return prepared


def test_resuming_with_another_tokenizer_or_pair_writes_nothing(run, other_pair):
    before = snapshot(run)
    with pytest.raises(model_dir_lib.RunMismatchError) as refused:
        train(options(other_pair.directory, run, max_steps=STEPS + 5))
    message = str(refused.value)
    for field in ("source language: the run's 'en', requested 'de'",
                  "target language: the run's 'de', requested 'en'", "tokenizer sha256"):
        assert field in message
    assert "nothing was written" in message
    after = snapshot(run)
    assert {k: v for k, v in after.items() if "lock" not in k} == \
           {k: v for k, v in before.items() if "lock" not in k}


def test_a_moved_data_directory_with_the_same_tokenizer_resumes(run, tiny_multi30k, tmp_path,
                                                                gc_frozen):
    moved = tmp_path / "moved_data"
    shutil.copytree(tiny_multi30k.directory, moved)
    with gc_frozen():
        result = train(options(moved, run, max_steps=STEPS + 1))
    assert (result.start_step, result.step) == (STEPS, STEPS + 1)
    assert model_dir_lib.read_run_config(run).data_dir == str(moved.resolve())


@pytest.fixture
def held(run, lock_held_elsewhere):
    """`run`, its lock held by another process for the test's duration."""
    with lock_held_elsewhere(run):
        yield run


def test_every_writer_waits_for_the_lock_before_deciding_anything(held, other_pair,
                                                                  tiny_multi30k, tmp_path):
    from transformer_tf.data.prepared_reader import load_prepared
    from transformer_tf.inference.selection import average_and_choose

    before = snapshot(held)
    with pytest.raises(RunLockedError):
        averaging.average_run(held, 3)
    with pytest.raises(RunLockedError):
        averaging.average_into_run(held, 3)
    with pytest.raises(RunLockedError):
        average_and_choose(held, load_prepared(tiny_multi30k.directory), 3)
    # The lock comes before the identity check: a held run is reported as held.
    with pytest.raises(RunLockedError):
        train(options(other_pair.directory, held))
    assert snapshot(held) == before


def test_the_main_job_waits_for_the_lock_too(held, tmp_path):
    from transformer_tf.jobs.main_job import MainJobOptions, run_main_job

    work = held.parent
    with pytest.raises(RunLockedError):
        run_main_job(MainJobOptions(work_dir=str(work), preset="tiny", max_steps=1,
                                 train_minutes=None, saved_models_dir=str(tmp_path / "saved")))
    assert not (tmp_path / "saved").exists()


def test_export_and_translate_follow_the_recorded_choice(run, tiny_multi30k, gc_frozen):
    from transformer_tf.inference.loading import default_checkpoint

    newest = checkpoints.checkpoints_on_disk(run)[-1]
    averaged = averaging.average_run(run, 3)  # an average exists ...
    assert default_checkpoint(run)[0] == averaged.path  # (no choice recorded: old rule)
    model_dir_lib.write_chosen(run, model_dir_lib.ChosenCheckpoint(
        checkpoint=newest, name="latest", reason="hand-made", newest_step=STEPS))
    path, why = default_checkpoint(run)  # ... but the choice kept the latest
    assert path == newest and "the recorded choice: latest" in why

    shutil.copytree(run, run.parent / "copied")  # the record travels with the directory
    assert default_checkpoint(run.parent / "copied")[0] == str(run.parent / "copied" /
                                                               "checkpoints" / f"ckpt-{STEPS}")

    with gc_frozen():
        train(options(tiny_multi30k.directory, run, max_steps=STEPS + 1))
    path, why = default_checkpoint(run)  # trained since: the choice is stale
    assert checkpoints.checkpoint_step(path) == STEPS + 1 and "trained since" in why

    record = averaging.average_into_run(run, 2)  # an explicit average is a choice too
    assert default_checkpoint(run)[0] == record.path
    assert json.loads((run / model_dir_lib.CHOSEN_FILE).read_text())["name"] == "averaged"
