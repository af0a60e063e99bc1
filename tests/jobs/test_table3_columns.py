"""Table 3's columns and verdicts (jobs/variations.py), against hand-worked values: dev
perplexity from a known NLL through the real evaluation path, BLEU from known files,
tokens/s from known counts and times, the flattening step, the informative plan's rows
and learning rates, and the per-row verdict rule."""
import json
import math
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.jobs import variation_rows, variation_verdicts, variations
from transformer_tf.presets import get_preset
from transformer_tf.rundir import logged_scalars
from transformer_tf.training.schedule import TransformerSchedule


class UniformNetwork(keras.layers.Layer):
    """Logits 0 over a vocabulary of V: p = 1/V for every label, whatever the input."""

    def __init__(self, vocab_size):
        super().__init__(name="uniform")
        self.vocab_size = vocab_size

    def call(self, inputs, training=None):
        _, target = inputs
        return tf.zeros(tf.concat([tf.shape(target), [self.vocab_size]], 0))


def test_perplexity_of_a_known_nll_through_the_evaluation_path():
    from transformer_tf.training.plateau import mean_dev_nll
    from transformer_tf.training.trainer import Seq2SeqTrainer

    assert variation_verdicts.perplexity(math.log(4.0)) == pytest.approx(4.0)
    assert variation_verdicts.perplexity(0.0) == 1.0
    # A uniform model over 8 ids scores every real label ln 8 nats: perplexity 8, however
    # the batches are padded (pad labels, id 0, do not count).
    trainer = Seq2SeqTrainer(UniformNetwork(8), label_smoothing=0.1)
    trainer.compile()
    labels = [np.array([[5, 6, 3, 0], [4, 3, 0, 0]]), np.array([[7, 7, 7, 3]])]
    dataset = tf.data.Dataset.from_generator(
        lambda: (((np.ones_like(y), np.ones_like(y)), y) for y in labels),
        output_signature=((tf.TensorSpec([None, None], tf.int64),
                           tf.TensorSpec([None, None], tf.int64)),
                          tf.TensorSpec([None, None], tf.int64)))
    nll = trainer.evaluate(dataset, verbose=0, return_dict=True)["nll"]
    assert variation_verdicts.perplexity(float(nll)) == pytest.approx(8.0, rel=1e-5)
    assert variation_verdicts.perplexity(mean_dev_nll(trainer, dataset)) == pytest.approx(8.0, rel=1e-5)


def test_bleu_of_known_hypothesis_and_reference_files(tmp_path):
    from transformer_tf.evaluation.scoring import corpus_bleu
    from transformer_tf.evaluation.hypothesis_files import read_lines

    (tmp_path / "hyp").write_text("a b c d\n", encoding="utf-8")
    (tmp_path / "ref").write_text("a b c d e\n", encoding="utf-8")
    # Every n-gram of the hypothesis matches (4/4, 3/3, 2/2, 1/1), but it is 4 tokens for
    # a 5-token reference: brevity penalty exp(1 - 5/4) -> BLEU 100 exp(-0.25) = 77.88.
    bleu = corpus_bleu(read_lines(tmp_path / "hyp"), [read_lines(tmp_path / "ref")])
    assert bleu == pytest.approx(100 * math.exp(-0.25), abs=0.01)


def test_tokens_per_second_from_known_counts_and_times(tmp_path, monkeypatch):
    import transformer_tf.training.callbacks as callbacks_lib
    from transformer_tf.training.callbacks import TrainingMonitor

    # Windows of 2 steps: 200 tokens in 2 s, 600 in 2 s, 300 in 1 s -> 100, 300, 300
    # tokens/s; the column is their median, 300.
    clock = [0.0]
    monkeypatch.setattr(callbacks_lib.time, "perf_counter", lambda: clock[0])
    iterations = tf.Variable(0, dtype=tf.int64)
    tokens = [0.0]
    model = types.SimpleNamespace(
        optimizer=types.SimpleNamespace(iterations=iterations, learning_rate=0.5),
        reset_metrics=lambda: tokens.__setitem__(0, 0.0))
    monitor = TrainingMonitor(tmp_path / "logs", log_every=2)  # writes logs/train
    monitor.set_model(model)
    monitor.on_train_begin()
    monitor.on_epoch_begin(0)
    for step, (seconds, count) in enumerate([(1, 100), (1, 100), (1, 300), (1, 300),
                                             (0.5, 150), (0.5, 150)]):
        monitor.on_train_batch_begin(step)
        clock[0] += seconds
        iterations.assign_add(1)
        tokens[0] += count
        monitor.on_train_batch_end(step, {"loss": 1.0, "target_tokens": tokens[0]})
    monitor.on_train_end()
    assert logged_scalars.median_logged_scalar(tmp_path / "logs" / "train",
                                           "target_tokens_per_second") == pytest.approx(300.0)
    assert logged_scalars.median_logged_scalar(tmp_path / "nowhere", "x") is None


