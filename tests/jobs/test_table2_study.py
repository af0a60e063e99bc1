"""The budget-fair Table 2 study (jobs/table2_study.py): its columns by hand, and the study
with fake training and scoring over a real prepared directory: rows written as runs
finish, a killed study resumes without redoing them, the figure is drawn from the runs'
validation logs, the results file renders in the docs."""
import dataclasses
import json
import pathlib
import re
import types

import numpy as np
import pytest

from transformer_tf.evaluation import results_tables
from transformer_tf.jobs import table2_study as study
from transformer_tf.presets import get_preset, register_preset, unregister_preset
from transformer_tf.rundir import model_dir as model_dir_lib
from transformer_tf.rundir.validation_log import (
    ValidationRecord,
    append_validation,
    read_validation_log,
)
from transformer_tf.runtime.provenance import WHERE_KEYS

# Fake test BLEU of each (arm, preset, seed).
BLEU = {("time", "multi30k", 1): 30.0, ("time", "convs2s_multi30k", 1): 27.0,
        ("tokens", "multi30k", 1): 33.0, ("tokens", "convs2s_multi30k", 1): 31.0,
        ("time", "multi30k", 2): 31.0, ("time", "convs2s_multi30k", 2): 26.0,
        ("tokens", "multi30k", 2): 34.5, ("tokens", "convs2s_multi30k", 2): 30.0}


def test_training_columns_by_hand():
    # 150 steps of a 50-step pass holding 1,000,000 target tokens: 3 passes, 3 M tokens;
    # at 0.04 GFLOP per token, 3e6 x 0.04e9 = 1.2e14 FLOP = 0.12 PFLOP.
    columns = study.training_columns(150, {"batches": 50, "target_tokens": 1_000_000}, 0.04)
    assert columns == pytest.approx({"passes": 3.0, "target_tokens_millions": 3.0,
                                     "training_pflop": 0.12})
    assert study.training_columns(25, {"batches": 50, "target_tokens": 10}, None)[
        "training_pflop"] is None


def test_curve_points_by_arm_and_a_redone_step_keeps_the_later_evaluation():
    records = [ValidationRecord(100, 120.0, 5.0, 4.0), ValidationRecord(200, 240.0, 9.0, 3.5),
               ValidationRecord(200, 250.0, 9.5, 3.4), ValidationRecord(300, 360.0, 12.0, 3.0)]
    assert study.curve_points(records, "time", 50) == ((2.0, 5.0), (250 / 60, 9.5), (6.0, 12.0))
    assert study.curve_points(records, "tokens", 50) == ((2.0, 5.0), (4.0, 9.5), (6.0, 12.0))


def test_pass_size_counts_the_batches_and_real_target_tokens_of_one_pass(tiny_multi30k):
    from transformer_tf.config import PAD_ID
    from transformer_tf.data.datasets import make_training_dataset

    size = study.pass_size(str(tiny_multi30k.directory), "convs2s_tiny", "float32")
    training = get_preset("convs2s_tiny").training
    batches = list(make_training_dataset(
        tiny_multi30k, "train", tokens_per_batch=training.tokens_per_batch,
        max_length=training.max_length, shuffle=False, repeat=False))
    assert size["batches"] == len(batches) > 1
    assert size["target_tokens"] == sum(int(np.sum(b[1].numpy() != PAD_ID)) for b in batches)
    # Every training pair within the length filter once: at least one token (EOS) each.
    assert size["target_tokens"] >= 400


def test_pass_size_batches_as_the_preset_trains_in_the_precision(tiny_multi30k):
    """A preset whose batch differs in mixed precision is counted with that batch."""
    from transformer_tf.data.datasets import make_training_dataset

    tiny = get_preset("tiny")
    register_preset("tiny_mixed_batch", dataclasses.replace(
        tiny, mixed_precision_training={"tokens_per_batch": 4 * tiny.training.tokens_per_batch}))
    try:
        data = str(tiny_multi30k.directory)
        in_float32 = study.pass_size(data, "tiny_mixed_batch", "float32")
        in_mixed = study.pass_size(data, "tiny_mixed_batch", "mixed_bfloat16")
    finally:
        unregister_preset("tiny_mixed_batch")
    assert in_float32 == study.pass_size(data, "tiny", "float32")
    larger = list(make_training_dataset(
        tiny_multi30k, "train", tokens_per_batch=4 * tiny.training.tokens_per_batch,
        max_length=tiny.training.max_length, shuffle=False, repeat=False))
    assert in_mixed["batches"] == len(larger) < in_float32["batches"]
    assert in_mixed["target_tokens"] == in_float32["target_tokens"]  # the same pairs

