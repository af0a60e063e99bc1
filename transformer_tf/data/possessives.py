"""Possessive pronouns and their antecedents in English image descriptions, by a simple rule
(no part-of-speech tagger): the test cases of the pronoun-head measurement
(`jobs.pronoun_heads`, the paper's Figure 4 anaphora, measured).

Words are the space-separated tokens of a sentence; a word is compared lowercased with
the punctuation around it stripped ("dog," is "dog").

1. The pronoun: the first of "its", "their", "his", "her" in the sentence that is a
   possessive. "her" is also an object pronoun ("a man hugs her"), so "her" counts only
   when a word follows it that can start a noun phrase: not the sentence's end, not
   after punctuation attached to "her" ("her."), not a function word (NOT_AFTER_HER:
   prepositions, conjunctions, articles) and not a word ending in "ing" ("behind her
   holding a cup").
2. The antecedent: the nearest word before the pronoun whose form is in the pronoun's
   lexicon (ANTECEDENTS): "his" a male or unmarked person or an animal, "her" a female
   or unmarked person or an animal, "its" an animal or a thing, "their" a plural, a
   group or an unmarked person (the singular "they": "a person rowing in their boat").
   No such word: the sentence is not a case.

The rule misses antecedents outside its lexicon and takes the nearest compatible noun
where the true one is further back ("two men hold a baby on their shoulders" gives
"baby"); results/attention/antecedent-spot-check.tsv lists its output on 20 sentences
with a hand judgement of each.
"""
from __future__ import annotations

import dataclasses
import string

POSSESSIVES = ("its", "their", "his", "her")


def _lexicon(text: str) -> frozenset:
    return frozenset(text.split())


MALE = _lexicon("""man boy guy gentleman father dad son husband groom male brother
grandfather grandpa uncle king fisherman policeman businessman cowboy""")
FEMALE = _lexicon("""woman girl lady mother mom daughter wife bride female sister
grandmother grandma aunt queen waitress actress ballerina policewoman""")
PERSON = _lexicon("""person child kid baby toddler teenager teen youngster adult player
worker rider biker cyclist skier snowboarder skateboarder surfer swimmer runner climber
performer musician singer guitarist drummer dancer artist officer soldier athlete
student chef cook vendor tourist hiker driver referee goalie pitcher batter wrestler
boxer jockey gymnast individual someone""")
ANIMAL = _lexicon("""dog puppy cat kitten horse pony bird cow bull sheep goat pig
camel elephant animal dolphin duck""")
THING = _lexicon("""car boat truck train bus bike bicycle motorcycle building house tree
plane airplane machine team group""")
PLURAL = _lexicon("""people men women children kids boys girls guys ladies persons
players workers riders bikers cyclists skiers surfers swimmers runners climbers
performers musicians dancers students soldiers athletes tourists dogs cats horses birds
cows sheep adults teenagers teens babies toddlers friends couple family team group crowd
band parents brothers sisters""")
ANTECEDENTS = {
    "his": MALE | PERSON | ANIMAL,
    "her": FEMALE | PERSON | ANIMAL,
    "its": ANIMAL | THING,
    "their": PLURAL | PERSON,
}
NOT_AFTER_HER = _lexicon("""a an the and or but as while with in on at to for from of by
into onto over under up down off out around through near behind beside toward towards
is are was who that which this""")


@dataclasses.dataclass(frozen=True)
class PronounCase:
    """A sentence's possessive pronoun and its antecedent, as word indices (0-based)
    into `words`, the sentence's space-separated words."""

    words: tuple
    pronoun: int
    antecedent: int

    @property
    def offset(self) -> int:
        """Antecedent index minus pronoun index (negative: the antecedent comes first)."""
        return self.antecedent - self.pronoun


def bare(word: str) -> str:
    """The word lowercased, the punctuation around it stripped."""
    return word.strip(string.punctuation + "“”‘’").lower()


def is_possessive(words, index: int) -> bool:
    """Whether words[index] is one of POSSESSIVES used as a possessive (module doc, 1)."""
    word = bare(words[index])
    if word not in POSSESSIVES:
        return False
    if word != "her":
        return True
    if words[index][-1] in string.punctuation or index + 1 >= len(words):
        return False
    following = bare(words[index + 1])
    return bool(following) and following not in NOT_AFTER_HER and not following.endswith("ing")


def find_case(sentence: str) -> PronounCase | None:
    """The sentence's first possessive with an antecedent by the module's rule, or None."""
    words = tuple(word for word in sentence.split(" ") if word)
    for index in range(len(words)):
        if not is_possessive(words, index):
            continue
        lexicon = ANTECEDENTS[bare(words[index])]
        for before in range(index - 1, -1, -1):
            if bare(words[before]) in lexicon:
                return PronounCase(words, index, before)
    return None