def test_flattening_step_on_a_logged_curve():
    # The main job's dev loss (results/raw/main-job-avx512bf16-5c124fc-loss.csv): from
    # step 3000 (2.8081) no later loss is 1 % lower (the lowest, 2.7858, is 0.8 % lower);
    # from 2500 (2.8473) it is 2.2 % lower.
    curve = [(500, 4.2775), (1000, 3.4106), (1500, 3.0941), (2000, 2.8870), (2500, 2.8473),
             (3000, 2.8081), (3500, 2.7992), (4000, 2.7907), (4130, 2.7858)]
    assert variation_verdicts.flattening_step(curve, 0.01) == 3000
    assert variation_verdicts.flattening_step(curve, 0.05) == 2000
    assert variation_verdicts.flattening_step(curve[:3], 0.01) is None  # still falling fast
    assert variation_verdicts.flattening_step(curve[:1]) is None
    assert variation_verdicts.flattening_step([(2, 3.0), (1, 3.0)]) == 1  # order of the log


def test_informative_plan_rows_around_the_multi30k_base():
    preset = get_preset("multi30k")  # N 3, d_model 256, d_ff 1024, h 4, P_drop 0.2, eps 0.1
    rows = variation_rows.with_base_seeds(variation_rows.define_rows(
        preset.model.replace(vocab_size=8000), preset.training.label_smoothing,
        variation_rows.INFORMATIVE_PLAN["groups"], plan="informative"), (2,))
    knobs = {r.name: (r.model.num_layers, r.model.d_model, r.model.num_heads,
                      r.model.key_dim, r.model.value_dim, r.model.dropout, r.label_smoothing,
                      r.model.position_encoding, r.seed) for r in rows}
    assert knobs == {
        "base": (3, 256, 4, 64, 64, 0.2, 0.1, "sinusoidal", None),
        "base, seed 2": (3, 256, 4, 64, 64, 0.2, 0.1, "sinusoidal", 2),
        "A: h=1": (3, 256, 1, 256, 256, 0.2, 0.1, "sinusoidal", None),
        "A: h=8": (3, 256, 8, 32, 32, 0.2, 0.1, "sinusoidal", None),
        "B: d_k=32": (3, 256, 4, 32, 64, 0.2, 0.1, "sinusoidal", None),
        "C: N=2": (2, 256, 4, 64, 64, 0.2, 0.1, "sinusoidal", None),
        "C: N=4": (4, 256, 4, 64, 64, 0.2, 0.1, "sinusoidal", None),
        "C: d_model=128": (3, 128, 4, 32, 32, 0.2, 0.1, "sinusoidal", None),
        "C: d_model=512": (3, 512, 4, 128, 128, 0.2, 0.1, "sinusoidal", None),
        "D: P_drop=0.0": (3, 256, 4, 64, 64, 0.0, 0.1, "sinusoidal", None),
        "D: P_drop=0.3": (3, 256, 4, 64, 64, 0.3, 0.1, "sinusoidal", None),
        "D: eps_ls=0.0": (3, 256, 4, 64, 64, 0.2, 0.0, "sinusoidal", None),
        "D: eps_ls=0.2": (3, 256, 4, 64, 64, 0.2, 0.2, "sinusoidal", None),
        "E: learned positions": (3, 256, 4, 64, 64, 0.2, 0.1, "learned", None),
    }
    with pytest.raises(ValueError, match="no big row"):
        variation_rows.define_rows(preset.model, 0.1, ("big",), plan="informative")
    with pytest.raises(ValueError, match="plan"):
        variation_rows.define_rows(preset.model, 0.1, plan="short")