class Fakes:
    def __init__(self, fail_at=None):
        self.fail_at, self.trained = fail_at, []

    def train(self, arm, preset_name, seed, options):
        if (arm, preset_name, seed) == self.fail_at:
            raise KeyboardInterrupt  # the session is killed while training this run
        self.trained.append((arm, preset_name, seed))
        model_dir = study.run_directory(options.work_dir, arm, preset_name, seed)
        preset = get_preset(preset_name)
        model_dir_lib.write_run_config(model_dir, model_dir_lib.RunConfig(
            model=preset.model, training=preset.training, decoding=preset.decoding,
            data_dir="unused", preset=preset_name, family=preset.family))
        final = BLEU[(arm, preset_name, seed)]
        for step in (10, 20, 30):
            append_validation(model_dir, ValidationRecord(step, step * 6.0, final * step / 30,
                                                          2.0))
        return types.SimpleNamespace(step=30, trained_seconds=180.0, stopped_by="time")

    def score(self, model_dir, options):
        arm, preset_name, seed = self.trained[-1]
        return {"test_bleu": BLEU[(arm, preset_name, seed)] + 0.5, "decoding": "fake"}


def _options(tmp_path, data_dir, **changes):
    return study.Table2Options(data_dir=str(data_dir), work_dir=str(tmp_path / "runs"),
                               results=str(tmp_path / "results" / "table2" / "fair.json"),
                               figure=str(tmp_path / "curves.png"), minutes=3.0,
                               passes=2.0, **changes)


def _flops(preset_name, vocab_size):
    return {"multi30k": 4.0e7, "convs2s_multi30k": 3.0e7}[preset_name]


# Pass sizes by hand (counting the data is tested above): 12 and 10 steps per pass.
SIZES = {"multi30k": {"batches": 12, "target_tokens": 6000},
         "convs2s_multi30k": {"batches": 10, "target_tokens": 6000}}


@pytest.fixture
def known_pass_sizes(monkeypatch):
    counted = []
    monkeypatch.setattr(study, "pass_size", lambda data_dir, preset, precision:
                        counted.append(preset) or SIZES[preset])
    return counted


