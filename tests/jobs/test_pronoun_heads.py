"""The pronoun-head measurement (scripts/pronoun_heads.py's code) on Multi30k's dev split
with a tiny model (random weights: the measurement does not care how they were
learnt): the baseline alone, then every head's share, the
pronoun's word-level attention against the visualization's second path, the two heads
drawn, and the command's error paths."""
import dataclasses
import json
import pathlib
import runpy

import numpy as np
import pytest

from transformer_tf.jobs.pronoun_heads import (
    PronounHeadsOptions,
    contrasting_heads,
    measure,
    read_cases,
)


def test_contrasting_heads_are_the_best_and_the_worst_of_its_layer():
    shares = np.array([[0.1, 0.5, 0.0], [0.7, 0.2, 0.4]])
    assert contrasting_heads(shares) == ((2, 1), (2, 2))


def test_baseline_only_needs_no_model(shared_data_dir, tmp_path):
    results = tmp_path / "heads.json"
    document = measure(PronounHeadsOptions(results=str(results), data_dir=str(shared_data_dir),
                                           splits=("valid",), baseline_only=True))
    cases = read_cases(shared_data_dir, ("valid",))
    offsets = [case.offset for case, _ in cases]
    best = document["values"]["baseline_offset"]
    assert document["values"]["cases"] == len(cases) > 50
    # The best offset is the commonest antecedent offset, and its share is its frequency.
    assert offsets.count(best) == max(offsets.count(d) for d in set(offsets))
    assert document["values"]["baseline_share"] == round(offsets.count(best) / len(cases), 3)
    assert document["rows"] == [] and json.loads(results.read_text()) == document


def test_outputs_already_there_are_refused_before_any_work(shared_data_dir, tmp_path,
                                                            monkeypatch, capsys):
    """An existing results file, or PNG files in the figure directory (their names depend
    on the heads found), are refused before the cases are read or a model loaded; with
    overwrite the results file is replaced."""
    import transformer_tf.jobs.pronoun_heads as job

    results, figures = tmp_path / "heads.json", tmp_path / "figures" / "from_pronoun"
    results.write_text("{\"mine\": 1}\n")
    figures.mkdir(parents=True)
    (figures / "lines_encoder_layer5.png").write_bytes(b"mine")
    read = []
    monkeypatch.setattr(job, "read_cases", lambda *a: read.append(a) or [])
    options = PronounHeadsOptions(results=str(results), data_dir=str(shared_data_dir),
                                  baseline_only=True)
    with pytest.raises(FileExistsError, match=rf"^{results}: already there.*--overwrite"):
        measure(options)
    with pytest.raises(FileExistsError, match=r"lines_encoder_layer5.png: already there"):
        measure(PronounHeadsOptions(results=str(tmp_path / "new.json"), model_dir="m",
                                    figure_dir=str(tmp_path / "figures")))
    assert read == [] and results.read_text() == "{\"mine\": 1}\n"
    # The command says so in one line and exits 2.
    script = pathlib.Path(__file__).parents[2] / "scripts" / "pronoun_heads.py"
    main = runpy.run_path(str(script), run_name="wrapper")["main"]
    assert main(["--baseline-only", "--results", str(results)]) == 2
    assert f"{results}: already there" in capsys.readouterr().err
    monkeypatch.undo()
    document = measure(dataclasses.replace(options, splits=("valid",), overwrite=True))
    assert json.loads(results.read_text()) == document


@pytest.mark.slow
def test_every_head_measured_and_two_drawn(random_weights_run, shared_data_dir, tmp_path):
    pytest.importorskip("matplotlib")
    from transformer_tf.inference.attention import load_model
    from transformer_tf.inference.pronoun_attention import pronoun_rows
    from transformer_tf.visualization.maps import sentence_maps, view

    figures = tmp_path / "figures"
    document = measure(PronounHeadsOptions(
        results=str(tmp_path / "heads.json"), model_dir=str(random_weights_run),
        data_dir=str(shared_data_dir), splits=("valid",), figure_dir=str(figures),
        command="python scripts/pronoun_heads.py --test"))
    values, rows = document["values"], document["rows"]
    assert (values["layers"], values["heads"]) == (2, 2) and len(rows) == 4
    for row in rows:
        assert row["share"] == round(row["hits"] / values["cases"], 3)
    best = max(rows, key=lambda r: r["share"])
    assert values["best_share"] == best["share"]
    assert values["other_share"] == min(r["share"] for r in rows
                                        if r["layer"] == values["best_layer"])
    # The best head and the offset share the cases both get right: taking away the ones
    # only the head gets and adding the ones only the offset gets gives the offset's hits.
    assert best["hits"] - values["best_only"] + values["offset_only"] == \
        round(values["baseline_share"] * values["cases"])
    assert 0.0 < values["best_vs_offset_p"] <= 1.0
    assert all(pathlib.Path(path).is_file() for path in document["figure"]["files"])
    assert document["command"].endswith("--test") and document["machine"]

    # The pronoun's row, word level, as the attention figures merge it (EOS column left
    # out), from a one-sentence pass without padding.
    model, tokenizer, _ = load_model(model_dir=str(random_weights_run))
    cases = [case for case, _ in read_cases(shared_data_dir, ("valid",))[:3]]
    batched = pronoun_rows(model, tokenizer, cases, batch_size=2)
    for case, rows_of_case in zip(cases, batched):
        maps = sentence_maps(model, tokenizer, " ".join(case.words), "Ein Hund.")
        for layer in (1, 2):
            shown = view(maps, "encoder", layer)
            assert shown.key_labels[-1] == "<EOS>" and len(shown.key_labels) == len(case.words) + 1
            np.testing.assert_allclose(rows_of_case[layer - 1],
                                       shown.weights[:, case.pronoun, :-1], atol=1e-5)


def test_the_command_refuses_a_model_with_baseline_only(tmp_path, capsys):
    script = pathlib.Path(__file__).parents[2] / "scripts" / "pronoun_heads.py"
    main = runpy.run_path(str(script), run_name="wrapper")["main"]
    with pytest.raises(SystemExit) as exit_info:
        main(["--baseline-only", "--model-dir", str(tmp_path)])
    assert exit_info.value.code == 2 and "give --model-dir or --model" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--baseline-only", "--figure-dir", str(tmp_path)])
    assert "--figure-dir needs a model" in capsys.readouterr().err
