"""Paired bootstrap of EVALB F1 and of sacreBLEU: exact against EVALB (sacreBLEU) on the full
sample and on given draws, against the exact bootstrap distribution enumerated over every
draw of a 3- (4-) sentence set, the noise rule, and the command."""
import itertools
import json

import numpy as np
import pytest

from transformer_tf.cli import evalb as evalb_cli
from transformer_tf.evaluation.evalb import SentenceScore, bracket_f1, evalb
from transformer_tf.evaluation import corpus_bleu
from transformer_tf.evaluation.paired_bootstrap import (
    PairedBootstrap,
    bleu_paired_bootstrap,
    draw_counts,
    paired_bootstrap,
)
from transformer_tf.evaluation.scoring import bleu_from_statistics, sentence_bleu_statistics

GOLD = [
    "(TOP (S (NP (DT the) (NN cat)) (VP (VBD sat)) (. .)))",
    "(TOP (S (NP (NN it)) (VP (VBD rained))))",
    "(TOP (S (NP (DT a) (NN dog)) (VP (VBD ran) (ADVP (RB away)))))",
]
PARSER_A = [
    "(TOP (S (NP (DT the) (NN cat)) (VP (VBD sat)) (. .)))",  # 3 of 3
    "(TOP (S (NP (NN it) (VBD rained))))",  # 1 of 3 gold, 2 test
    "(TOP (S (NP (DT a)) (NN dog) (VP (VBD ran) (ADVP (RB away)))))",  # 3 of 4
]
PARSER_B = [
    "(TOP (S (NP (DT the)) (VP (NN cat) (VBD sat)) (. .)))",  # 1 of 3
    "(TOP (S (NP (NN it)) (VP (VBD rained))))",  # 3 of 3
    "(TOP (S (NP (DT a) (NN dog) (VBD ran)) (RB away)))",  # 1 of 4 gold, 2 test
]


def ok(matched, gold, test):
    return SentenceScore("ok", 5, gold, test, matched)


def test_full_sample_f1_is_evalbs_including_error_sentences():
    gold = GOLD + ["(TOP (S (NP (NN snow)) (VP (VBD fell))))"]
    a = PARSER_A + ["(TOP (S (NP (NN snow))))"]  # one word short: an error sentence of A
    b = PARSER_B + ["(TOP (S (NP (NN snow)) (VP (VBD fell))))"]
    report_a, report_b = evalb(gold, a), evalb(gold, b)
    assert report_a.all.error_sentences == 1
    result = paired_bootstrap(report_a.sentences, report_b.sentences, samples=10)
    assert result.score_a == pytest.approx(report_a.all.f1)
    assert result.score_b == pytest.approx(report_b.all.f1)
    # worked by hand: A matches 3 + 1 + 3 = 7 of 3 + 3 + 4 = 10 gold and 3 + 2 + 4 = 9 test
    # brackets (its error sentence left out): F1 = 2 * 7 / 19
    assert result.score_a == pytest.approx(200 * 7 / 19)


def test_bracket_f1_is_the_harmonic_mean_of_precision_and_recall():
    precision, recall = 3 / 7, 3 / 5
    assert bracket_f1(3, 5, 7) == pytest.approx(100 * 2 * precision * recall / (precision + recall))
    assert bracket_f1(0, 4, 2) == 0.0
    assert bracket_f1(0, 0, 0) == 0.0


def test_identical_parsers_never_differ():
    scores = evalb(GOLD, PARSER_A).sentences
    result = paired_bootstrap(scores, scores, samples=200)
    assert result.difference == 0.0
    assert result.interval == (0.0, 0.0)
    assert result.a_better == result.b_better == 0.0


def test_each_draw_takes_as_many_sentences_as_the_set_has():
    draws = draw_counts(7, 50, seed=3)
    assert draws.shape == (50, 7)
    assert (draws.sum(axis=1) == 7).all()
    assert (draws >= 0).all()


def exact_differences(counts_a, counts_b):
    """F1(A) - F1(B) for every one of the n^n equally likely draws of n sentences."""
    n = len(counts_a)
    out = []
    for draw in itertools.product(range(n), repeat=n):
        totals_a = np.sum([counts_a[i] for i in draw], axis=0)
        totals_b = np.sum([counts_b[i] for i in draw], axis=0)
        out.append(float(bracket_f1(*totals_a) - bracket_f1(*totals_b)))
    return np.array(out)


def test_agrees_with_the_exact_bootstrap_distribution():
    counts_a = [(3, 3, 3), (1, 3, 2), (3, 4, 4)]
    counts_b = [(1, 3, 3), (3, 3, 3), (1, 4, 2)]
    exact = exact_differences(counts_a, counts_b)  # 27 draws
    result = paired_bootstrap([ok(*c) for c in counts_a], [ok(*c) for c in counts_b],
                              samples=20000, seed=1)
    # the standard error of a fraction over 20,000 draws is at most 0.0035
    assert result.a_better == pytest.approx(np.mean(exact > 0), abs=0.015)
    assert result.b_better == pytest.approx(np.mean(exact < 0), abs=0.015)
    low, high = result.interval
    assert np.mean(exact < low) <= 0.025 + 0.015
    assert np.mean(exact <= low) >= 0.025 - 0.015
    assert np.mean(exact > high) <= 0.025 + 0.015
    assert np.mean(exact >= high) >= 0.025 - 0.015
    # the hand-built pair from GOLD scores to the same counts
    assert [(s.matched, s.gold_brackets, s.test_brackets)
            for s in evalb(GOLD, PARSER_A).sentences] == counts_a
    assert [(s.matched, s.gold_brackets, s.test_brackets)
            for s in evalb(GOLD, PARSER_B).sentences] == counts_b