def test_a_killed_study_keeps_its_rows_resumes_and_renders(tmp_path, tiny_multi30k,
                                                           known_pass_sizes):
    options = _options(tmp_path, tiny_multi30k.directory)
    killed = Fakes(fail_at=("tokens", "multi30k", 1))
    with pytest.raises(KeyboardInterrupt):
        study.run_table2_study(options, _flops, killed.train, killed.score,
                               say=lambda _: None)
    path = tmp_path / "results" / "table2" / "fair.json"
    written = json.loads(path.read_text())
    assert [r["key"] for r in written["rows"]] == ["time-multi30k-seed1",
                                                   "time-convs2s_multi30k-seed1"]
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # One seed of each family: no spread to state.
    assert [s.format(**written["values"]) for s in written["sentences"]] == [
        "After 3 minutes of training, test BLEU: Transformer 30.50 (one seed) against "
        "ConvS2S 27.50 (one seed): Transformer ahead by 3.00 BLEU, in 1 of 1 seeds."]

    assert known_pass_sizes == ["multi30k", "convs2s_multi30k"]
    resumed = Fakes()
    document = study.run_table2_study(options, _flops, resumed.train, resumed.score,
                                      say=lambda _: None)
    assert ("time", "multi30k", 1) not in resumed.trained and len(resumed.trained) == 6
    assert len(known_pass_sizes) == 2  # recorded in the results file, not counted again
    rows = {r["key"]: r for r in document["rows"]}
    assert len(rows) == 8
    row = rows["tokens-convs2s_multi30k-seed2"]
    # 30 steps of 10 per pass: 3 passes of 6,000 tokens = 18,000 tokens x 3e7 FLOP.
    assert row["passes"] == pytest.approx(3.0)
    assert row["target_tokens_millions"] == pytest.approx(0.018)
    assert row["gflop_per_target_token"] == pytest.approx(0.03)
    assert row["training_pflop"] == pytest.approx(18_000 * 3.0e7 / 1e15)
    assert (row["family"], row["dev_bleu_last"], row["test_bleu"]) == ("convs2s", 30.0, 30.5)
    values = document["values"]
    # Time arm, Transformer: test BLEU 30.5 and 31.5 -> mean 31.0, spread 1.0.
    assert values["time_transformer_test_bleu_mean"] == pytest.approx(31.0)
    assert values["time_transformer_test_bleu_spread"] == pytest.approx(1.0)
    assert values["tokens_convs2s_test_bleu_mean"] == pytest.approx(31.0)
    # The file renders as a table, a headline and sentences in the docs' format.
    results_dir = tmp_path / "results"
    text = results_tables.render_document(
        "<!-- results:table table2/fair -->\n<!-- /results -->\n"
        "<!-- results:sentences table2/fair -->\n<!-- /results -->\n", results_dir)
    assert "| tokens | convs2s | 2 | 30 |" in text
    # Seed 1: 30.5 vs 27.5, seed 2: 31.5 vs 26.5: a gap of 4.0 > both spreads of 1.0.
    assert ("After 3 minutes of training, test BLEU: Transformer 31.00 (mean of 2 seeds, "
            "spread 1.00) against ConvS2S 27.00 (mean of 2 seeds, spread 1.00): Transformer "
            "ahead by 4.00 BLEU, in 2 of 2 seeds, more than either family's seed "
            "spread.") in text
    assert results_tables.headline(document).startswith("time: Transformer 31.00 vs ConvS2S")
    # Curves come from the validation logs the runs wrote.
    records = read_validation_log(study.run_directory(options.work_dir, "time", "multi30k", 2))
    assert study.curve_points(records, "time", 1.0)[-1] == (3.0, 31.0)


def test_a_study_of_other_settings_or_presets_is_refused(tmp_path, tiny_multi30k,
                                                        known_pass_sizes):
    options = _options(tmp_path, tiny_multi30k.directory, arms=("time",), seeds=(1,))
    fakes = Fakes()
    study.run_table2_study(options, None, fakes.train, fakes.score, say=lambda _: None)
    with pytest.raises(study.StudyMismatch, match="other settings"):
        study.run_table2_study(_options(tmp_path, tiny_multi30k.directory, arms=("time",),
                                        seeds=(1,), eval_every=50),
                               None, fakes.train, fakes.score, say=lambda _: None)
    with pytest.raises(ValueError, match="one Transformer and one ConvS2S"):
        study.run_table2_study(_options(tmp_path / "b", tiny_multi30k.directory,
                                        presets=("multi30k", "tiny")),
                               None, fakes.train, fakes.score, say=lambda _: None)
    with pytest.raises(ValueError, match="arms"):
        study.run_table2_study(_options(tmp_path / "c", tiny_multi30k.directory,
                                        arms=("flops",)),
                               None, fakes.train, fakes.score, say=lambda _: None)


