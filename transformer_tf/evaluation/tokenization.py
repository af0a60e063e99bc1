"""Tokenisation for the paper-style BLEU: Moses' tokenizer and compound splitting.

The Transformer paper's En-De numbers were computed the tensor2tensor way
(`get_ende_bleu.sh`): tokenize hypothesis and reference with Moses' `tokenizer.perl -l de`,
split hyphenated compounds with

    perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g'

(the GNMT / ConvS2S convention: "rich-text format" -> "rich ##AT##-##AT## text format"),
then run `multi-bleu.perl` (cased) on the result.

`moses_tokenize` is `sacremoses.MosesTokenizer` -- the maintained Python port of
`tokenizer.perl`, with Moses' own non-breaking-prefix files -- with the default options
of `tokenizer.perl` (not aggressive about hyphens, no -penn), plus the one rule of
`tokenizer.perl` sacremoses leaves out on purpose (sacremoses issues #21 and #97): a period
at the end of the line is always split off the last word, even after a non-breaking
prefix ("says vs." -> "says vs .", "iPhone 5." -> "iPhone 5 ."; mosesdecoder pull request
#204, 2018). `split_compounds` and the multi-bleu arithmetic (evaluation.scoring) are ours.
"""
from __future__ import annotations

import functools

import regex

__all__ = ["moses_tokenize", "split_compounds", "paper_tokenize"]

# The last token ends in one period after something that is not a period ("..." stays).
_FINAL_PERIOD = regex.compile(r"(?<=[^\s.])\.$")


@functools.lru_cache(maxsize=None)
def _moses(lang: str):
    # Imported on first use: sacremoses pulls in joblib, which only scoring needs.
    from sacremoses import MosesTokenizer
    return MosesTokenizer(lang=lang)


def moses_tokenize(text: str, lang: str = "en", escape: bool = False) -> str:
    """Tokenize one line as Moses' tokenizer.perl does (see the module docstring).

    Args:
      text: one detokenized sentence.
      lang: language code; chooses Moses' apostrophe rules and non-breaking prefixes
        (languages without a prefix file use the English one, as sacremoses does).
      escape: escape & | < > ' " [ ] as XML entities, as tokenizer.perl does without
        -no-escape. BLEU is the same either way (it maps characters inside tokens
        one-to-one).

    Returns:
      The tokens joined by single spaces ("" for a blank line).

    Example:
      >>> moses_tokenize("Hello, world! It's 5,300 km.", "en")
      "Hello , world ! It 's 5,300 km ."
    """
    tokens = _moses(lang).tokenize(text.rstrip("\n"), escape=escape, return_str=True)
    return _FINAL_PERIOD.sub(" .", tokens.strip())


_COMPOUND = regex.compile(r"(\S)-(\S)")


def split_compounds(text: str) -> str:
    """tensor2tensor / GNMT compound splitting: "a-b" -> "a ##AT##-##AT## b".

    Applies s{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g exactly as the Perl one-liner does,
    including its quirk that matches cannot overlap: in "a-b-c" the "b" is consumed by the
    first match, so the result is "a ##AT##-##AT## b-c" (as in the published evaluations).
    """
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", text)


def paper_tokenize(text: str, lang: str = "de", compound_splitting: bool | None = None) -> str:
    """Moses tokenization, then (for German by default) compound splitting.

    Args:
      text: one detokenized sentence.
      lang: target language code.
      compound_splitting: apply `split_compounds`; None means "only when lang == 'de'"
        (the En-De convention of the paper's evaluation).
    """
    if compound_splitting is None:
        compound_splitting = lang == "de"
    tokens = moses_tokenize(text, lang)
    return split_compounds(tokens) if compound_splitting else tokens
