"""The recipe study (jobs/recipe_study.py) with fake training and scoring: one row per
finished run written at once, a killed study resumes without redoing rows, the preset's
runs continue one directory per seed, gains are paired by seed for every arm, the file is a
results file."""
import json
import pathlib
import types

import pytest

from transformer_tf.presets import get_preset
from transformer_tf.evaluation import results_tables
from transformer_tf.jobs import recipe_study as study
from transformer_tf.rundir import model_dir as model_dir_lib

# Fake dev BLEU (latest, averaged) of each run.
BLEU = {("preset", 1000, 1): (30.0, 31.0), ("planned", 1000, 1): (31.5, 33.0),
        ("preset", 2000, 1): (36.0, 37.0), ("planned", 2000, 1): (36.5, 36.0),
        ("preset", 1000, 2): (29.0, 30.0), ("planned", 1000, 2): (30.0, 31.0),
        ("preset", 2000, 2): (35.0, 36.0), ("planned", 2000, 2): (37.0, 38.0),
        ("planned-inverse-sqrt", 1000, 1): (30.5, 30.0),
        ("planned-inverse-sqrt", 1000, 2): (29.5, 29.0),
        ("planned-inverse-sqrt", 2000, 1): (36.0, 36.5),
        ("planned-inverse-sqrt", 2000, 2): (35.5, 35.0),
        ("preset-half-batch", 1000, 1): (33.0, 34.0), ("preset-half-batch", 1000, 2): (32.0, 32.0),
        ("preset-half-batch", 2000, 1): (38.0, 38.5), ("preset-half-batch", 2000, 2): (37.5, 37.0)}


class Fakes:
    def __init__(self, options, fail_at=None):
        self.options, self.fail_at, self.trained = options, fail_at, []

    def train(self, arm, steps, seed, options):
        if (arm, steps, seed) == self.fail_at:
            raise KeyboardInterrupt  # the session is killed while training this run
        self.trained.append((arm, steps, seed))
        model_dir = study.run_directory(options.work_dir, arm, steps, seed)
        preset = get_preset("multi30k")
        model_dir_lib.write_run_config(model_dir, model_dir_lib.RunConfig(
            model=preset.model, training=preset.training, decoding=preset.decoding,
            data_dir="unused", preset="multi30k"))
        plan = {"passes": steps / 111.0} if arm != "preset" else None
        return types.SimpleNamespace(step=study.arm_steps(arm, steps),
                                     trained_seconds=60.0 * steps / 1000, recipe_plan=plan)

    def score(self, model_dir, options):
        latest, averaged = BLEU[self.trained[-1]]
        kept = "averaged" if averaged > latest else "latest"  # as the rule would, here
        return {"dev_bleu_latest": latest, "dev_nll_latest": 1.5, "dev_bleu_averaged": averaged,
                "dev_nll_averaged": 1.4, "averaged_checkpoints": 5, "kept": kept,
                "dev_bleu_kept": max(latest, averaged)}


def _options(tmp_path, **changes):
    return study.RecipeStudyOptions(data_dir=str(tmp_path), work_dir=str(tmp_path / "runs"),
                                    results=str(tmp_path / "results" / "recipe_study.json"),
                                    **changes)