def test_the_base_schedules_peak_worked_by_hand():
    # multi30k: scale 1, d_model 256, warm-up 1000: (256 * 1000)^-0.5 = 1 / 505.96.
    assert variations.base_schedule_peak("multi30k") == pytest.approx(1.97642e-3, rel=1e-5)
    # The study's changes count: the paper's base shape gives the paper's peak, 6.99e-4.
    assert variations.base_schedule_peak("multi30k", {"d_model": 512},
                                         {"warmup_steps": 4000}) == pytest.approx(
        6.9877e-4, rel=1e-4)  # (512 * 4000)^-0.5
    assert variations.base_schedule_peak("multi30k", {}, {"learning_rate_scale": 2.0}) == \
        pytest.approx(2 * 1.97642e-3, rel=1e-5)


@pytest.mark.parametrize("peak", [6.9877e-4, 1.97642e-3])
def test_every_row_peaks_at_the_studys_rate(peak):
    preset = get_preset("multi30k")
    rows = variation_rows.define_rows(preset.model.replace(vocab_size=8000), 0.1, ("C",),
                                  plan="informative")
    options = variations.StudyOptions(data_dir="d", out_dir="o", peak_learning_rate=peak,
                                      training_overrides={"warmup_steps": 400})
    for row in rows:  # d_model 128, 256 and 512
        changes = variations.row_training_overrides(row, options)
        schedule = TransformerSchedule(row.model.d_model, 400, changes["learning_rate_scale"])
        assert schedule.peak_learning_rate == pytest.approx(peak, rel=1e-6)
        assert float(schedule(399)) == pytest.approx(peak, rel=1e-4)  # step 400
    # Without a peak the preset's schedule is left alone; a seeded row trains its seed.
    seeded = variation_rows.with_base_seeds(rows, (7,))[1]
    plain = variations.row_training_overrides(seeded, variations.StudyOptions("d", "o"))
    assert plain == {"label_smoothing": 0.1, "seed": 7}


@pytest.mark.parametrize("difference, noise, direction, expected", [
    (+0.50, 0.20, "higher", "reproduced"),
    (-0.50, 0.20, "higher", "not reproduced"),
    (+0.15, 0.20, "higher", "within noise"),
    (-0.20, 0.20, "lower", "within noise"),   # a difference equal to the noise is noise
    (-0.21, 0.20, "lower", "reproduced"),
    (+0.10, 0.20, "same", "reproduced"),
    (-0.90, 0.20, "same", "not reproduced"),
    (+0.01, 0.00, "lower", "not reproduced"),  # one base seed: no noise to hide in
])
def test_verdict_rule(difference, noise, direction, expected):
    assert variation_verdicts.verdict(difference, noise, direction) == expected


