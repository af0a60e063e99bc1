"""Pronoun heads' arithmetic (`evaluation.pronoun_heads`) on hand-made attention and cases:
each head's choice, the hit counts against a brute-force loop, and the positional
baseline on cases worked by hand, and a head against the baseline (sign test by hand and
by enumeration)."""
import itertools

import numpy as np
import pytest

from transformer_tf.evaluation.pronoun_heads import (
    HeadAgainstOffset,
    PositionalBaseline,
    head_against_offset,
    head_hits,
    positional_baseline,
    sign_test_p_value,
    strongest_other_word,
)


def test_a_head_chooses_its_strongest_word_other_than_the_pronoun():
    rows = np.array([[[0.1, 0.2, 0.6, 0.1],     # the pronoun (2) itself is strongest: 1
                      [0.4, 0.1, 0.2, 0.3]],    # 0
                     [[0.3, 0.3, 0.4, 0.0],     # a tie goes to the earlier word: 0
                      [0.0, 0.1, 0.1, 0.8]]])   # 3
    assert strongest_other_word(rows, pronoun=2).tolist() == [[1, 0], [0, 3]]
    assert rows[0, 0, 2] == 0.6  # the input is left as it was


def test_hits_count_as_a_loop_over_cases_layers_and_heads_does():
    rng = np.random.default_rng(3)
    choices = rng.integers(0, 4, size=(50, 3, 2))
    antecedents = rng.integers(0, 4, size=50)
    expected = np.zeros((3, 2), int)
    for case, layer, head in itertools.product(range(50), range(3), range(2)):
        expected[layer, head] += choices[case, layer, head] == antecedents[case]
    assert head_hits(choices, antecedents).tolist() == expected.tolist()


def test_the_best_fixed_offset_worked_by_hand():
    # (pronoun, antecedent): offsets -2, -2, -1, -6 -> -2 is right in 2 of 4 cases.
    assert positional_baseline([3, 5, 4, 6], [1, 3, 3, 0], [7, 7, 7, 7]) == \
        PositionalBaseline(offset=-2, share=0.5)
    # -1 and +1 both right once: the negative wins the tie; +1 beats -2 by being nearer.
    assert positional_baseline([2, 2], [1, 3], [5, 5]) == PositionalBaseline(-1, 0.5)
    assert positional_baseline([3, 3], [1, 4], [5, 5]) == PositionalBaseline(1, 0.5)


def test_no_offset_beats_the_chosen_one():
    rng = np.random.default_rng(5)
    lengths = rng.integers(3, 12, size=40)
    pronouns = [int(rng.integers(1, n)) for n in lengths]
    antecedents = [int(rng.integers(0, p)) for p in pronouns]
    best = positional_baseline(pronouns, antecedents, lengths)
    for offset in range(-12, 12):
        share = np.mean([p + offset == a for p, a in zip(pronouns, antecedents)])
        assert share <= best.share
    assert best.share == np.mean([p + best.offset == a for p, a in zip(pronouns, antecedents)])


def test_no_cases_is_an_error():
    with pytest.raises(ValueError, match="no cases"):
        positional_baseline([], [], [])


@pytest.mark.parametrize("wins, losses, expected", [
    (0, 0, 1.0),            # no discordant case: nothing to tell them apart
    (5, 0, 2 / 32),         # all five one way: 2 * (1/2)^5
    (0, 5, 2 / 32),
    (9, 1, 2 * 11 / 1024),  # 2 * (C(10,0) + C(10,1)) / 2^10
    (3, 3, 1.0),            # 2 * 42/64 > 1, capped
])
def test_sign_test_p_values_worked_by_hand(wins, losses, expected):
    assert sign_test_p_value(wins, losses) == pytest.approx(expected)


def test_sign_test_is_the_share_of_splits_at_least_as_uneven():
    # Enumerate all 2^n equally likely splits of n discordant cases.
    for n in range(1, 11):
        for wins in range(n + 1):
            gap = abs(2 * wins - n)
            as_uneven = sum(1 for signs in itertools.product((0, 1), repeat=n)
                            if abs(2 * sum(signs) - n) >= gap)
            assert sign_test_p_value(wins, n - wins) == pytest.approx(
                min(1.0, as_uneven / 2 ** n)), (wins, n)


def test_a_head_against_the_offset_counts_the_cases_only_one_gets_right():
    pronouns = [3, 4, 5, 2, 6]
    antecedents = [1, 2, 4, 0, 5]   # offset -2 right in cases 0, 1 and 3
    head = [1, 0, 4, 1, 5]          # right in cases 0, 2 and 4
    assert head_against_offset(head, pronouns, antecedents, offset=-2) == \
        HeadAgainstOffset(head_only=2, offset_only=2, p_value=1.0)
    weaker = head_against_offset([1, 2, 0, 1, 0], pronouns, antecedents, offset=-2)
    assert (weaker.head_only, weaker.offset_only) == (0, 1)  # right in 0 and 1 only