def test_swapping_the_parsers_mirrors_the_result():
    a, b = evalb(GOLD, PARSER_A).sentences, evalb(GOLD, PARSER_B).sentences
    forward = paired_bootstrap(a, b, samples=500, seed=7)
    backward = paired_bootstrap(b, a, samples=500, seed=7)
    assert backward.difference == pytest.approx(-forward.difference)
    assert backward.interval == pytest.approx((-forward.interval[1], -forward.interval[0]))
    assert (backward.a_better, backward.b_better) == (forward.b_better, forward.a_better)


def test_refuses_unpaired_or_empty_input():
    scores = evalb(GOLD, PARSER_A).sentences
    with pytest.raises(ValueError, match="3 sentences scored for A but 2 for B"):
        paired_bootstrap(scores, scores[:2])
    with pytest.raises(ValueError, match="no sentences"):
        paired_bootstrap([], [])
    with pytest.raises(ValueError, match="samples"):
        paired_bootstrap(scores, scores, samples=0)


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def test_evalb_command_compares_two_parsers(tmp_path, capsys):
    gold = write_lines(tmp_path / "gold", GOLD)
    a = write_lines(tmp_path / "a", PARSER_A)
    b = write_lines(tmp_path / "b", PARSER_B)
    assert evalb_cli.main([gold, a, "--against", b, "--samples", "300"]) == 0
    text = capsys.readouterr().out
    expected = paired_bootstrap(evalb(GOLD, PARSER_A).sentences,
                                evalb(GOLD, PARSER_B).sentences, samples=300)
    assert f"difference {expected.difference:+.2f}" in text
    assert "over 300 paired bootstrap samples of the 3 sentences" in text

    assert evalb_cli.main([gold, a, "--against", b, "--samples", "300", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["against"]["file"] == b
    assert result["against"]["paired_bootstrap"]["score_b"] == pytest.approx(expected.score_b)
    assert result["all"]["f1"] == pytest.approx(expected.score_a)


def test_evalb_command_names_the_file_whose_lines_do_not_pair(tmp_path, capsys):
    gold = write_lines(tmp_path / "gold", GOLD)
    a = write_lines(tmp_path / "a", PARSER_A)
    short = write_lines(tmp_path / "short", PARSER_B[:2])
    assert evalb_cli.main([gold, a, "--against", short]) == 2
    error = capsys.readouterr().err
    assert short in error and "3 gold trees but 2 test trees" in error


# BLEU: sacreBLEU's per-sentence counts add up to its corpus score.

REFERENCES = ["the cat sat on the mat .", "a dog ran away quickly", "it rained all day long",
              "two men are playing chess in the park"]
SYSTEM_A = ["the cat sat on a mat .", "a dog ran away", "it rained all day",
            "two men play chess in a park"]
SYSTEM_B = ["a cat is on the mat", "the dog ran away quickly", "it was raining",
            "two men are playing chess in the park"]


def test_bleu_statistics_of_any_draw_give_that_draws_corpus_bleu():
    statistics = sentence_bleu_statistics(SYSTEM_A, REFERENCES)
    assert statistics.shape == (4, 10)
    assert bleu_from_statistics(statistics.sum(axis=0))[0] == pytest.approx(
        corpus_bleu(SYSTEM_A, REFERENCES))
    for draw in [(0, 0, 1, 3), (2, 2, 2, 2), (3, 1, 1, 0), (1,)]:
        summed = statistics[list(draw)].sum(axis=0)
        expected = corpus_bleu([SYSTEM_A[i] for i in draw], [REFERENCES[i] for i in draw])
        assert bleu_from_statistics(summed[None])[0] == pytest.approx(expected)


def test_bleu_bootstrap_agrees_with_the_exact_bootstrap_distribution():
    exact = []
    for draw in itertools.product(range(4), repeat=4):  # all 256 equally likely draws
        references = [REFERENCES[i] for i in draw]
        exact.append(corpus_bleu([SYSTEM_A[i] for i in draw], references)
                     - corpus_bleu([SYSTEM_B[i] for i in draw], references))
    exact = np.array(exact)
    result = bleu_paired_bootstrap(SYSTEM_A, SYSTEM_B, REFERENCES, samples=20000, seed=2)
    assert result.metric == "BLEU" and result.sentences == 4
    assert result.score_a == pytest.approx(corpus_bleu(SYSTEM_A, REFERENCES))
    assert result.a_better == pytest.approx(np.mean(exact > 0), abs=0.015)
    assert result.b_better == pytest.approx(np.mean(exact < 0), abs=0.015)


def test_beyond_noise_needs_the_better_system_ahead_in_95_percent_of_draws():
    def made(difference, a_better, b_better):
        return PairedBootstrap(metric="BLEU", sentences=40, samples=1000, score_a=1.0,
                               score_b=1.0 - difference, difference=difference,
                               interval=(0.0, 0.0), confidence=0.95, a_better=a_better,
                               b_better=b_better)
    assert made(0.5, 0.95, 0.04).beyond_noise
    assert not made(0.5, 0.949, 0.05).beyond_noise
    assert made(-0.5, 0.01, 0.97).beyond_noise
    assert not made(-0.5, 0.10, 0.90).beyond_noise
    assert not made(0.0, 0.0, 0.0).beyond_noise
    # A system better on every sentence is beyond noise; one sentence's lead on 40 is not.
    references = [f"sentence number {i} is about a red house" for i in range(40)]
    worse = [f"sentence {i} about a house" for i in range(40)]
    assert bleu_paired_bootstrap(references, worse, references).beyond_noise
    one_better = [references[0]] + worse[1:]
    assert not bleu_paired_bootstrap(one_better, worse, references).beyond_noise