def test_the_library_default_precision_is_recorded_resolved(tmp_path, tiny_multi30k,
                                                            known_pass_sizes, monkeypatch):
    """Options built in Python (precision "auto" by default) are recorded as the CPU
    resolves them, so a resume where "auto" resolves otherwise is refused."""
    from transformer_tf.training import precision as precision_lib

    monkeypatch.setattr(precision_lib, "resolve_precision",
                        lambda wanted: ("mixed_bfloat16" if wanted == "auto" else wanted, "test"))
    options = _options(tmp_path, tiny_multi30k.directory, arms=("time",), seeds=(1,))
    assert options.precision == "auto"
    fakes = Fakes()
    document = study.run_table2_study(options, None, fakes.train, fakes.score,
                                      say=lambda _: None)
    assert document["study"]["precision"] == "mixed_bfloat16"
    monkeypatch.setattr(precision_lib, "resolve_precision",
                        lambda wanted: ("float32" if wanted == "auto" else wanted, "test"))
    with pytest.raises(study.StudyMismatch, match="other settings"):
        study.run_table2_study(options, None, fakes.train, fakes.score, say=lambda _: None)


def test_two_processes_share_the_file_and_a_fresh_clone_continues(tmp_path, tiny_multi30k,
                                                                   known_pass_sizes):
    """One process per family (`train_only`) writes the same results file; a study
    continued with another work directory (a fresh clone: no run directories) keeps every
    run and draws them all from the curves the rows keep."""
    options = _options(tmp_path, tiny_multi30k.directory, arms=("time",), seeds=(1,))
    transformer, convs2s = Fakes(), Fakes()
    study.run_table2_study(dataclasses.replace(options, train_only=("multi30k",),
                                               alongside="the ConvS2S runs on core 1"),
                           _flops, transformer.train, transformer.score, say=lambda _: None)
    document = study.run_table2_study(
        dataclasses.replace(options, train_only=("convs2s_multi30k",),
                            alongside="the Transformer runs on core 0"), _flops,
        convs2s.train, convs2s.score, say=lambda _: None)
    assert transformer.trained == [("time", "multi30k", 1)]
    assert convs2s.trained == [("time", "convs2s_multi30k", 1)]
    assert [r["key"] for r in document["rows"]] == ["time-multi30k-seed1",
                                                    "time-convs2s_multi30k-seed1"]
    # Each run keeps its dev curve (minutes, BLEU) beside its row, which names where it
    # was trained and holds its columns only.
    row = document["rows"][0]
    details = document["run_details"]["time-multi30k-seed1"]
    assert details["curve"] == [[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]]
    assert details["stopped_by"] == "time" and "load_average_at_start" in details
    assert row["trained_on"] and row["trained_at_commit"]
    known = {c["key"] for c in document["columns"]} | {"key"} | set(WHERE_KEYS)
    assert all(set(r) <= known for r in document["rows"])
    assert document["conditions"].endswith(
        "; runs alongside: the ConvS2S runs on core 1 (time-multi30k-seed1); the Transformer "
        "runs on core 0 (time-convs2s_multi30k-seed1); every run on the machine named")
    # A fresh clone: no run directories, a new figure; nothing is trained again.
    fresh = dataclasses.replace(options, work_dir=str(tmp_path / "fresh"),
                                figure=str(tmp_path / "fresh.png"), seeds=(1,))
    again = Fakes()
    document = study.run_table2_study(fresh, _flops, again.train, again.score,
                                      say=lambda _: None)
    assert again.trained == [] and len(document["rows"]) == 2
    rows = [{**r, **document["run_details"][r["key"]]} for r in document["rows"]]
    study.draw_figure(rows, fresh)
    assert (tmp_path / "fresh.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_new_study_refuses_an_existing_figure_and_a_resumed_one_redraws_its_own(
        tmp_path, tiny_multi30k, known_pass_sizes):
    """A new study (no results file yet) whose figure path holds a file, e.g. another CPU
    kind's study's committed figure, is refused before anything is trained or counted; a
    resumed study redraws the figure its results file records, and no other file."""
    theirs = tmp_path / "curves.png"
    theirs.write_bytes(b"the figure of another study")
    options = _options(tmp_path, tiny_multi30k.directory, arms=("time",), seeds=(1,))
    assert options.figure == str(theirs)
    fakes = Fakes()
    with pytest.raises(study.FigureInUse, match=f"{re.escape(str(theirs))}: exists.*"
                                                "new study.*another --figure"):
        study.run_table2_study(options, None, fakes.train, fakes.score, say=lambda _: None)
    assert fakes.trained == [] and known_pass_sizes == []
    assert theirs.read_bytes() == b"the figure of another study"
    assert not pathlib.Path(options.results).exists()

    ours = tmp_path / "ours.png"
    options = dataclasses.replace(options, figure=str(ours))
    killed = Fakes(fail_at=("time", "convs2s_multi30k", 1))
    with pytest.raises(KeyboardInterrupt):
        study.run_table2_study(options, None, killed.train, killed.score, say=lambda _: None)
    drawn = ours.read_bytes()
    assert drawn[:8] == b"\x89PNG\r\n\x1a\n"
    # Resumed with the other study's figure: refused too, as that file is not this one's.
    resumed = Fakes()
    with pytest.raises(study.FigureInUse, match=re.escape(f"records {ours}")):
        study.run_table2_study(dataclasses.replace(options, figure=str(theirs)), None,
                               resumed.train, resumed.score, say=lambda _: None)
    assert resumed.trained == [] and theirs.read_bytes() == b"the figure of another study"
    study.run_table2_study(options, None, resumed.train, resumed.score, say=lambda _: None)
    assert resumed.trained == [("time", "convs2s_multi30k", 1)]
    redrawn = ours.read_bytes()
    assert redrawn[:8] == b"\x89PNG\r\n\x1a\n" and redrawn != drawn  # both runs now


