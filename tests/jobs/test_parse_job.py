"""The parsing job (scripts/parse_job.py's code) end to end on 14 files of the WSJ sample and
a tiny model: every stage runs, every output tree holds its sentence's words, the scores
are EVALB's over all sentences, and the export parses sentences into trees; so does
scripts/export.py's, which is told nothing about the task (it reads it from the run)."""
import json
import pathlib

import pytest

from transformer_tf.data.treebank_reader import read_trees


@pytest.mark.slow
def test_parse_job_produces_every_artefact(shared_data_dir, tmp_path, gc_frozen, monkeypatch,
                                           capsys):
    from transformer_tf.jobs.parse_job import EXAMPLE_SENTENCES, ParseJobOptions, run_parse_job

    files = sorted((shared_data_dir / "ptb_wsj_sample").glob("*.mrg"))[:14]
    if not files:
        pytest.skip(f"the WSJ sample is not under {shared_data_dir}")
    treebank = tmp_path / "treebank"
    treebank.mkdir()
    for path in files:  # split by file: 12 train, wsj_0013 dev, wsj_0014 test
        (treebank / path.name).symlink_to(path)
    work = tmp_path / "work"
    with gc_frozen():
        summary = run_parse_job(ParseJobOptions(
            treebank_dir=str(treebank), work_dir=str(work), vocab_size=400,
            train_minutes=None, max_steps=10, eval_every=5, average_last=2,
            model_overrides={"num_layers": 1, "d_model": 32, "d_ff": 64, "num_heads": 2},
            training_overrides={"checkpoint_every_minutes": 1e-5},
            beam_size=2, max_extra_length=12, verbose=0))

    written = json.loads((work / "summary.json").read_text())
    assert written["test"]["evalb"] == summary["test"]["evalb"]
    assert set(summary["stage_seconds"]) == {"prepare", "train", "average_and_select",
                                             "parse_and_score", "export", "serve_examples"}
    assert summary["train_steps"] == 10 and summary["stopped_by"] == "steps"
    # The preset's search with the overrides: the tree grammar and parsing_cpu's alpha.
    assert summary["decoding"]["grammar"] == "tree" and summary["decoding"]["alpha"] == 5.0
    assert (summary["decoding"]["beam_size"], summary["decoding"]["max_extra_length"]) == (2, 12)
    # Checkpoints of steps 9 and 10 (the final 20%) averaged, then chosen between on dev.
    assert [pathlib.Path(p).name for p in summary["averaged_checkpoints"]] == ["ckpt-9",
                                                                               "ckpt-10"]
    assert set(summary["dev_f1_greedy"]) == {"latest", "averaged"}
    assert summary["chosen"] in summary["dev_f1_greedy"]

    for split, name in (("dev", "valid"), ("test", "test")):
        gold = (work / "data" / f"{name}.gold").read_text().splitlines()
        trees = pathlib.Path(summary[split]["trees"]).read_text().splitlines()
        assert len(trees) == len(gold) == summary["sentences"][name] > 0
        # Under the tree grammar every output is a tree over exactly the gold words, so
        # EVALB scores every sentence and nothing needed a repair.
        for tree, gold_tree in zip(trees, gold):
            assert read_trees(tree)[0].words() == read_trees(gold_tree)[0].words()
        scores = summary[split]["evalb"]["all"]
        assert scores["sentences"] == len(gold) and scores["error_sentences"] == 0
        assert 0 <= scores["f1"] <= 100 and summary[split]["repairs"]["total"] == 0

    # The export parses: words in (the job's examples, sent through its serving_default),
    # a tree over them out.
    assert [sentence for sentence, _ in summary["examples"]] == EXAMPLE_SENTENCES
    for sentence, tree in summary["examples"]:
        tree = read_trees(tree)[0]
        assert tree.label == "TOP" and tree.words() == sentence.split()

    # scripts/export.py on the run, with no flag saying it parses: a parser export (its
    # description says so; what a parser export serves is checked above and in
    # tests/inference/test_parser.py).
    from transformer_tf.cli.export import main as export_main
    from transformer_tf.inference.loading import read_export_info

    assert export_main(["--model-dir", str(work / "model"), "--out", str(tmp_path / "auto" / "1"),
                        "--beam-size", "1", "--no-warmup"]) == 0
    assert read_export_info(tmp_path / "auto" / "1")["task"] == "parsing"

    # scripts/parse.py on the run (in Python, repairs after the search): a tree per line.
    import io
    import sys

    from transformer_tf.cli.parse import main as parse_main

    lines = EXAMPLE_SENTENCES[:2] + [""]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(
        "".join(line + "\n" for line in lines).encode())))
    capsys.readouterr()
    assert parse_main(["--model-dir", str(work / "model"), "--beam-size", "1", "--quiet"]) == 0
    captured = capsys.readouterr()
    trees = captured.out.split("\n")
    assert len(trees) == 4 and trees[2:] == ["", ""]
    for sentence, tree in zip(lines[:2], trees):
        assert read_trees(tree)[0].words() == sentence.split()
    assert "of 3 sentences" in captured.err