def test_a_killed_study_keeps_its_rows_and_resumes(tmp_path):
    options = _options(tmp_path)
    killed = Fakes(options, fail_at=("planned", 1000, 1))
    with pytest.raises(KeyboardInterrupt):
        study.run_recipe_study(options, killed.train, killed.score, say=lambda _: None)
    written = json.loads((tmp_path / "results" / "recipe_study.json").read_text())
    assert [row["key"] for row in written["rows"]] == [
        "preset-1000-seed1", "preset-1000-seed2", "preset-half-batch-1000-seed1",
        "preset-half-batch-1000-seed2"]

    resumed = Fakes(options)
    document = study.run_recipe_study(options, resumed.train, resumed.score, say=lambda _: None)
    assert resumed.trained == [
        ("planned", 1000, 1), ("planned", 1000, 2),
        ("planned-inverse-sqrt", 1000, 1), ("planned-inverse-sqrt", 1000, 2),
        ("preset", 2000, 1), ("preset", 2000, 2),
        ("preset-half-batch", 2000, 1), ("preset-half-batch", 2000, 2),
        ("planned", 2000, 1), ("planned", 2000, 2),
        ("planned-inverse-sqrt", 2000, 1), ("planned-inverse-sqrt", 2000, 2)]
    assert len(document["rows"]) == 16
    # Paired by seed, planned - preset: averaged (33-31 + 31-30) / 2 = 1.5 at 1000 and
    # (36-37 + 38-36) / 2 = 0.5 at 2000; latest (1.5 + 1.0) / 2 and (0.5 + 2.0) / 2.
    # planned-inverse-sqrt - preset: averaged (30-31 + 29-30) / 2 = -1 and
    # (36.5-37 + 35-36) / 2 = -0.75; latest (0.5 + 0.5) / 2 and (0 + 0.5) / 2.
    # Kept (the better of the two here): planned (33-31 + 31-30) / 2 = 1.5 and
    # (36.5-37 + 38-36) / 2 = 0.75; planned-inverse-sqrt (30.5-31 + 29.5-30) / 2 = -0.5
    # and (36.5-37 + 35.5-36) / 2 = -0.5.
    # preset-half-batch (the better of the two kept): (34-31 + 32-30) / 2 = 2.5 and
    # (38.5-37 + 37.5-36) / 2 = 1.5; averaged 2.5 and 1.25; latest (3 + 3) / 2, (2 + 2.5) / 2.
    assert document["values"] == {
        "runs": 16,
        "gain_preset_half_batch_dev_bleu_kept_1000": 2.5,
        "gain_preset_half_batch_dev_bleu_kept_2000": 1.5,
        "gain_preset_half_batch_dev_bleu_averaged_1000": 2.5,
        "gain_preset_half_batch_dev_bleu_averaged_2000": 1.25,
        "gain_preset_half_batch_dev_bleu_latest_1000": 3.0,
        "gain_preset_half_batch_dev_bleu_latest_2000": 2.25,
        "seeds_preset_half_batch_dev_bleu_kept_1000": 2,
        "seeds_preset_half_batch_dev_bleu_kept_2000": 2,
        "gain_dev_bleu_kept_1000": 1.5, "gain_dev_bleu_kept_2000": 0.75,
        "gain_planned_inverse_sqrt_dev_bleu_kept_1000": -0.5,
        "gain_planned_inverse_sqrt_dev_bleu_kept_2000": -0.5,
        "seeds_dev_bleu_kept_1000": 2, "seeds_dev_bleu_kept_2000": 2,
        "seeds_planned_inverse_sqrt_dev_bleu_kept_1000": 2,
        "seeds_planned_inverse_sqrt_dev_bleu_kept_2000": 2,
        # The preset's kept BLEU: 31 and 30 at 1000, 37 and 36 at 2000.
        "spread_preset_dev_bleu_kept_1000": 1.0, "spread_preset_dev_bleu_kept_2000": 1.0,
        "gain_dev_bleu_averaged_1000": 1.5, "gain_dev_bleu_averaged_2000": 0.5,
        "gain_dev_bleu_latest_1000": 1.25, "gain_dev_bleu_latest_2000": 1.25,
        "gain_planned_inverse_sqrt_dev_bleu_averaged_1000": -1.0,
        "gain_planned_inverse_sqrt_dev_bleu_averaged_2000": -0.75,
        "gain_planned_inverse_sqrt_dev_bleu_latest_1000": 0.5,
        "gain_planned_inverse_sqrt_dev_bleu_latest_2000": 0.25}
    assert (results_tables.headline(document)
            == "planned minus preset recipe, dev BLEU of the checkpoint each keeps: +1.50 at "
               "1,000 steps, +0.75 at 2,000 steps")
    assert results_tables.render_sentences(tmp_path / "results", "recipe_study")[0].startswith(
        "At 1,000 steps, preset-half-batch (2,000 steps of 2,048 tokens) minus preset on "
        "the checkpoint each keeps: +2.50 dev BLEU, the mean of 2 seed(s); the preset's own "
        "seeds differ by 1.00. At 1,000 steps, planned minus preset")
    half = next(r for r in document["rows"] if r["key"] == "preset-half-batch-1000-seed1")
    assert half["steps"] == 2000  # twice the steps, the same target tokens
    row = next(r for r in document["rows"] if r["key"] == "planned-1000-seed1")
    assert (row["recipe"], row["passes"], row["dropout"], row["train_minutes"]) == (
        "planned", pytest.approx(1000 / 111), 0.2, 1.0)


