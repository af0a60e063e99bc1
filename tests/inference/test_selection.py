"""The main job's choice (`average_and_choose`, its average-and-select stage; the job itself
runs in tests/jobs/test_main_job.py): the averaged checkpoint is kept only when it beats
the latest one on the dev set, so a run with a bad checkpoint in its final part never ends
worse than its latest, and a BLEU difference within the dev set's noise never overrules
the NLL."""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import tensorflow as tf

from transformer_tf.data.prepared_reader import load_prepared
from transformer_tf.inference.loading import load_trained, source_decoding
from transformer_tf.evaluation import corpus_bleu
from transformer_tf.inference.selection import DevScore, average_and_choose, compare_on_dev
from transformer_tf.rundir import checkpoints
from transformer_tf.training import averaging
from transformer_tf.training.fit import TrainOptions, train

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_a_bad_tail_checkpoint_never_makes_the_result_worse(tiny_multi30k, tmp_path, gc_frozen,
                                                            capsys):
    model_dir = tmp_path / "model"
    with gc_frozen():
        train(TrainOptions(
            data_dir=str(tiny_multi30k.directory), model_dir=str(model_dir), preset="tiny",
            model_overrides={"num_layers": 1}, max_steps=20, eval_every=20,
            validation_sentences=0, verbose=0,
            training_overrides={"checkpoint_every_minutes": 1e-5, "keep_checkpoints": 30}))
    available = checkpoints.list_checkpoints(model_dir)
    tail = averaging.tail_checkpoints(available, 3)
    assert [checkpoints.checkpoint_step(p) for p in tail] == [18, 19, 20]

    # Ruin ckpt-19 (inside the averaged tail): noise on every weight.
    model, _, _, _ = load_trained(model_dir, tail[1])
    rng = np.random.default_rng(0)
    for weight in model.weights:
        weight.assign(weight.numpy() + rng.normal(0, 1.0, weight.shape).astype("float32"))
    tf.train.Checkpoint(model=model).write(tail[1])

    prepared = load_prepared(tiny_multi30k.directory)
    beam_2 = source_decoding(model_dir=model_dir).replace(beam_size=2, alpha=0.6)
    for bleu_limit in (8, None):  # BLEU on 8 dev sentences, then on all 40
        with gc_frozen():  # (as the main job does between its stages)
            selection = average_and_choose(model_dir, prepared, 3, decoding=beam_2,
                                           bleu_limit=bleu_limit)  # NLL on all 40 dev pairs
        assert selection.averaged_sources == tail
        latest, average = selection.scores
        assert (latest.name, average.name) == ("latest", "averaged")
        assert average.nll > latest.nll + 0.1  # the average really is worse here
        # Both near-useless: whatever BLEU's rounding gives them, the gap is noise.
        assert "within noise" in selection.reason, selection.reason
        assert selection.chosen == latest

    # scripts/average_checkpoints.py --select dev says the same (BLEU on all 40).
    spec = importlib.util.spec_from_file_location("average_script",
                                                  REPO / "scripts" / "average_checkpoints.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--model-dir", str(model_dir), "--last", "3", "--select", "dev",
                        "--beam-size", "2"]) == 0
    out = capsys.readouterr().out
    assert "better on the dev set: latest" in out
    assert "within noise" in out and "the lower dev NLL decides, latest" in out


def scored(name, nll, translations, references):
    return DevScore(name=name, checkpoint=name, nll=nll,
                    bleu=corpus_bleu(list(translations), references),
                    translations=tuple(translations))


REFERENCES = [f"a man in a red shirt is riding bike number {i} ." for i in range(40)]
GOOD = [f"a man in a red shirt rides bike number {i} ." for i in range(40)]
POOR = [f"a man rides a bike {i}" for i in range(40)]


def test_bleu_decides_beyond_noise_and_nll_within_it():
    # Better on every sentence: beyond noise, so BLEU decides against a better NLL.
    good, poor = scored("averaged", 3.0, GOOD, REFERENCES), scored("latest", 2.0, POOR, REFERENCES)
    choice = compare_on_dev(poor, good, REFERENCES)
    assert choice.chosen == good and choice.bootstrap.a_better == 1.0
    assert "beyond noise" in choice.reason and "BLEU decides, averaged" in choice.reason
    assert compare_on_dev(good, poor, REFERENCES).chosen == good  # either order

    # Better on one sentence of 40: a BLEU lead, but within noise, so the lower NLL decides.
    one_better = scored("averaged", 3.0, [REFERENCES[0]] + POOR[1:], REFERENCES)
    assert one_better.bleu > poor.bleu
    choice = compare_on_dev(poor, one_better, REFERENCES)
    assert not choice.bootstrap.beyond_noise and choice.chosen == poor
    assert "within noise" in choice.reason and "NLL decides, latest" in choice.reason
    lower_nll = scored("averaged", 1.0, one_better.translations, REFERENCES)
    assert compare_on_dev(poor, lower_nll, REFERENCES).chosen == lower_nll

    # The same translations: a tie in BLEU; NLL decides, a tie in NLL keeps the incumbent.
    twin = scored("averaged", 2.0, POOR, REFERENCES)
    assert compare_on_dev(poor, twin, REFERENCES).chosen == poor
