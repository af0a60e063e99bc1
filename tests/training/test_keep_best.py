"""Keep the best, stop when done: the validation log, the best checkpoint by dev BLEU kept
out of the rolling window, and early stopping after exactly PATIENCE evaluations without a
new best, across resumes; a run whose later checkpoints got worse exports its best."""
from __future__ import annotations

import itertools
import json
import pathlib
import shutil
import types

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import ModelConfig
from transformer_tf.data.prepared_reader import load_prepared
from transformer_tf.export.saved_model import export_model_dir
from transformer_tf.inference.loading import (
    load_trained,
    read_export_info,
    source_decoding,
)
from transformer_tf.inference.selection import average_and_choose
from transformer_tf.models.transformer import Transformer
from transformer_tf.rundir import checkpoints
from transformer_tf.rundir.best_checkpoint import best_dir, read_best, save_best
from transformer_tf.rundir.validation_log import (
    ValidationRecord,
    append_validation,
    read_validation_log,
    validation_log_path,
)
from transformer_tf.training import averaging
from transformer_tf.training import validation as validation_module
from transformer_tf.training.fit import TrainOptions, train
from transformer_tf.training.keep_best import EarlyStopping, KeepBest
from transformer_tf.training.validation import ValidationTranslations


class _Holder:
    """What the callbacks read: model.optimizer.iterations and model.stop_training."""

    def __init__(self):
        self.optimizer = types.SimpleNamespace(iterations=tf.Variable(0, dtype=tf.int64))
        self.stop_training = False


def _callbacks(model_dir, network, holder, patience):
    keep = KeepBest(network, model_dir,
                    run_seconds=lambda: 10.0 * holder.optimizer.iterations.numpy())
    stop = EarlyStopping(patience, keep)
    for callback in (keep, stop):
        callback.set_model(holder)
    return keep, stop


def _expected_stop(bleus, patience):
    """Index of the evaluation after which a run stops (None: never), by hand: the first
    one that is `patience` evaluations after the strictly highest BLEU so far."""
    best = 0
    for index, bleu in enumerate(bleus):
        if bleu > bleus[best]:
            best = index
        if index - best >= patience:
            return index
    return None


def test_early_stopping_stops_after_exactly_patience_evaluations_without_a_new_best(tmp_path):
    network = tf.Module()
    network.weight = tf.Variable([0.0, 0.0])
    cases = 0
    for patience in (1, 2):
        for bleus in itertools.product((0.0, 1.0, 2.0), repeat=4):
            model_dir = tmp_path / f"{patience}-{cases}"
            cases += 1
            holder = _Holder()
            keep, stop = _callbacks(model_dir, network, holder, patience)
            stopped = None
            for index, bleu in enumerate(bleus):
                if index == 2:  # a resume: the state comes back from the run directory
                    keep, stop = _callbacks(model_dir, network, holder, patience)
                holder.optimizer.iterations.assign(2 * (index + 1))
                network.weight.assign([bleu, index])
                logs = {"val_bleu": bleu, "val_nll": np.array([3.0])}  # multi-worker shape
                keep.on_epoch_end(index, logs)
                stop.on_epoch_end(index, logs)
                if holder.stop_training:
                    stopped = index
                    break
            assert stopped == _expected_stop(bleus, patience), (patience, bleus)
            # The best checkpoint holds the weights of the first evaluation with the top BLEU.
            seen = bleus[:len(bleus) if stopped is None else stopped + 1]
            first_top = seen.index(max(seen))
            best = read_best(model_dir)
            assert (best.step, best.dev_bleu) == (2 * (first_top + 1), max(seen))
            restored = tf.Module()
            restored.weight = tf.Variable([9.0, 9.0])
            tf.train.Checkpoint(model=restored).read(best.checkpoint).expect_partial()
            assert restored.weight.numpy().tolist() == [max(seen), first_top]
            assert [p.name for p in best_dir(model_dir).glob("ckpt-*.index")] == [
                f"ckpt-{best.step}.index"]
            rows = read_validation_log(model_dir)
            assert [row.dev_bleu for row in rows] == list(seen)
            assert [row.trained_seconds for row in rows] == [20.0 * (i + 1)
                                                            for i in range(len(seen))]
            if stopped is not None:
                assert stop.reason == (f"early stopping: dev BLEU has not improved for "
                                       f"{patience} evaluation(s) (best {max(seen):.2f} at "
                                       f"step {best.step})")
    assert cases == 2 * 3 ** 4


