"""The parsing ablation (scripts/parse_ablation.py's code) on 14 files of the WSJ sample and
a tiny model: the rows change one addition at a time; the plan lists every row as not
run; rows sharing one model train it once, each row is compared with the engineered one by
EVALB's difference, the file records command, commit and machine, a second invocation
keeps the finished rows and other settings are refused (training and scoring faked: the
real ones are the parsing job's, tests/jobs/test_parse_job.py)."""
import json
import types

import pytest

from transformer_tf.data.treebank_reader import Tree, read_trees
from transformer_tf.data.treebank_to_prepared import gold_path
from transformer_tf.evaluation.evalb import evalb
from transformer_tf.evaluation.hypothesis_files import read_lines
from transformer_tf.jobs.parse_ablation import (
    NOT_RUN,
    ROW_KEYS,
    ROWS,
    AblationMismatch,
    AblationOptions,
    run_ablation,
    write_plan,
)
from transformer_tf.runtime.provenance import WHERE_KEYS

TINY = {"num_layers": 1, "d_model": 32, "d_ff": 64, "num_heads": 2}


@pytest.fixture(scope="module")
def treebank(shared_data_dir, tmp_path_factory):
    files = sorted((shared_data_dir / "ptb_wsj_sample").glob("*.mrg"))[:14]
    if not files:
        pytest.skip(f"the WSJ sample is not under {shared_data_dir}")
    directory = tmp_path_factory.mktemp("treebank")
    for path in files:  # split by file: 12 train, wsj_0013 dev, wsj_0014 test
        (directory / path.name).symlink_to(path)
    return directory


def _options(treebank, tmp_path, **changes):
    return AblationOptions(**{
        "treebank_dir": str(treebank), "work_dir": str(tmp_path / "work"),
        "results": str(tmp_path / "ablation.json"), "vocab_size": 400,
        "train_minutes": None, "max_steps": 4, "eval_every": 4, "model_overrides": TINY,
        "training_overrides": {"average_last": 1},  # one checkpoint: no averaging
        "beam_size": 2, "max_extra_length": 12, "verbose": 0, **changes})


def test_rows_switch_one_addition_at_a_time():
    rows = {row.key: row for row in ROWS}
    engineered = rows["engineered"]
    assert (engineered.leaves, engineered.cursor, engineered.grammar) == ("words", True, "tree")
    for key, field in (("no_grammar", "grammar"), ("no_cursor", "cursor")):
        changed = [f for f in ("preset", "leaves", "cursor", "grammar")
                   if getattr(rows[key], f) != getattr(engineered, f)]
        assert changed == [field]
    # Without copied leaves the cursor has nothing to count: both go; no_additions drops
    # the grammar too, and the paper's row is the paper's preset with none of them.
    assert (rows["no_copy"].leaves, rows["no_copy"].cursor) == ("slot", False)
    assert rows["no_additions"].model_name == rows["no_copy"].model_name
    assert rows["no_grammar"].model_name == engineered.model_name
    paper = rows["paper"]
    assert (paper.preset, paper.leaves, paper.cursor, paper.grammar) == (
        "parsing_paper", "slot", False, "none")


def test_plan_lists_every_row_not_run(treebank, tmp_path):
    document = write_plan(_options(treebank, tmp_path))
    assert [row["key"] for row in document["rows"]] == list(ROW_KEYS)
    assert {row["status"] for row in document["rows"]} == {NOT_RUN}
    assert all("dev_f1" not in row for row in document["rows"])
    assert document["headline"].format(**document["values"]) == "0 of 6 rows run"
    assert document["commit_role"] == "recorded"  # nothing measured yet
    # A plan holds nothing to protect: a study of other settings may start over it.
    assert write_plan(_options(treebank, tmp_path, max_steps=9))["study"]["max_steps"] == 9


def test_the_command_keeps_its_results_in_the_work_directory(treebank, tmp_path):
    # Without --results a study starts its own file, not a committed one under results/
    # (which would make a new user's study continue the maintainers' rows).
    from transformer_tf.cli.parse_ablation import main

    work = tmp_path / "work"
    assert main(["--treebank", str(treebank), "--work-dir", str(work), "--plan-only",
                 "--quiet"]) == 0
    document = json.loads((work / "ablation.json").read_text())
    assert [row["key"] for row in document["rows"]] == list(ROW_KEYS)


def _flat(tree_text: str) -> str:
    """The gold tree with every constituent but one S taken away: a worse parse of the
    same words."""
    tree = read_trees(tree_text)[0]
    return Tree("TOP", (Tree("S", tuple(tree.preterminals())),)).to_string()