def _row(arm, family, seed, bleu):
    return {"arm": arm, "family": family, "seed": seed, "test_bleu": bleu,
            "target_tokens_per_second": None}


def test_the_gap_its_leader_and_the_seeds_it_leads_by_hand():
    options = study.Table2Options(data_dir="d", work_dir="w", results="r", figure="f")
    # time: ConvS2S 30, 32 (mean 31, spread 2) against Transformer 31, 29.5 (mean 30.25,
    # spread 1.5): ConvS2S ahead by 0.75 in seed 2 only (30 < 31 in seed 1), within 2.
    # tokens: Transformer 34, 36 against ConvS2S 33 (seed 1 only): ahead by 2.0, 1 of 1.
    rows = [_row("time", "convs2s", 1, 30.0), _row("time", "convs2s", 2, 32.0),
            _row("time", "transformer", 1, 31.0), _row("time", "transformer", 2, 29.5),
            _row("tokens", "transformer", 1, 34.0), _row("tokens", "transformer", 2, 36.0),
            _row("tokens", "convs2s", 1, 33.0)]
    values = study.summary_values(rows)
    assert (values["time_gap_bleu"], values["time_leader"], values["time_paired_seeds"],
            values["time_leader_ahead_seeds"]) == (0.75, "convs2s", 2, 1)
    assert (values["tokens_gap_bleu"], values["tokens_leader"], values["tokens_paired_seeds"],
            values["tokens_leader_ahead_seeds"]) == (2.0, "transformer", 1, 1)
    assert [s.format(**values) for s in study.findings(values, options)] == [
        "After 90 minutes of training, test BLEU: Transformer 30.25 (mean of 2 seeds, spread "
        "1.50) against ConvS2S 31.00 (mean of 2 seeds, spread 2.00): ConvS2S ahead by 0.75 "
        "BLEU, in 1 of 2 seeds, within the larger seed spread.",
        "After 20 passes over the same training data, test BLEU: Transformer 35.00 (mean of 2 "
        "seeds, spread 2.00) against ConvS2S 33.00 (one seed): Transformer ahead by 2.00 "
        "BLEU, in 1 of 1 seeds."]
    # Equal means: no family ahead; one family alone in an arm: no gap for that arm.
    tie = study.summary_values([_row("time", "convs2s", 1, 30.0),
                                _row("time", "transformer", 1, 30.0),
                                _row("tokens", "transformer", 1, 30.0)])
    assert tie["time_leader"] == "neither" and "tokens_leader" not in tie
    assert study.findings(tie, options)[0].endswith(": no gap between the means.")