def test_an_equal_bleu_with_a_lower_nll_is_a_new_best(tmp_path):
    network = tf.Module()
    network.weight = tf.Variable(0.0)
    holder = _Holder()
    keep, stop = _callbacks(tmp_path, network, holder, patience=2)
    for step, (bleu, nll) in enumerate([(5.0, 3.0), (5.0, 2.5), (5.0, 2.5), (4.0, 1.0)], 1):
        holder.optimizer.iterations.assign(step)
        keep.on_epoch_end(step, {"val_bleu": bleu, "val_nll": nll})
        stop.on_epoch_end(step, {})
    assert read_best(tmp_path).step == 2  # the tie in NLL too is no progress
    assert holder.stop_training and keep.evaluations_since_best == 2
    assert [row.checkpoint for row in read_validation_log(tmp_path)] == [
        "checkpoints/best/ckpt-1", "checkpoints/best/ckpt-2", None, None]
    with pytest.raises(ValueError, match="at least 1"):
        EarlyStopping(0, keep)


def test_the_log_skips_a_line_cut_short_and_names_a_bad_field(tmp_path, caplog):
    append_validation(tmp_path, ValidationRecord(2, 1.5, 10.0, 3.0, None))
    path = validation_log_path(tmp_path)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"step": 4, "trained_sec')  # killed mid-write
    append_validation(tmp_path, ValidationRecord(4, 3.0, 11.0, 2.9, "checkpoints/ckpt-4"))
    assert [row.step for row in read_validation_log(tmp_path)] == [2, 4]
    assert f"{path}:2: not JSON" in caplog.text
    assert path.read_text().count("\n") == 3  # every line kept, the cut one on its own

    record = json.loads(path.read_text().split("\n")[0])
    for field, value, message in (("dev_bleu", "high", "field 'dev_bleu' is 'high'"),
                                  ("step", None, "field 'step' is None"),
                                  ("dev_nll", float("nan"), "field 'dev_nll' is nan, not a")):
        path.write_text(json.dumps({**record, field: value}) + "\n")
        with pytest.raises(ValueError, match=f"{path}:1: {message}"):
            read_validation_log(tmp_path)
    path.write_text(json.dumps({k: v for k, v in record.items() if k != "dev_nll"}) + "\n")
    with pytest.raises(ValueError, match=f"{path}:1: field 'dev_nll' is missing"):
        read_validation_log(tmp_path)


def _scripted_bleu(monkeypatch, bleus):
    """The dev BLEU of each validation, in turn (the real decoding still runs); no attention
    images (matplotlib's drawing took most of a tiny run's time)."""
    values = iter(bleus)
    monkeypatch.setattr(ValidationTranslations, "score", lambda self, hypotheses: next(values))
    monkeypatch.setattr(validation_module, "attention_heatmap_images", lambda *args: {})


def _options(data, model_dir, **changes):
    return TrainOptions(**{
        "data_dir": str(data.directory), "model_dir": str(model_dir), "preset": "tiny",
        "model_overrides": {"num_layers": 1}, "eval_every": 2, "validation_sentences": 4,
        "verbose": 0,
        # Training checkpoints only when an invocation ends, however slow the machine.
        "training_overrides": {"keep_checkpoints": 1, "checkpoint_every_minutes": 1e6},
        **changes})


def _strategy() -> str:
    """"mirrored" over the two logical CPUs of tests/conftest.py when there are two."""
    if len(tf.config.list_logical_devices("CPU")) < 2:
        return "default"
    # A new MirroredStrategy numbers its collective ops from a key base of its own (see
    # tests/training/test_replicas.py).
    tf.distribute.MirroredStrategy._collective_key_base += 100_000
    return "mirrored"