def test_the_preset_recipe_continues_one_run_a_seed():
    assert study.run_directory("w", "preset", 1000, 1) == study.run_directory("w", "preset",
                                                                               2000, 1)
    assert (study.run_directory("w", "preset-half-batch", 1000, 1)
            == study.run_directory("w", "preset-half-batch", 2000, 1)
            != study.run_directory("w", "preset", 1000, 1))
    assert (study.arm_steps("preset-half-batch", 1000), study.arm_steps("preset", 1000)) == (
        2000, 1000)
    assert study.run_directory("w", "planned", 1000, 1) != study.run_directory("w", "planned",
                                                                                2000, 1)


def test_the_file_is_a_results_file_at_every_stage(tmp_path):
    options = _options(tmp_path, steps=(1000,), seeds=(1,))
    fakes = Fakes(options, fail_at=("planned", 1000, 1))
    with pytest.raises(KeyboardInterrupt):
        study.run_recipe_study(options, fakes.train, fakes.score, say=lambda _: None)
    data = results_tables.load(tmp_path / "results", "recipe_study")  # the required fields
    assert results_tables.headline(data) == "2 runs finished"  # no planned pair yet
    assert all(set(row) <= {c["key"] for c in data["columns"]} | {"key"}
               for row in data["rows"])
    assert results_tables.render_table(tmp_path / "results", "recipe_study")


def test_a_results_file_of_other_settings_is_not_resumed(tmp_path):
    options = _options(tmp_path, steps=(1000,), seeds=(1,))
    fakes = Fakes(options)
    study.run_recipe_study(options, fakes.train, fakes.score, say=lambda _: None)
    other = _options(tmp_path, steps=(1000,), seeds=(1,), beam_size=1)
    with pytest.raises(study.StudyMismatch, match="recipe_study.json: holds a study of other"):
        study.run_recipe_study(other, fakes.train, fakes.score, say=lambda _: None)


def test_a_study_resumes_from_another_checkout_given_the_same_data_path(tmp_path,
                                                                       monkeypatch):
    """The data directory is recorded as given (relative to where the command runs), not
    resolved: the committed file names no machine's path, and a fresh clone elsewhere
    continues it with the documented command."""
    here, there = tmp_path / "clone1", tmp_path / "clone2"
    for clone in (here, there):
        (clone / "runs" / "data").mkdir(parents=True)
    results = str(tmp_path / "recipe_study.json")
    options = study.RecipeStudyOptions(data_dir="runs/data", work_dir="runs/recipe",
                                       results=results, steps=(1000,), seeds=(1,))
    monkeypatch.chdir(here)
    fakes = Fakes(options)
    study.run_recipe_study(options, fakes.train, fakes.score, say=lambda _: None)
    recorded = json.loads(pathlib.Path(results).read_text())["study"]
    assert recorded["data_dir"] == "runs/data"
    monkeypatch.chdir(there)
    study.run_recipe_study(options, fakes.train, fakes.score, say=lambda _: None)


def test_arms_can_be_chosen_and_unknown_ones_are_refused(tmp_path):
    options = _options(tmp_path, steps=(1000,), seeds=(1,), arms=("preset", "planned"))
    fakes = Fakes(options)
    document = study.run_recipe_study(options, fakes.train, fakes.score, say=lambda _: None)
    assert fakes.trained == [("preset", 1000, 1), ("planned", 1000, 1)]
    assert document["values"]["gain_dev_bleu_kept_1000"] == 2.0  # 33 - 31
    assert document["values"]["seeds_dev_bleu_kept_1000"] == 1
    with pytest.raises(ValueError, match="unknown \\['fast'\\]"):
        study.run_recipe_study(_options(tmp_path, arms=("fast",)), fakes.train, fakes.score,
                               say=lambda _: None)


def test_every_arm_of_a_budget_trains_on_the_same_target_tokens(tmp_path, monkeypatch):
    # The budget counts steps of 4,096 tokens whatever the preset's own batch is now, so a
    # study's rows stay comparable when the preset changes.
    from transformer_tf.training import fit

    seen = {}
    monkeypatch.setattr(fit, "train", lambda options: seen.setdefault(
        pathlib.Path(options.model_dir).name, options))
    for arm in study.ARMS:
        study._train_run(arm, 1000, 1, _options(tmp_path))
    tokens = {name: (o.training_overrides["tokens_per_batch"], o.max_steps)
              for name, o in seen.items()}
    assert tokens == {"preset-seed1": (4096, 1000), "preset-half-batch-seed1": (2048, 2000),
                      "planned-1000-seed1": (4096, 1000),
                      "planned-inverse-sqrt-1000-seed1": (4096, 1000)}
    assert seen["planned-inverse-sqrt-1000-seed1"].training_overrides["lr_schedule"] == (
        "inverse_sqrt")