def test_a_finished_study_run_again_brings_the_summary_up_to_date(
        tmp_path, tiny_multi30k, known_pass_sizes):
    """A results file whose summary an earlier version of the code wrote is rewritten by
    the same command, which trains nothing; one already up to date, and its figure, are
    left as they are."""
    options = _options(tmp_path, tiny_multi30k.directory, arms=("time",), seeds=(1,))
    first = Fakes()
    study.run_table2_study(options, None, first.train, first.score, say=lambda _: None)
    path, figure = pathlib.Path(options.results), pathlib.Path(options.figure)
    current, drawn = path.read_text(), figure.read_bytes()
    older = json.loads(current)
    older["sentences"] = ["After 3 minutes of training: an older summary."]
    del older["values"]["time_leader"]
    path.write_text(json.dumps(older, indent=1) + "\n")
    figure.write_bytes(b"stale")
    again = Fakes()
    study.run_table2_study(options, None, again.train, again.score, say=lambda _: None)
    assert again.trained == [] and path.read_text() == current
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    figure.write_bytes(drawn + b"untouched")
    study.run_table2_study(options, None, again.train, again.score, say=lambda _: None)
    assert path.read_text() == current and figure.read_bytes() == drawn + b"untouched"


def test_a_process_given_one_arm_keeps_the_other_arms_panel(tmp_path, monkeypatch):
    """Two processes of one study, one run with --arms time and one with --arms tokens,
    each redraw the figure after their runs: each drawing has both arms' finished runs."""
    from transformer_tf.visualization import curves

    drawn = []
    monkeypatch.setattr(curves, "save_curves_png",
                        lambda panels, path, title="": drawn.append(panels))
    rows = [{"arm": "time", "family": "transformer", "seed": 1, "curve": [[1.0, 5.0]]},
            {"arm": "tokens", "family": "convs2s", "seed": 2, "curve": [[0.5, 4.0]]}]
    for arms in (("time",), ("tokens",)):
        study.draw_figure(rows, _options(tmp_path, "unused", arms=arms))
    for panels in drawn:
        assert [p.title for p in panels] == ["Equal training time", "Equal target tokens"]
        assert [[(c.family, c.seed, c.points) for c in p.curves] for p in panels] == [
            [("transformer", 1, ((1.0, 5.0),))], [("convs2s", 2, ((0.5, 4.0),))]]
    # A process whose arm has no finished run yet still draws its (empty) panel.
    study.draw_figure(rows[:1], _options(tmp_path, "unused", arms=("tokens",)))
    assert [p.title for p in drawn[-1]] == ["Equal training time", "Equal target tokens"]
    assert drawn[-1][1].curves == ()


SCRIPT_OPTIONS = r"""
import json, sys
sys.path.insert(0, "bench")
import table2_study as script
from transformer_tf.jobs import table2_study as study

def record(options, **_):
    print("OPTIONS " + json.dumps({"precision": options.precision,
                                   "results": options.results}))
    return {"headline": "", "values": {}}

study.run_table2_study = record
script.main(["--data", "d", "--work-dir", "w", "--quiet", *sys.argv[1:]])
"""


@pytest.mark.parametrize("flags", [[], ["--precision", "float32"]])
def test_the_script_records_the_precision_it_resolved_and_names_the_cpu_kind(flags):
    """`auto` is resolved before the study records it (a resume elsewhere that resolves
    otherwise is then refused); the default results file is named by the CPU's kind."""
    import pathlib
    import subprocess
    import sys

    from transformer_tf.runtime.cpu import cpu_kind, has_native_bfloat16, read_cpu_flags

    repo = pathlib.Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", SCRIPT_OPTIONS, *flags], cwd=repo,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("OPTIONS "))
    options = json.loads(line.removeprefix("OPTIONS "))
    flags_here = read_cpu_flags()
    expected = ("float32" if flags or not has_native_bfloat16(flags_here)
                else "mixed_bfloat16")
    assert options["precision"] == expected
    kind = {"AVX512-BF16": "avx512bf16", "AVX2": "avx2", "AMX": "amx",
            "AVX-512": "avx512", "other": "other"}[cpu_kind(flags_here)]
    assert options["results"] == f"results/table2/budget-fair-{kind}.json"