@pytest.fixture(scope="module")
def stopped_run(tiny_multi30k, tmp_path_factory, gc_frozen):
    """A run (under MirroredStrategy over two replicas where the CPU is split) that keeps one
    training checkpoint (saved when an invocation ends) and validates every 2 steps, with early
    stopping after 2 evaluations without a new best: trained to step 6 (dev BLEU 1, 7, 3),
    killed while writing a line of its log, resumed (dev BLEU 2 at step 8: it stops), and
    run once more. (options, [the three results], the log's bytes after the first
    invocation)."""
    model_dir = tmp_path_factory.mktemp("stopped") / "model"
    results = []
    with pytest.MonkeyPatch.context() as monkeypatch, gc_frozen():
        _scripted_bleu(monkeypatch, [1.0, 7.0, 3.0])
        results.append(train(_options(tiny_multi30k, model_dir, max_steps=6, early_stopping=2,
                                      strategy=_strategy())))
        with open(validation_log_path(model_dir), "a", encoding="utf-8") as handle:
            handle.write('{"step": 8, "trained_sec')  # killed mid-write
        written = validation_log_path(model_dir).read_bytes()
        _scripted_bleu(monkeypatch, [2.0])
        for _ in range(2):
            options = _options(tiny_multi30k, model_dir, max_steps=40, early_stopping=2,
                               strategy=_strategy())
            results.append(train(options))
    return options, results, written


def test_a_run_stops_early_and_keeps_its_best_checkpoint_out_of_the_window(stopped_run):
    options, (first, resumed, again), written = stopped_run
    model_dir = pathlib.Path(options.model_dir)
    assert (first.step, first.stopped_by) == (6, "steps")
    # 2 evaluations without a new best: 3.0 before the resume, 2.0 after it.
    assert (resumed.start_step, resumed.step, resumed.stopped_by) == (6, 8, "early_stopping")
    assert resumed.stop_reason == ("early stopping: dev BLEU has not improved for 2 "
                                   "evaluation(s) (best 7.00 at step 4)")
    # A finished run trains no further: its patience is still spent.
    assert (again.start_step, again.step, again.stopped_by) == (8, 8, "early_stopping")

    # The log: appended to (the line cut short kept, and skipped when read).
    assert validation_log_path(model_dir).read_bytes().startswith(written)
    rows = read_validation_log(model_dir)
    assert [(row.step, row.dev_bleu) for row in rows] == [(2, 1.0), (4, 7.0), (6, 3.0),
                                                          (8, 2.0)]
    # (No training checkpoint was saved at steps 6 and 8 when they were evaluated.)
    assert [row.checkpoint for row in rows] == ["checkpoints/best/ckpt-2",
                                                "checkpoints/best/ckpt-4", None, None]
    assert all(0 < a.trained_seconds < b.trained_seconds for a, b in zip(rows, rows[1:]))
    best = read_best(model_dir)
    assert (best.step, best.dev_bleu, best.dev_nll) == (4, 7.0, rows[1].dev_nll)
    # The rolling window (1) holds the last step only; the best is apart and whole.
    assert [checkpoints.checkpoint_step(p) for p in checkpoints.list_checkpoints(model_dir)] \
        == [8]
    assert sorted(p.name for p in best_dir(model_dir).iterdir()) == [
        "best.json", "ckpt-4.data-00000-of-00001", "ckpt-4.index"]


