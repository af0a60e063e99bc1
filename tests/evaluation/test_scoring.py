"""Library scores equal sacreBLEU's own; tokenized BLEU worked out by hand."""
import math

import pytest
import sacrebleu

from transformer_tf.evaluation import (
    EvaluationInputError,
    LineCountMismatchError,
    chrf,
    corpus_bleu,
    evaluate,
    lowercase_tokenized_bleu,
    multi_bleu,
    paper_tokenized_bleu,
    sacrebleu_bleu,
)

HYPS = [
    "A man in a blue shirt is standing on a ladder.",
    "two Dogs play in the snow!",
    "The girl, who is smiling, holds a red balloon.",
    "A woman rides a bicycle down the street.",
]
REFS = [
    "A man in a blue shirt stands on a ladder.",
    "Two dogs are playing in the snow.",
    "The smiling girl holds a red balloon.",
    "A woman is riding her bike down a street.",
]
REFS2 = [
    "A man wearing a blue shirt is standing on a ladder.",
    "Two dogs play in snow.",
    "A girl who is smiling holds a red balloon.",
    "A woman rides a bike down the street.",
]


def test_sacrebleu_numbers_and_signature():
    expected = sacrebleu.corpus_bleu(HYPS, [REFS])
    score = sacrebleu_bleu(HYPS, REFS)
    assert score.value == pytest.approx(expected.score, abs=1e-12)
    assert 0 < score.value < 100
    assert score.signature == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" + \
        sacrebleu.__version__
    assert score.formatted.startswith("BLEU|nrefs:1|case:mixed|")
    assert corpus_bleu(HYPS, REFS) == pytest.approx(expected.score, abs=1e-12)
    assert score.details["hyp_length"] == expected.sys_len
    assert score.details["ref_length"] == expected.ref_len


def test_multiple_references():
    expected = sacrebleu.corpus_bleu(HYPS, [REFS, REFS2])
    assert sacrebleu_bleu(HYPS, [REFS, REFS2]).value == pytest.approx(expected.score)
    assert sacrebleu_bleu(HYPS, [REFS, REFS2]).signature.startswith("nrefs:2|")
    assert chrf(HYPS, [REFS, REFS2]).value == pytest.approx(
        sacrebleu.corpus_chrf(HYPS, [REFS, REFS2]).score)


def test_chrf_and_lowercase_equal_sacrebleu():
    assert chrf(HYPS, REFS).value == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score)
    assert chrf(HYPS, REFS).signature.startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|")
    lower = lowercase_tokenized_bleu(HYPS, REFS)
    expected = sacrebleu.corpus_bleu(HYPS, [REFS], lowercase=True, tokenize="13a")
    assert lower.value == pytest.approx(expected.score)
    assert "|case:lc|" in lower.signature and "|tok:13a|" in lower.signature
    # "two Dogs" matches "Two dogs" only when lowercased
    assert lower.value > sacrebleu_bleu(HYPS, REFS).value


def test_report_holds_every_score():
    report = evaluate(HYPS, REFS, lang="en")
    d = report.to_dict()
    assert d["bleu"] == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS]).score)
    assert d["chrf"] == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score)
    assert d["signature"] == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" + \
        sacrebleu.__version__
    assert set(d) >= {"bleu", "chrf", "signature", "chrf_signature", "bleu_paper_tokenized",
                      "bleu_lowercase_tokenized", "bleu_lowercase_tokenized_signature",
                      "bleu_paper_tokenized_signature", "scores", "num_segments", "lang"}
    assert d["num_segments"] == 4 and d["lang"] == "en"
    assert "paper-style tokenized BLEU" in d["scores"]["bleu_paper_tokenized"]["label"]
    text = report.format_text()
    assert "sacreBLEU (cased, detokenized)" in text and d["signature"] in text
    assert "not comparable with sacreBLEU" in text


def test_identical_text_scores_100():
    report = evaluate(REFS, REFS, lang="en")
    for key in ("bleu", "chrf", "bleu_paper_tokenized", "bleu_lowercase_tokenized"):
        assert report[key].value == pytest.approx(100.0)


