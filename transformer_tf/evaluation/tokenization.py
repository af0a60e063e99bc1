"""Tokenisation for the paper-style BLEU: a Moses-like tokenizer and compound splitting.

The Transformer paper's En-De numbers were computed the tensor2tensor way
(`get_ende_bleu.sh`): tokenize hypothesis and reference with Moses' `tokenizer.perl -l de`,
split hyphenated compounds with

    perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g'

(the GNMT / ConvS2S convention: "rich-text format" -> "rich ##AT##-##AT## text format"),
then run `multi-bleu.perl` (cased) on the result.

`moses_tokenize` is this project's own re-implementation of the default (non-aggressive,
no `-penn`) rules of `tokenizer.perl`, applied in the same order:

  1. collapse whitespace, drop ASCII control characters, trim;
  2. put spaces around every character that is not a letter, digit, whitespace, or one of
     . ' ` , -      (so hyphens stay inside words: "a-b" stays one token);
  3. keep runs of dots together ("..." is one token);
  4. split commas except between digits ("5,300" stays);
  5. apostrophes by language: English splits to the right ("don't" -> "don 't"),
     French / Italian / Irish / Catalan to the left ("l'homme" -> "l' homme"), every other
     language (German included) isolates them;
  6. split a final period off a word unless the word is a known non-breaking prefix
     ("Dr."), contains another period and a letter ("U.S."), or the next token starts with
     a lower-case letter; always split it off the last word of the line;
  7. optionally escape & | < > ' " [ ] as XML entities (Moses does by default).

Differences from tokenizer.perl, stated plainly: the non-breaking-prefix lists below are
short, hand-written lists (titles, single letters, common abbreviations, month names and,
for German, ordinals) rather than Moses' full files, so rare abbreviations may be split where
Moses would keep them; protected patterns (-protected) are not supported. Escaping is off by
default: it maps characters inside tokens one-to-one, so it never changes a BLEU score.
"""
from __future__ import annotations

import regex

__all__ = ["moses_tokenize", "split_compounds", "paper_tokenize", "NONBREAKING_PREFIXES"]

# Perl's Unicode classes, as tokenizer.perl uses them.
_ALNUM = r"\p{Alphabetic}\p{Nd}"      # \p{IsAlnum}
_ALPHA = r"\p{Alphabetic}"            # \p{IsAlpha}
_NUM = r"\p{N}"                       # \p{IsN}
_LOWER = r"\p{Lowercase}"             # \p{IsLower}

_UPPER_LETTERS = [chr(c) for c in range(ord("A"), ord("Z") + 1)]
_LOWER_LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]

# Non-breaking prefixes: value 1 = never split the period after it; value 2 = keep the period
# only when a number follows ("No. 5", "Nr. 3").
_EN = {
    **{w: 1 for w in _UPPER_LETTERS},
    **{w: 1 for w in (
        "Adj Adm Adv Asst Bldg Brig Bros Capt Cmdr Col Comdr Corp Cpl Dr Drs Gen Gov Hon "
        "Hosp Insp Jr Lt Maj Messrs Mr Mrs Ms Msgr Ph Prof Pvt Rep Reps Rev Sen Sgt Sr St "
        "Supt Surg vs v etc e.g i.e Mt Ft Inc Ltd Co Jan Feb Mar Apr Jun Jul Aug Sep Sept "
        "Oct Nov Dec").split()},
    **{w: 2 for w in "No Nos Art Nr pp".split()},
}
_DE = {
    **{w: 1 for w in _UPPER_LETTERS + _LOWER_LETTERS},
    # German ordinals are written with a period: "am 1. Mai", "im 19. Jahrhundert".
    **{str(n): 1 for n in range(1, 100)},
    **{w: 1 for w in (
        "Dr Prof Hr Fr Frl Hrn St Str Nr Tel Abb Abs Abt Anm Bd Bsp bzw ca Chr dgl evtl "
        "ggf inkl insb Jh Jhd Kap Mio Mrd Nr od usw vgl zB zzgl geb gest sog Min Std Sek "
        "Jan Feb Mär Apr Jun Jul Aug Sep Sept Okt Nov Dez u.a z.B d.h u.v.m").split()},
    **{w: 2 for w in "Art S Nr".split()},
}
_FR = {
    **{w: 1 for w in _UPPER_LETTERS},
    **{w: 1 for w in (
        "M MM Mme Mmes Mlle Mlles Dr Pr Me St Ste ex cf etc env av bd chap fig hab "
        "janv févr avr juil sept oct nov déc").split()},
    **{w: 2 for w in "no nos n° p pp art".split()},
}
NONBREAKING_PREFIXES = {"en": _EN, "de": _DE, "fr": _FR}
"""Language -> {prefix: 1 (always keep '.') or 2 (keep '.' before a number)}."""

_XML_ESCAPES = [("&", "&amp;"), ("|", "&#124;"), ("<", "&lt;"), (">", "&gt;"),
                ("'", "&apos;"), ('"', "&quot;"), ("[", "&#91;"), ("]", "&#93;")]

_RIGHT_CONTRACTION_LANGS = {"en"}
_LEFT_CONTRACTION_LANGS = {"fr", "it", "ga", "ca"}