def test_verdicts_compare_rows_with_the_mean_of_the_base_seeds(tmp_path):
    preset = get_preset("multi30k")
    rows = variation_rows.with_base_seeds(variation_rows.define_rows(
        preset.model.replace(vocab_size=8000), 0.1, ("A", "C", "D", "E"),
        plan="informative"), (2,))
    ppl = {"base": 10.0, "base, seed 2": 10.4, "A: h=1": 11.0, "A: h=8": 10.1,
           "C: N=2": 10.3, "C: N=4": 11.5, "C: d_model=128": 12.0, "C: d_model=512": 9.0,
           "D: P_drop=0.0": 9.0, "D: P_drop=0.3": 10.2, "D: eps_ls=0.0": 9.5,
           "D: eps_ls=0.2": 10.9, "E: learned positions": 10.25}
    results = [{"row": r.name, "group": r.group, "model": r.model.get_config(),
                "label_smoothing": r.label_smoothing, "dev_perplexity": ppl[r.name]}
               for r in rows]
    summary = variation_verdicts.verdicts(results)
    assert summary["base_perplexity"] == pytest.approx(10.2)
    assert summary["noise"] == pytest.approx(0.4)
    got = {v["row"]: (v["kind"], v["verdict"]) for v in summary["rows"]}
    assert got == {
        "A: h=1": ("A: fewer heads", "reproduced"),            # +0.8 > 0.4, paper higher
        "A: h=8": ("A: more heads", "reproduced"),             # -0.1, paper same
        "C: N=2": ("C: fewer layers", "within noise"),         # +0.1
        "C: N=4": ("C: more layers", "not reproduced"),        # +1.3, paper lower
        "C: d_model=128": ("C: narrower", "reproduced"),
        "C: d_model=512": ("C: wider", "reproduced"),
        "D: P_drop=0.0": ("D: no dropout", "not reproduced"),  # -1.2, paper higher
        "D: P_drop=0.3": ("D: more dropout", "reproduced"),    # 0.0, paper same
        "D: eps_ls=0.0": ("D: no label smoothing", "reproduced"),
        "D: eps_ls=0.2": ("D: more label smoothing", "reproduced"),
        "E: learned positions": ("E: learned positions", "reproduced"),
    }
    text = variation_verdicts.format_verdicts(summary)
    assert "Base dev PPL 10.20 (mean of 2 seed(s); spread 0.400, the noise)." in text
    assert "| C: N=4 | C: more layers | N=8: 4.88 | lower | +1.30 | not reproduced |" in text

    # The same study as a results/ file renders in the docs: 8 reproduced, 2 not, 1 within.
    import json

    from transformer_tf.evaluation import results_tables

    for r in results:
        r.update(steps=3000, dev_bleu=20.0, dev_nll_flattened_at_step=2500)
    options = variations.StudyOptions("d", "o", plan="informative", max_steps=3000,
                                      peak_learning_rate=6.9877e-4)
    document = variations.results_document(
        results, options, {"commit": "abc1234", "machine": "a CPU", "date": "2026-11-26"})
    path = tmp_path / "results" / "table3" / "informative.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(document))
    rendered = results_tables.render_document(
        "<!-- results:table table3/informative -->\n<!-- /results -->\n"
        "<!-- results:sentences table3/informative -->\n<!-- /results -->\n",
        tmp_path / "results")
    assert ("Compared with the paper's Table 3, 8 of 11 rows change dev perplexity in its "
            "direction, 2 the opposite way and 1 by no more than the base seeds' spread "
            "(0.400 PPL around 10.20).") in rendered
    assert "| C: N=4 | 4 | 256 | 4 | 64 | 0.2 | 0.1 | sinusoidal | 3,000 | 11.50 | 20.00 | " \
           "2,500 | N=8: 4.88 | not reproduced |" in rendered
    assert results_tables.headline(document) == "8 of 11 rows reproduce the paper's direction"


def test_the_informative_plan_from_the_command_line(tmp_path, monkeypatch, capsys):
    from transformer_tf.cli import variations as cli

    seen = []

    def fake_study(options, plan_only=False):
        seen.append(options)
        (tmp_path / "out").mkdir(exist_ok=True)
        (tmp_path / "out" / "variations.md").write_text("table\n")

    monkeypatch.setattr(variations, "run_study", fake_study)
    assert cli.main(["--plan", "informative", "--data", str(tmp_path), "--out",
                     str(tmp_path / "out"), "--quiet"]) == 0
    options = seen[-1]
    assert (options.plan, options.groups, options.max_steps, options.eval_every,
            options.extra_base_seeds) == ("informative", ("A", "B", "C", "D", "E"), 3000,
                                          250, (2, 3))
    assert options.peak_learning_rate == pytest.approx(1.97642e-3, rel=1e-5)  # the base's
    assert cli.main(["--plan", "informative", "--data", str(tmp_path), "--out",
                     str(tmp_path / "out"), "--rows", "A", "--max-steps", "40",
                     "--eval-every", "20", "--quiet"]) == 0
    assert (seen[-1].groups, seen[-1].max_steps, seen[-1].eval_every) == (("A",), 40, 20)
    # A wider base peaks lower, (512 * 1000)^-0.5; a rate given wins over the plan's.
    assert cli.main(["--plan", "informative", "--data", str(tmp_path), "--out",
                     str(tmp_path / "out"), "--model-option", "d_model=512", "--quiet"]) == 0
    assert seen[-1].peak_learning_rate == pytest.approx(1.39754e-3, rel=1e-5)
    assert cli.main(["--plan", "informative", "--data", str(tmp_path), "--out",
                     str(tmp_path / "out"), "--peak-learning-rate", "7e-4", "--alongside",
                     "a parse on core 0", "--quiet"]) == 0
    assert seen[-1].peak_learning_rate == 7e-4
    assert (seen[-1].alongside, seen[-2].alongside) == ("a parse on core 0", None)
    assert cli.main(["--data", str(tmp_path), "--out", str(tmp_path / "out"),
                     "--max-steps", "40", "--quiet"]) == 0
    assert seen[-1].peak_learning_rate is None  # the full plan: each row's own schedule
    with pytest.raises(SystemExit):  # the full plan has no default budget
        cli.main(["--data", str(tmp_path), "--out", str(tmp_path / "out")])
    assert "give --budget-minutes or --max-steps" in capsys.readouterr().err


