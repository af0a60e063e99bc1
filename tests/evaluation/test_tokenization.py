"""Moses-like tokenization and ##AT## compound splitting, worked by hand."""
import pytest

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


def test_escaping_like_moses():
    assert moses_tokenize("Tom & Jerry's <b>", "en", escape=True) == \
        "Tom &amp; Jerry &apos;s &lt; b &gt;"


def test_paper_tokenize_splits_compounds_for_german_only_by_default():
    text = "Ein Mann im T-Shirt."
    assert paper_tokenize(text, "de") == "Ein Mann im T ##AT##-##AT## Shirt ."
    assert paper_tokenize(text, "fr") == "Ein Mann im T-Shirt ."
    assert paper_tokenize(text, "fr", compound_splitting=True) == \
        "Ein Mann im T ##AT##-##AT## Shirt ."
    assert paper_tokenize(text, "de", compound_splitting=False) == "Ein Mann im T-Shirt ."