def _split_apostrophes(text: str, lang: str) -> str:
    if lang in _RIGHT_CONTRACTION_LANGS:          # "don't" -> "don 't", "1990's" -> "1990 's"
        text = regex.sub(rf"([^{_ALPHA}])[']([^{_ALPHA}])", r"\1 ' \2", text)
        text = regex.sub(rf"([^{_ALPHA}{_NUM}])[']([{_ALPHA}])", r"\1 ' \2", text)
        text = regex.sub(rf"([{_ALPHA}])[']([^{_ALPHA}])", r"\1 ' \2", text)
        text = regex.sub(rf"([{_ALPHA}])[']([{_ALPHA}])", r"\1 '\2", text)
        text = regex.sub(rf"([{_NUM}])[']([s])", r"\1 '\2", text)
    elif lang in _LEFT_CONTRACTION_LANGS:         # "l'homme" -> "l' homme"
        text = regex.sub(rf"([^{_ALPHA}])[']([^{_ALPHA}])", r"\1 ' \2", text)
        text = regex.sub(rf"([^{_ALPHA}])[']([{_ALPHA}])", r"\1 ' \2", text)
        text = regex.sub(rf"([{_ALPHA}])[']([^{_ALPHA}])", r"\1 ' \2", text)
        text = regex.sub(rf"([{_ALPHA}])[']([{_ALPHA}])", r"\1' \2", text)
    else:                                         # German and the rest: a token of its own
        text = text.replace("'", " ' ")
    return text


def _split_final_periods(text: str, prefixes: dict[str, int]) -> str:
    # Like Perl's split(/\s/): every single whitespace separates (empty fields kept),
    # trailing empty fields dropped.
    words = regex.split(r"\s", text)
    while words and words[-1] == "":
        words.pop()
    out = []
    last = len(words) - 1
    for i, word in enumerate(words):
        match = regex.fullmatch(r"(\S+)\.", word)
        if match:
            pre = match.group(1)
            if i == last:
                word = pre + " ."          # the last word's period always goes
            elif (("." in pre and regex.search(rf"[{_ALPHA}]", pre))   # "U.S."
                  or prefixes.get(pre) == 1                            # "Dr."
                  or regex.match(rf"[{_LOWER}]", words[i + 1])):       # ". lower-case"
                pass
            elif prefixes.get(pre) == 2 and regex.match(r"[0-9]+", words[i + 1]):
                pass                                                   # "No. 5"
            else:
                word = pre + " ."
        out.append(word)
    return " ".join(out)


def moses_tokenize(text: str, lang: str = "en", escape: bool = False) -> str:
    """Tokenize one line the way Moses' tokenizer.perl does (see the module docstring).

    Args:
      text: one detokenized sentence.
      lang: language code; chooses apostrophe rules and non-breaking prefixes
        ("en", "de", "fr" have prefix lists; other codes use none).
      escape: escape & | < > ' " [ ] as XML entities, as tokenizer.perl does without
        -no-escape. BLEU is the same either way.

    Returns:
      The tokens joined by single spaces.

    Example:
      >>> moses_tokenize("Hello, world! It's 5,300 km.", "en")
      "Hello , world ! It 's 5,300 km ."
    """
    prefixes = NONBREAKING_PREFIXES.get(lang, {})
    text = text.rstrip("\n")
    if not text.strip():
        return ""
    text = regex.sub(r"\s+", " ", text)
    text = regex.sub(r"[\x00-\x1f]", "", text)
    text = text.strip(" ")
    # 2. Isolate "other" special characters (hyphens, periods, commas, quotes stay).
    text = regex.sub(rf"([^{_ALNUM}\s\.\'\`\,\-])", r" \1 ", text)
    # 3. Multi-dots stay together: protect them as DOTMULTI / DOTDOTMULTI words.
    text = regex.sub(r"\.([\.]+)", r" DOTMULTI\1", text)
    while "DOTMULTI." in text:
        text = regex.sub(r"DOTMULTI\.([^\.])", r"DOTDOTMULTI \1", text)
        text = text.replace("DOTMULTI.", "DOTDOTMULTI")
    # 4. Commas, except inside numbers; and a comma after a number at the end of the line.
    text = regex.sub(rf"([^{_NUM}])[,]", r"\1 , ", text)
    text = regex.sub(rf"[,]([^{_NUM}])", r" , \1", text)
    text = regex.sub(rf"([{_NUM}])[,]$", r"\1 ,", text)
    # 5. Apostrophes.
    text = _split_apostrophes(text, lang)
    # 6. Final periods (abbreviations keep theirs).
    text = _split_final_periods(text, prefixes)
    text = regex.sub(r" +", " ", text).strip(" ")
    text = regex.sub(r"\.\' ?$", " . ' ", text)  # ".'" at the end of the line
    # Restore the multi-dots.
    while "DOTDOTMULTI" in text:
        text = text.replace("DOTDOTMULTI", "DOTMULTI.")
    text = text.replace("DOTMULTI", ".")
    if escape:
        for char, entity in _XML_ESCAPES:
            text = text.replace(char, entity)
    return " ".join(text.split())


_COMPOUND = regex.compile(r"(\S)-(\S)")


def split_compounds(text: str) -> str:
    """tensor2tensor / GNMT compound splitting: "a-b" -> "a ##AT##-##AT## b".

    Applies s{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g exactly as the Perl one-liner does,
    including its quirk that matches cannot overlap: in "a-b-c" the "b" is consumed by the
    first match, so the result is "a ##AT##-##AT## b-c" (as in the published evaluations).
    """
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", text)


def paper_tokenize(text: str, lang: str = "de", compound_splitting: bool | None = None) -> str:
    """Moses-like tokenization, then (for German by default) compound splitting.

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
