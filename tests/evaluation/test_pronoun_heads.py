"""Pronoun heads' arithmetic (`evaluation.pronoun_heads`) on hand-made attention and cases:
each head's choice, the hit counts against a brute-force loop, and the positional
baseline on cases worked by hand."""
import itertools

import numpy as np
import pytest

from transformer_tf.evaluation.pronoun_heads import (
    PositionalBaseline,
    head_hits,
    positional_baseline,
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
