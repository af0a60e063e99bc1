"""scripts/evaluate.py as a user runs it (subprocess) and through the library."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu

from transformer_tf.evaluation import LineCountMismatchError, evaluate_files

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "evaluate.py"

HYPS = [
    "Ein Mann in einem blauen Hemd steht auf einer Leiter.",
    "zwei Hunde spielen im Schnee!",
    "Das lächelnde Mädchen hält einen roten Ballon.",
    "Eine Frau fährt mit dem Fahrrad die Straße hinunter.",
    "Ein Kind im T-Shirt springt.",
]
REFS = [
    "Ein Mann in einem blauen Hemd steht auf einer Leiter.",
    "Zwei Hunde spielen im Schnee.",
    "Ein lächelndes Mädchen hält einen roten Luftballon.",
    "Eine Frau fährt auf ihrem Fahrrad eine Straße entlang.",
    "Ein Kind in einem T-Shirt springt in die Luft.",
]


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def files(tmp_path):
    hyp, ref = tmp_path / "hyp.de", tmp_path / "ref.de"
    hyp.write_text("\n".join(HYPS) + "\n", encoding="utf-8")
    ref.write_text("\n".join(REFS) + "\n", encoding="utf-8")
    return hyp, ref


def test_json_gives_sacrebleus_numbers(files):
    hyp, ref = files
    out = run("--hyp", hyp, "--ref", ref, "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    bleu = sacrebleu.BLEU()
    assert d["bleu"] == pytest.approx(bleu.corpus_score(HYPS, [REFS]).score, abs=1e-9)
    assert d["signature"] == str(bleu.get_signature())
    assert d["chrf"] == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score, abs=1e-9)
    assert d["bleu_lowercase_tokenized"] == pytest.approx(
        sacrebleu.corpus_bleu(HYPS, [REFS], lowercase=True, tokenize="13a").score, abs=1e-9)
    assert d["lang"] == "de"  # from the reference file's name
    assert "compound splitting" in d["scores"]["bleu_paper_tokenized"]["label"]
    # and the library gives the same report
    assert evaluate_files(hyp, ref).to_dict()["bleu_paper_tokenized"] == \
        pytest.approx(d["bleu_paper_tokenized"])


def test_text_output_prints_signature(files):
    hyp, ref = files
    out = run("--hyp", hyp, "--ref", ref)
    assert out.returncode == 0, out.stderr
    expected = sacrebleu.corpus_bleu(HYPS, [REFS])
    assert f"BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{sacrebleu.__version__}" \
        f" = {expected.score:.2f}" in out.stdout
    assert "chrF2|nrefs:1" in out.stdout
    assert "paper-style tokenized BLEU" in out.stdout
    assert "lowercased tokenized BLEU (sacreBLEU lowercase=True tokenize=13a" in out.stdout


def test_rejects_different_line_counts(files, tmp_path):
    hyp, _ = files
    short = tmp_path / "short.de"
    short.write_text("\n".join(REFS[:3]) + "\n", encoding="utf-8")
    out = run("--hyp", hyp, "--ref", short)
    assert out.returncode == 2 and out.stdout == ""
    message = out.stderr
    assert str(hyp) in message and str(short) in message
    assert "5 lines" in message and "3 lines" in message
    with pytest.raises(LineCountMismatchError, match=r"has 5 lines .* has 3 lines"):
        evaluate_files(hyp, short)


def test_reports_bad_utf8_with_file_and_line(files, tmp_path):
    _, ref = files
    bad = tmp_path / "bad.de"
    bad.write_bytes(("\n".join(HYPS[:3]) + "\n").encode() + b"caf\xe9 latin-1\n" + b"ok\n")
    out = run("--hyp", bad, "--ref", ref)
    assert out.returncode == 2
    assert f"{bad}:4: invalid UTF-8" in out.stderr


def test_refuses_hypotheses_with_scores(files, tmp_path):
    """`translate --scores` output scored BLEU 82.65 against identical references, the
    scores read as words; now exit 2 naming the file and how to strip the field, for
    --hyp and --against alike."""
    _, ref = files
    scored = tmp_path / "hyp_scores.de"
    scored.write_text("".join(f"{line}\t-1.0039\n" for line in REFS), encoding="utf-8")
    out = run("--hyp", scored, "--ref", ref)
    assert out.returncode == 2 and out.stdout == ""
    assert f"{scored}:1: " in out.stderr and f"cut -f1 {scored}" in out.stderr
    out = run("--hyp", ref, "--ref", ref, "--against", scored)
    assert out.returncode == 2 and f"{scored}:1: " in out.stderr


def test_multiple_references_and_flags(files, tmp_path):
    hyp, ref = files
    ref2 = tmp_path / "ref2.txt"
    ref2.write_text("\n".join(HYPS) + "\n", encoding="utf-8")
    out = run("--hyp", hyp, "--ref", ref, ref2, "--json", "--lang", "fr",
              "--no-compound-splitting")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["bleu"] == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS, HYPS]).score)
    assert d["signature"].startswith("nrefs:2|") and d["lang"] == "fr"
    assert "##AT##" not in d["scores"]["bleu_paper_tokenized"]["label"]


def test_help_explains_every_flag():
    out = run("--help")
    assert out.returncode == 0
    for flag in ("--hyp", "--ref", "--lang", "--json", "--compound-splitting",
                 "--no-compound-splitting"):
        assert flag in out.stdout
    assert "sacreBLEU" in out.stdout and "##AT##" in out.stdout
