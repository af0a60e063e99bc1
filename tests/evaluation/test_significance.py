"""evaluate --against: sacreBLEU's paired bootstrap of two systems (`evaluation.significance`),
on 100 Multi30k test segments: identical outputs are never significant, the references
themselves against a garbage system are, the scores are sacreBLEU's corpus scores, and the
command prints and serialises the comparison."""
import gzip
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu
from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest

from transformer_tf.evaluation.significance import paired_bootstrap

REPO = Path(__file__).resolve().parents[2]
SAMPLES = 200


@pytest.fixture(scope="module")
def segments(shared_data_dir):
    """(references, a fair system, a garbage system): 100 German test sentences; the fair
    one keeps the first 70 references and puts "Ein Hund." for the rest."""
    with gzip.open(shared_data_dir / "multi30k" / "test_2016_flickr.de.gz", "rt",
                   encoding="utf-8") as handle:
        references = [line.rstrip("\n") for line in itertools.islice(handle, 100)]
    fair = references[:70] + ["Ein Hund."] * 30
    garbage = ["Ein Hund."] * 100
    return references, fair, garbage


def test_identical_outputs_are_not_significant(segments):
    references, fair, _ = segments
    comparison = paired_bootstrap(fair, list(fair), [references], SAMPLES)
    for metric in comparison.metrics:
        assert metric.difference == 0 and metric.p_value == 1.0 and not metric.significant
    # The rule is needed: sacreBLEU's own p for identical outputs is its smallest one.
    _, raw = PairedTest([("a", fair), ("b", fair)], {"BLEU": BLEU()}, [references],
                        test_type="bs", n_samples=SAMPLES)()
    assert raw["BLEU"][1].p_value == pytest.approx(1 / (SAMPLES + 1))


def test_a_clearly_better_system_is_significant_with_sacrebleus_scores(segments):
    references, fair, garbage = segments
    comparison = paired_bootstrap(fair, garbage, [references], SAMPLES)
    bleu, chrf = comparison.metrics
    assert (bleu.name, chrf.name) == ("BLEU", "chrF2")
    assert bleu.score == pytest.approx(sacrebleu.corpus_bleu(fair, [references]).score)
    assert bleu.against_score == pytest.approx(
        sacrebleu.corpus_bleu(garbage, [references]).score)
    assert chrf.score == pytest.approx(sacrebleu.corpus_chrf(fair, [references]).score)
    for metric in (bleu, chrf):
        assert metric.difference > 10 and metric.significant
        assert metric.p_value == pytest.approx(1 / (SAMPLES + 1))
        assert metric.mean - 3 * metric.ci < metric.score < metric.mean + 3 * metric.ci
        assert f"bs:{SAMPLES}" in metric.signature
    # Either way round: the test is two-sided.
    reverse = paired_bootstrap(garbage, fair, [references], SAMPLES).metrics[0]
    assert reverse.difference == pytest.approx(-bleu.difference) and reverse.significant
    with pytest.raises(ValueError, match="100 hypotheses but 99"):
        paired_bootstrap(fair, garbage[:99], [references], SAMPLES)


def run(*args):
    return subprocess.run([sys.executable, str(REPO / "scripts" / "evaluate.py"),
                           *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def test_the_command_prints_and_serialises_the_comparison(segments, tmp_path):
    references, fair, garbage = segments
    paths = {}
    for name, lines in (("ref.de", references), ("fair.de", fair), ("garbage.de", garbage),
                        ("short.de", garbage[:50])):
        paths[name] = tmp_path / name
        paths[name].write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    common = ["--hyp", paths["fair.de"], "--ref", paths["ref.de"], "--bootstrap-samples",
              SAMPLES]
    done = run(*common, "--against", paths["garbage.de"], "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    significance = out["significance"]
    assert significance["samples"] == SAMPLES
    assert significance["against"] == str(paths["garbage.de"])
    for key in ("bleu", "chrf"):
        fields = significance[key]
        assert set(fields) >= {"score", "against_score", "difference", "p_value",
                               "significant", "mean", "ci", "against_mean", "against_ci",
                               "signature"}
        assert fields["score"] == pytest.approx(out[key]) and fields["significant"] is True
    done = run(*common, "--against", paths["garbage.de"])
    assert done.returncode == 0 and "paired bootstrap against" in done.stdout
    assert "BLEU: " in done.stdout and ", significant;" in done.stdout
    done = run(*common, "--against", paths["short.de"])
    assert done.returncode == 2 and str(paths["short.de"]) in done.stderr
    assert "Traceback" not in done.stderr