def test_multi_bleu_worked_by_hand():
    hyps = ["the cat is on the mat", "a dog ."]
    refs = ["the cat is on a mat", "a dog runs ."]
    # Segment 1 (c = 6, r = 6):
    #   1-grams: the x2 (clipped to 1), cat, is, on, mat      -> 5 of 6 match
    #   2-grams: the cat, cat is, is on | on the, the mat      -> 3 of 5
    #   3-grams: the cat is, cat is on | is on the, on the mat -> 2 of 4
    #   4-grams: the cat is on | cat is on the, is on the mat  -> 1 of 3
    # Segment 2 (c = 3, r = 4):
    #   1-grams: a, dog, .  -> 3 of 3;  2-grams: a dog | dog . -> 1 of 2
    #   3-grams: a dog .    -> 0 of 1;  4-grams: none          -> 0 of 0
    # Corpus: p = 8/9, 4/7, 2/5, 1/3; c = 9 < r = 10 so BP = exp(1 - 10/9).
    precisions = [8 / 9, 4 / 7, 2 / 5, 1 / 3]
    bp = math.exp(1 - 10 / 9)
    expected = 100 * bp * math.exp(sum(math.log(p) for p in precisions) / 4)
    score, _ = multi_bleu(hyps, refs)
    assert score.counts == [8, 4, 2, 1] and score.totals == [9, 7, 5, 3]
    assert score.sys_len == 9 and score.ref_len == 10
    assert score.bp == pytest.approx(bp)
    assert score.score == pytest.approx(expected, rel=1e-9)
    # 64/945 = 0.0677249; its 4th root 0.510132; times exp(-1/9) = 0.894839 -> 45.649
    assert expected == pytest.approx(45.649, abs=1e-3)
    # multi-bleu gives 0 (no smoothing) when some n-gram order has no match
    assert multi_bleu(["a b c d"], ["a b x d"])[0].score == 0.0


def test_paper_tokenized_bleu_worked_by_hand():
    # After tokenization + compound splitting (6 tokens each side):
    #   hyp: Ein blau ##AT##-##AT## weißes Boot .
    #   ref: Ein rot  ##AT##-##AT## weißes Boot .
    # matches: 1-grams 5/6, 2-grams 3/5, 3-grams 2/4, 4-grams 1/3, BP = 1
    # BLEU = 100 * (5/6 * 3/5 * 2/4 * 1/3) ** (1/4) = 100 * (1/12) ** 0.25
    hyps, refs = ["Ein blau-weißes Boot."], ["Ein rot-weißes Boot."]
    score = paper_tokenized_bleu(hyps, refs, lang="de")
    assert score.value == pytest.approx(100 * (1 / 12) ** 0.25, rel=1e-9)
    assert score.details["matching_ngrams"] == [5, 3, 2, 1]
    assert score.details["total_ngrams"] == [6, 5, 4, 3]
    assert "##AT##" in score.label and "pretok:moses-de+atat" in score.signature
    # Without compound splitting "blau-weißes" is one token: no 3-gram matches -> 0.
    assert paper_tokenized_bleu(hyps, refs, lang="de", compound_splitting=False).value == 0.0


def test_paper_tokenized_bleu_is_cased_and_differs_from_sacrebleu():
    hyps, refs = ["Ein Hund läuft."], ["ein Hund läuft."]
    score = paper_tokenized_bleu(hyps, refs, "de")
    # tokens: [Ein|ein] Hund läuft . -> 1-grams 3/4, 2-grams 2/3, 3-grams 1/2, 4-grams 0/1
    assert score.details["matching_ngrams"] == [3, 2, 1, 0]
    assert score.value == 0.0


def test_input_errors():
    with pytest.raises(LineCountMismatchError, match="3 hypotheses but 4 references"):
        sacrebleu_bleu(HYPS[:3], REFS)
    with pytest.raises(LineCountMismatchError, match="reference stream 1"):
        evaluate(HYPS, [REFS, REFS2[:2]])
    with pytest.raises(EvaluationInputError, match="empty"):
        corpus_bleu([], [])
    with pytest.raises(TypeError):
        corpus_bleu("a string", "another")
