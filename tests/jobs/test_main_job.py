"""The main job end to end on a small budget: every artefact is produced and consistent."""
import json
import os
import pathlib
import subprocess
import sys

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_main_job_produces_every_artefact(shared_data_dir, tmp_path):
    work, saved = tmp_path / "work", tmp_path / "saved_models"
    command = [sys.executable, str(REPO / "scripts" / "main_job.py"), "--work-dir", str(work),
               "--saved-models-dir", str(saved), "--preset", "tiny", "--vocab-size", "500",
               "--train-minutes", "0", "--max-steps", "24", "--eval-every", "12",
               "--training-option", "checkpoint_every_steps=2",
               "--average-last", "3", "--test-limit", "12", "--dev-limit", "24",
               "--validation-sentences", "16", "--beam-size", "2", "--recipe", "planned",
               "--quiet"]
    env = {"TRANSFORMER_TF_DATA": str(shared_data_dir), "PATH": "/usr/bin:/bin",
           "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]

    summary = json.loads((work / "summary.json").read_text())
    paths = summary["paths"]
    assert summary["train_steps"] == 24
    # --beam-size 2 given: alpha chosen on the dev set from 0.6, 1.0 and 1.4, the argmax.
    assert (summary["family"], summary["beam_size"]) == ("transformer", 2)
    tried = {row["alpha"]: row["dev_bleu"] for row in summary["decoding_scores"]}
    assert sorted(tried) == [0.6, 1.0, 1.4] and tried[summary["alpha"]] == max(tried.values())
    assert summary["decoding_reason"] in result.stdout
    exported = json.loads((pathlib.Path(summary["paths"]["saved_model"]) / "assets.extra"
                           / "transformer_tf.json").read_text())["decoding"]
    assert (exported["beam_size"], exported["alpha"]) == (2, summary["alpha"])
    recorded = json.loads((work / "model" / "chosen_decoding.json").read_text())
    assert (recorded["beam_size"], recorded["alpha"]) == (2, summary["alpha"])
    # Validation every 12 steps, logged; the best by dev BLEU kept apart.
    rows = [json.loads(line) for line in
            pathlib.Path(summary["paths"]["validation_log"]).read_text().splitlines()]
    assert [row["step"] for row in rows] == [12, 24]
    best = summary["best_checkpoint"]
    assert best["dev_bleu"] == max(row["dev_bleu"] for row in rows)
    assert pathlib.Path(best["checkpoint"] + ".index").exists()
    assert summary["stopped_by"] == "steps" and summary["stop_reason"] in result.stdout
    assert (work / "data" / "prepared.json").exists() and (work / "data" / "bpe.model").exists()
    checkpoints = sorted((work / "model" / "checkpoints").glob("ckpt-*.index"))
    assert len(checkpoints) >= 3 and (work / "model" / "checkpoints" / "ckpt-24.index").exists()
    # Only the last 20% of 24 steps (>= 19.2) may be averaged: the newest 3 saved there
    # (every 2 steps) are, and the average is scored against the latest on the dev set.
    averaged = [int(pathlib.Path(p).name.split("-")[1]) for p in summary["averaged_checkpoints"]]
    assert averaged == [20, 22, 24]
    names = [score["name"] for score in summary["dev_scores"]]
    assert names == ["latest", "averaged"] + (["best"] if best["step"] != 24 else [])
    # The rule (inference/selection.py): each candidate in turn against the one kept so far;
    # BLEU decides beyond the dev set's noise, NLL within it.
    reason = summary["choice_reason"]
    steps = reason.split("; then ")
    assert len(steps) == len(names) - 1
    kept = summary["dev_scores"][0]
    for challenger, step in zip(summary["dev_scores"][1:], steps):
        if "beyond noise" in step:
            kept = max(kept, challenger, key=lambda score: score["bleu"])
        else:
            assert "within noise" in step
            kept = challenger if challenger["nll"] < kept["nll"] else kept
        assert f"decides, {kept['name']}" in step
    assert summary["chosen"] == kept["name"]
    assert reason in result.stdout
    assert pathlib.Path(paths["chosen_checkpoint"] + ".index").exists()
    assert summary["precision"] in ("float32", "mixed_bfloat16")
    assert set(summary["stage_seconds"]) == {"prepare", "train", "average_and_select",
                                             "choose_decoding", "test_decode_and_score",
                                             "export", "serve_demo"}
    hypotheses = pathlib.Path(paths["hypotheses"]).read_text().split("\n")[:-1]
    assert len(hypotheses) == 12
    scores = json.loads(pathlib.Path(paths["scores"]).read_text())
    assert {"bleu", "chrf", "signature", "bleu_paper_tokenized",
            "bleu_lowercase_tokenized"} <= set(scores)
    assert scores["signature"].startswith("nrefs:1|case:mixed")
    saved_model = pathlib.Path(paths["saved_model"])
    assert saved_model == saved / "work" / "1"  # named after the run directory
    assert (saved_model / "saved_model.pb").exists()
    assert len(summary["demo_translations"]) == 3
    validation = EventAccumulator(str(work / "model" / "logs" / "validation"))
    validation.Reload()
    tags = validation.Tags()["tensors"]
    assert {"loss", "token_accuracy", "bleu", "examples"} <= set(tags)
    assert [event.step for event in validation.Tensors("bleu")] == [12, 24]
    assert "SavedModel" in result.stdout and "sacreBLEU" in result.stdout
    # The planned recipe: planned from the step budget, recorded in the run
    # directory and the summary, stated in the log; the user's checkpoint period stands.
    plan = summary["recipe_plan"]
    assert plan == json.loads((work / "model" / "recipe_plan.json").read_text())
    assert (plan["budget"], plan["budget_steps"], plan["planned_steps"]) == ("steps", 24, 24)
    assert plan["kept"] == {"checkpoint_every_steps": 2}
    assert "checkpoint_every_steps" not in plan["settings"]
    run_config = json.loads((work / "model" / "run_config.json").read_text())
    assert run_config["model"]["dropout"] == plan["settings"]["dropout"]
    assert run_config["training"]["warmup_steps"] == plan["settings"]["warmup_steps"]
    assert "recipe planned for ~24 steps from a plan of 24 steps" in result.stdout
    assert f"kept {summary['chosen']}" in result.stdout


def test_runs_of_other_presets_get_their_own_directory_and_export():
    from transformer_tf.jobs.main_job import MainJobOptions, _resolved_work_dir

    assert _resolved_work_dir(MainJobOptions()) == pathlib.Path("runs/multi30k_en_de")
    convs2s = _resolved_work_dir(MainJobOptions(preset="convs2s_multi30k", target_language="fr"))
    assert convs2s == pathlib.Path("runs/multi30k_en_fr_convs2s_multi30k")
    given = _resolved_work_dir(MainJobOptions(preset="tiny", work_dir="x/y"))
    assert given == pathlib.Path("x/y")


@pytest.mark.parametrize("job", ["main", "parse"])
def test_a_work_dir_holding_another_s_files_is_refused_at_once(job, tmp_path):
    """The jobs write fixed names at the top of their work directory after training: in
    a directory that holds no run yet, files of those names are someone else's and are
    refused before anything is prepared or trained; in the job's own directory (a run
    in model/) they are its outputs, rewritten by a new run of the job."""
    from transformer_tf.jobs import main_job, parse_job
    from transformer_tf.jobs.stages import check_work_dir

    work = tmp_path / "work"
    work.mkdir()
    held = {"main": "test.hyp.de", "parse": "valid.greedy.latest.trees"}[job]
    (work / held).write_text("mine\n")
    (work / "notes.txt").write_text("mine too\n")
    with pytest.raises(FileExistsError, match=rf"^{work / held}: already there"):
        if job == "main":
            main_job.run_main_job(main_job.MainJobOptions(
                work_dir=str(work), saved_models_dir=str(tmp_path / "saved")))
        else:
            parse_job.run_parse_job(parse_job.ParseJobOptions(
                treebank_dir=str(tmp_path / "treebank"), work_dir=str(work)))
    assert sorted(p.name for p in work.iterdir()) == sorted([held, "notes.txt"])
    assert (work / held).read_text() == "mine\n"

    (work / "model").mkdir()
    (work / "model" / "run_config.json").write_text("{}")
    outputs = main_job.output_names("de") if job == "main" else parse_job.OUTPUTS
    assert held in outputs or held.startswith("valid.greedy.")
    check_work_dir(work, outputs)  # the job's own: no refusal