def test_rows_sharing_a_model_train_it_once_and_resume(treebank, tmp_path, monkeypatch):
    """The runner with training and scoring faked: the engineered row parses dev perfectly
    (the gold trees), the others flat; the comparison is EVALB's own difference."""
    from transformer_tf.jobs import parse_ablation

    trainings = []

    def fake_train(row, data_dir, model_dir, options):
        trainings.append(row.model_name)
        return types.SimpleNamespace(step=4, trained_seconds=90.0)

    def fake_score(row, model_dir, prepared, options):
        lines = read_lines(gold_path(prepared, "valid"))
        trees = lines if row.key == "engineered" else [_flat(t) for t in lines]
        path = parse_ablation.row_trees(options, row)
        path.parent.mkdir(parents=True)
        path.write_text("".join(t + "\n" for t in trees))
        return {"dev_f1": evalb(lines, trees).all.f1, "chosen": "latest"}

    monkeypatch.setattr(parse_ablation, "_train_model", fake_train)
    monkeypatch.setattr(parse_ablation, "_score_row", fake_score)
    options = _options(treebank, tmp_path, rows=("engineered", "no_grammar", "no_copy"),
                       command="python scripts/parse_ablation.py --smoke",
                       alongside="a Table 3 row on the other core")
    document = run_ablation(options, say=lambda _: None)
    # engineered and no_grammar share one model; no_copy trains on the slot treebank.
    assert trainings == ["parsing_cpu-words-cursor-on", "parsing_cpu-slot-cursor-off"]
    assert (tmp_path / "work" / "data-slot").is_dir() and (tmp_path / "work" / "data-words").is_dir()
    rows = {row["key"]: row for row in document["rows"]}
    assert [rows[k]["status"] for k in ROW_KEYS] == [NOT_RUN, "run", "run", NOT_RUN, "run",
                                                      NOT_RUN]
    assert rows["engineered"]["dev_f1"] == 100.0 and rows["engineered"]["vs_engineered"] is None
    assert (rows["no_copy"]["steps"], rows["no_copy"]["train_minutes"]) == (4, 1.5)
    assert all(rows[k]["load_average_at_start"] >= 0 for k in ("engineered", "no_copy"))
    assert "load average" in document["conditions"]
    assert document["conditions"].endswith(
        "; every row alongside a Table 3 row on the other core; every row on the machine "
        "named")
    difference = rows["no_grammar"]["dev_f1"] - 100.0
    assert difference < 0
    assert rows["no_grammar"]["vs_engineered"].startswith(f"{difference:+.2f} [")
    assert document["values"]["dev_f1_no_copy"] == round(rows["no_copy"]["dev_f1"], 2)
    columns = {column["key"] for column in document["columns"]}
    assert all(set(row) <= columns | {"key"} | set(WHERE_KEYS)  # shown, or in conditions
               for row in document["rows"])
    written = json.loads((tmp_path / "ablation.json").read_text())
    assert written == document and written["commit_role"] == "measured"
    assert written["command"] == options.command and written["machine"] and written["commit"]

    # Again: the finished rows kept, nothing trained; other settings are refused.
    assert run_ablation(options, say=lambda _: None)["rows"] == written["rows"]
    assert len(trainings) == 2
    with pytest.raises(AblationMismatch, match="max_steps"):
        run_ablation(_options(treebank, tmp_path, max_steps=5), say=lambda _: None)
    with pytest.raises(ValueError, match="unknown ablation rows"):
        run_ablation(_options(treebank, tmp_path, rows=("grammar",)), say=lambda _: None)


def test_every_row_trains_on_the_samples_schedule(treebank, tmp_path, monkeypatch):
    """The paper's row trains with parsing_cpu's batch, warm-up and cadence (not its
    preset's 25,000 tokens and 4,000 warm-up steps); an option given still wins."""
    from transformer_tf.jobs import parse_ablation
    from transformer_tf.presets import get_preset

    given = []
    monkeypatch.setattr("transformer_tf.training.fit.train",
                        lambda options: given.append(options) or types.SimpleNamespace(
                            step=4, trained_seconds=1.0))
    paper = next(row for row in ROWS if row.key == "paper")
    options = _options(treebank, tmp_path, training_overrides={"warmup_steps": 50})
    parse_ablation._train_model(paper, tmp_path, tmp_path / "model", options)
    (train_options,) = given
    assert train_options.preset == "parsing_paper"
    paper_preset, cpu = get_preset("parsing_paper").training, get_preset("parsing_cpu").training
    assert (paper_preset.tokens_per_batch, paper_preset.warmup_steps) == (25000, 4000)
    assert train_options.training_overrides == {
        "tokens_per_batch": cpu.tokens_per_batch, "warmup_steps": 50,
        "max_length": cpu.max_length, "checkpoint_every_minutes": cpu.checkpoint_every_minutes,
        "keep_checkpoints": cpu.keep_checkpoints, "average_last": cpu.average_last}
    assert train_options.model_overrides["source_cursor"] is False


def test_the_study_knows_its_treebank_by_content_not_by_path(treebank, tmp_path):
    """A results file names no machine's paths: the same treebank copied elsewhere resumes
    the study (a rewrite of its tables keeps the command that trained its rows); a copy
    with one file changed is another treebank, refused."""
    copy = tmp_path / "elsewhere" / treebank.name
    copy.mkdir(parents=True)
    for path in treebank.glob("*.mrg"):
        (copy / path.name).write_bytes(path.read_bytes())
    recorded = _options(treebank, tmp_path).defining_fields()
    assert recorded == _options(copy, tmp_path).defining_fields()
    assert str(tmp_path) not in json.dumps(recorded)
    assert recorded["treebank"].startswith(f"{treebank.name}: 14 .mrg files, sha256 ")

    document = write_plan(_options(treebank, tmp_path))
    document["rows"][0].update(status="finished", dev_f1=50.0)  # the study has begun
    (tmp_path / "ablation.json").write_text(json.dumps(document))
    # Resumes (the same treebank); a --plan-only rewrite keeps the command that trained.
    kept = write_plan(_options(copy, tmp_path, command="python scripts/parse_ablation.py "
                                                       "--plan-only"))
    assert kept["command"] == document["command"]
    changed = copy / "wsj_0001.mrg"
    changed.write_bytes(changed.read_bytes() + b"\n")
    with pytest.raises(AblationMismatch, match="other settings"):
        write_plan(_options(copy, tmp_path))
