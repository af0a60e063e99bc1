"""The antecedent rule of `data.possessives` on hand-made sentences, each answer worked out
by reading the module's rule."""
import pytest

from transformer_tf.data.possessives import PronounCase, find_case, is_possessive


@pytest.mark.parametrize("sentence, pronoun, antecedent", [
    ("A dog runs with a ball in its mouth.", 7, 1),
    # "man" is male: "her" skips it for the nearest female or unmarked person.
    ("A woman and a man walk her dog.", 6, 1),
    ("Two men and their dogs.", 3, 1),
    ("A person rowing in their boat", 4, 1),  # the singular "they"
    ("A car with a man in its seat.", 6, 1),  # "its" never takes a person
    ("The girl, smiling, holds her Cat.", 4, 1),  # case and punctuation ignored
    # The first possessive has no antecedent before it: the next one is taken.
    ("Its owner and a dog with his ball", 6, 4),
    # Nearest compatible noun wins, right or wrong (the rule's known limit).
    ("Two men hold a baby on their shoulders.", 6, 4),
])
def test_the_nearest_noun_of_the_pronouns_lexicon(sentence, pronoun, antecedent):
    case = find_case(sentence)
    assert case == PronounCase(tuple(sentence.split()), pronoun, antecedent)
    assert case.offset == antecedent - pronoun


@pytest.mark.parametrize("sentence", [
    "A man hugs her.",                  # object "her" at the end
    "A boy stands behind her holding a cup.",  # followed by an -ing word
    "A man looks at her and smiles.",   # followed by a function word
    "Its color is red.",                # no antecedent before the pronoun
    "A red car on a street.",           # no pronoun
    "",
])
def test_sentences_without_a_case(sentence):
    assert find_case(sentence) is None


def test_her_is_possessive_only_before_a_noun_phrase():
    words = ["a", "woman", "pets", "her", "cat", "while", "a", "man", "hugs", "her", ",",
             "and", "her"]
    assert [i for i in range(len(words)) if is_possessive(words, i)] == [3]
    assert is_possessive(["his", "."], 0)  # "his" needs no check