def test_a_run_whose_later_checkpoints_got_worse_keeps_and_exports_its_best(stopped_run,
                                                                            tiny_multi30k,
                                                                            tmp_path, gc_frozen):
    options, _, _ = stopped_run
    model_dir = tmp_path / "model"
    shutil.copytree(options.model_dir, model_dir)
    # Ruin the later checkpoint: noise on every weight of ckpt-8.
    rng = np.random.default_rng(0)
    model = load_trained(model_dir)[0]
    for path in checkpoints.list_checkpoints(model_dir):
        checkpoints.load_weights(model, path)
        for weight in model.weights:
            weight.assign(weight.numpy() + rng.normal(0, 1.0, weight.shape).astype("float32"))
        tf.train.Checkpoint(model=model).write(path)
    with gc_frozen():
        greedy = source_decoding(model_dir=model_dir).replace(beam_size=1, alpha=0.6)
        selection = average_and_choose(model_dir, load_prepared(tiny_multi30k.directory), 2,
                                       decoding=greedy, bleu_limit=8)
    # Only ckpt-8 is in the last 20% of training: nothing to average.
    assert [score.name for score in selection.scores] == ["latest", "best"]
    assert selection.note == ("not averaged: 1 checkpoint(s) in the final 20% of training; "
                              "best by dev BLEU during training: step 4 (7.00)")
    latest, best = selection.scores
    assert best.nll < latest.nll - 0.1  # the later one really is worse
    # The best checkpoint's weights are step 4's: they give the dev NLL logged at step 4.
    # The two NLLs sum the dev set in different batches, so oneDNN may pick other kernels
    # (seen: 3e-5 apart, relative, on an AMX Xeon): step 4's row is the nearest, and close.
    rows = read_validation_log(model_dir)
    assert rows[1].step == 4
    assert rows[1].dev_nll != pytest.approx(rows[3].dev_nll, abs=1e-3)
    assert min(rows, key=lambda row: abs(row.dev_nll - best.nll)) == rows[1]
    assert best.nll == pytest.approx(rows[1].dev_nll, rel=1e-4)
    assert selection.chosen == best and "decides, best" in selection.reason
    out = export_model_dir(model_dir, tmp_path / "saved" / "1", warmup=False)
    assert read_export_info(out)["checkpoint"] == str(best_dir(model_dir) / "ckpt-4")


def test_early_stopping_needs_dev_bleu(tiny_multi30k, tmp_path):
    with pytest.raises(ValueError, match="early stopping needs dev BLEU"):
        train(_options(tiny_multi30k, tmp_path, max_steps=4, early_stopping=2,
                       validation_sentences=0))
    from transformer_tf.cli import train as train_cli

    with pytest.raises(SystemExit) as exit_info:
        train_cli.main(["--data", str(tiny_multi30k.directory), "--model-dir", str(tmp_path),
                        "--preset", "tiny", "--max-steps", "4", "--early-stopping", "2",
                        "--validation-sentences", "0"])
    assert exit_info.value.code == 2


def test_the_best_checkpoint_is_an_averaging_candidate(write_checkpointed_run, tmp_path):
    config = ModelConfig(vocab_size=40, num_layers=1, d_model=8, d_ff=16, num_heads=2,
                         max_position=16)
    run = write_checkpointed_run(tmp_path / "run", config, (80, 90, 100), average_last=3)
    network = Transformer(config)
    network.build()
    for weight in network.weights:
        weight.assign(tf.fill(weight.shape, 0.5))

    def steps():
        return [(pathlib.Path(p).parent.name, checkpoints.checkpoint_step(p))
                for p in averaging.candidate_checkpoints(run)]

    assert steps() == [("checkpoints", 80), ("checkpoints", 90), ("checkpoints", 100)]
    save_best(network, run, 90, 30.0, 2.0, 1.0)  # the same step as a training checkpoint
    assert steps() == [("checkpoints", 80), ("checkpoints", 90), ("checkpoints", 100)]
    save_best(network, run, 95, 31.0, 2.0, 1.0)  # rotated out of the window: the best's
    assert steps() == [("checkpoints", 80), ("checkpoints", 90), ("best", 95),
                       ("checkpoints", 100)]
    averaged = averaging.average_run(run, last=2)
    assert [checkpoints.checkpoint_step(p) for p in averaged.sources] == [95, 100]
    # The mean of 0.5 (the best) and ckpt-100's weights, read independently.
    reader = tf.train.load_checkpoint(averaged.sources[1])
    key = next(k for k in reader.get_variable_to_shape_map()
               if k.startswith("model/") and "embeddings" in k and "OPTIMIZER" not in k)
    mean = tf.train.load_checkpoint(averaged.path).get_tensor(key)
    np.testing.assert_allclose(mean, (0.5 + reader.get_tensor(key)) / 2, rtol=1e-6)
