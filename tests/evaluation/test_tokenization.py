"""Moses tokenization and ##AT## compound splitting, worked by hand from Moses' rules
(tokenizer.perl and its nonbreaking_prefix.{en,de,fr} files), and the paper-style BLEU
computed on them."""
import pytest

from transformer_tf.evaluation.scoring import multi_bleu, paper_tokenized_bleu
from transformer_tf.evaluation.tokenization import moses_tokenize, paper_tokenize, split_compounds


@pytest.mark.parametrize("text,expected", [
    # every hyphen between two non-space characters becomes " ##AT##-##AT## "
    ("rich-text format", "rich ##AT##-##AT## text format"),
    ("Ein blau-weißes T-Shirt", "Ein blau ##AT##-##AT## weißes T ##AT##-##AT## Shirt"),
    # the Perl one-liner's matches do not overlap: "b" is used by the first match
    ("a-b-c", "a ##AT##-##AT## b-c"),
    ("a-b-c-d", "a ##AT##-##AT## b-c ##AT##-##AT## d"),
    # a hyphen next to a space is left alone
    ("- a", "- a"), ("a -", "a -"), ("a - b", "a - b"),
    ("no hyphen here", "no hyphen here"),
])
def test_split_compounds_by_hand(text, expected):
    assert split_compounds(text) == expected


@pytest.mark.parametrize("text,lang,expected", [
    ("Hello, world! It's 5,300 km.", "en", "Hello , world ! It 's 5,300 km ."),
    # German: hyphens stay inside words, apostrophes are isolated, the final period splits
    ("Ein Mann in einem blau-weißen Hemd.", "de", "Ein Mann in einem blau-weißen Hemd ."),
    ("Peter's Hund bellt.", "de", "Peter ' s Hund bellt ."),
    # abbreviations (non-breaking prefixes) and German ordinals keep their period
    ("Dr. Müller kam am 1. Mai.", "de", "Dr. Müller kam am 1. Mai ."),
    ("Mr. Smith (No. 5) paid $3.50.", "en", "Mr. Smith ( No. 5 ) paid $ 3.50 ."),
    ("the U.S. Army", "en", "the U.S. Army"),
    # a period followed by a lower-case word is kept; multi-dots stay one token
    ("Er sagte... nein.", "de", "Er sagte ... nein ."),
    ("Sie geht. dann", "de", "Sie geht. dann"),
    ('Er rief "Hallo"!', "de", 'Er rief " Hallo " !'),
    # French: contractions split to the left
    ("L'homme a dit: «bonjour».", "fr", "L' homme a dit : « bonjour » ."),
    ("   ", "de", ""),
])
def test_moses_tokenize_by_hand(text, lang, expected):
    assert moses_tokenize(text, lang) == expected


# Moses' rules, each case worked by hand. Rule numbers: (P) a word ending in "." keeps it
# if the word is in the language's prefix file, or holds another "." and a letter, or the
# next word starts lower-case; a #NUMERIC_ONLY# prefix keeps it before a number; otherwise
# the "." is split off; (L) the last word's "." is always split (mosesdecoder#204);
# (N) "," and "." between digits stay; (A) apostrophes: en splits to the right, fr to the
# left, de isolates them; (Q) quotes and other symbols become tokens; (H) hyphens stay
# inside words (no -a).
MOSES_CASES = [
    # (P) "etc" is not in nonbreaking_prefix.en and "Then" is upper-case: split.
    ("He bought milk, eggs etc. Then he left.", "en",
     "He bought milk , eggs etc . Then he left ."),               # the old code kept "etc."
    ("John vs. Doe, says vs.", "en", "John vs. Doe , says vs ."),   # (P) "vs" listed; (L)
    ("He lives in the U.S.", "en", "He lives in the U.S ."),        # (L) before (P)
    ("No. 5 and No. five", "en", "No. 5 and No. five"),             # NUMERIC_ONLY; lower-case
    ("See Fig. 3.", "en", "See Fig . 3 ."),                         # "Fig" not listed
    ("I don't know the 1990's.", "en", "I don 't know the 1990 's ."),  # (A) right
    ('He said, "yes".', "en", 'He said , " yes " .'),               # (Q)
    ("a state-of-the-art system costs 1,000.50", "en",
     "a state-of-the-art system costs 1,000.50"),                   # (H) (N)
    ("Siehe Abb. 3 unten.", "de", "Siehe Abb . 3 unten ."),        # the old code kept "Abb."
    ("Es ist Nr. 5.", "de", "Es ist Nr. 5 ."),                      # (P) "Nr" listed; (L)
    ("Das kostet ca. 3,5 Euro.", "de", "Das kostet ca. 3,5 Euro ."),  # (P) (N)
    ("Wie geht's?", "de", "Wie geht ' s ?"),                        # (A) isolated
    ('Er sagte: "Ja".', "de", 'Er sagte : " Ja " .'),               # (Q)
    ("Voir janv. 2020 et fig. 3.", "fr",
     "Voir janv . 2020 et fig. 3 ."),                               # the old code kept "janv."
    ("Il a vu M. Dupont.", "fr", "Il a vu M. Dupont ."),            # single letters listed
    ("Aujourd'hui, j'ai 3,5 kg.", "fr", "Aujourd' hui , j' ai 3,5 kg ."),  # (A) left, (N)
]


@pytest.mark.parametrize("text,lang,expected", MOSES_CASES)
def test_moses_tokenize_follows_moses_rules(text, lang, expected):
    assert moses_tokenize(text, lang) == expected


def test_paper_bleu_is_multi_bleu_of_the_moses_tokens():
    # Hypotheses that drop one token each; the paper-style BLEU must be multi-bleu of the
    # hand-tokenized text, compounds split for German.
    cases = [c for c in MOSES_CASES if c[1] == "de"]
    references = [text for text, _, _ in cases]
    hypotheses = [text.replace("Es ist", "Es").replace("Siehe", "Sieh") for text in references]
    expected_refs = [split_compounds(tokens) for _, _, tokens in cases]
    expected_hyps = [t.replace("Es ist", "Es").replace("Siehe", "Sieh") for t in expected_refs]
    expected, _ = multi_bleu(expected_hyps, [expected_refs])
    score = paper_tokenized_bleu(hypotheses, references, "de")
    assert score.value == pytest.approx(expected.score, abs=1e-9)
    assert 0 < score.value < 100


def test_escaping_like_moses():
    assert moses_tokenize("Tom & Jerry's <b> [x] | y", "en", escape=True) == \
        "Tom &amp; Jerry &apos;s &lt; b &gt; &#91; x &#93; &#124; y"


def test_paper_tokenize_splits_compounds_for_german_only_by_default():
    text = "Ein Mann im T-Shirt."
    assert paper_tokenize(text, "de") == "Ein Mann im T ##AT##-##AT## Shirt ."
    assert paper_tokenize(text, "fr") == "Ein Mann im T-Shirt ."
    assert paper_tokenize(text, "fr", compound_splitting=True) == \
        "Ein Mann im T ##AT##-##AT## Shirt ."
    assert paper_tokenize(text, "de", compound_splitting=False) == "Ein Mann im T-Shirt ."