def _written(tmp_path, name, document):
    """A results/ directory under tmp_path holding `document` as table3/NAME.json."""
    path = tmp_path / "results" / "table3" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return tmp_path / "results"


def test_a_study_part_way_lists_its_planned_rows_and_waits_for_the_base_seeds(tmp_path):
    """Before both base seeds are trained no row gets a verdict (their spread is the
    noise); the rows not trained yet are listed as such."""
    from transformer_tf.evaluation import results_tables

    preset = get_preset("multi30k")
    planned = variation_rows.with_base_seeds(variation_rows.define_rows(
        preset.model.replace(vocab_size=8000), 0.1, ("A", "C", "D", "E"),
        plan="informative"), (2,))
    by_name = {r.name: r for r in planned}

    def trained(name, ppl):
        row = by_name[name]
        return {"row": name, "group": row.group, "model": row.model.get_config(),
                "label_smoothing": row.label_smoothing, "dev_perplexity": ppl,
                "steps": 3000, "dev_bleu": 20.0}

    options = variations.StudyOptions("d", "o", plan="informative", max_steps=3000)
    provenance = {"commit": "abc1234", "machine": "a CPU", "date": "2026-11-28"}
    part = [trained("base", 10.0), trained("A: h=1", 12.0)]
    document = variations.results_document(part, options, provenance, planned)
    assert results_tables.headline(document) == f"2 of {len(planned)} rows trained"
    verdicts = {r["row"]: r["verdict"] for r in document["rows"]}
    assert verdicts["base"] is None and verdicts["A: h=1"] == variations.AWAITING_BASE
    assert verdicts["base, seed 2"] == variations.NOT_TRAINED
    assert sum(v == variations.NOT_TRAINED for v in verdicts.values()) == len(planned) - 2
    assert document["values"]["rows_compared"] == 0
    rendered = results_tables.render_document(
        "<!-- results:sentences table3/part -->\n<!-- /results -->\n", _written(
            tmp_path, "part", document))
    assert (f"The study has trained 2 of its {len(planned)} rows and 1 of its 2 base seeds: "
            "the verdicts wait for every base seed") in rendered
    # The base seeds alone: the noise is known, no row is compared yet.
    bases = [part[0], trained("base, seed 2", 10.4)]
    document = variations.results_document(bases, options, provenance, planned)
    assert results_tables.headline(document) == f"2 of {len(planned)} rows trained"
    rendered = results_tables.render_document(
        "<!-- results:sentences table3/bases -->\n<!-- /results -->\n", _written(
            tmp_path, "bases", document))
    assert (f"The study has trained 2 of its {len(planned)} rows, its 2 base seeds: their "
            "spread (0.400 PPL around 10.20) is the noise") in rendered
    # With the second base seed the verdicts come: h=1 is 1.8 above a mean of 10.2, beyond
    # the spread 0.4, in the paper's direction.
    part.append(trained("base, seed 2", 10.4))
    document = variations.results_document(part, options, provenance, planned)
    verdicts = {r["row"]: r["verdict"] for r in document["rows"]}
    assert verdicts["A: h=1"] == "reproduced"
    assert results_tables.headline(document) == "1 of 1 row reproduces the paper's direction"
    assert document["sentences"][0].endswith(
        "The study has trained {rows_trained} of its {rows_planned} rows.")
