"""Bracket scoring with the rules of EVALB (Sekine & Collins 1997) and its COLLINS.prm,
the parameters every English constituency parsing paper reports with.

One gold and one test tree per line, in bracketed form. Per sentence, as evalb.c does:
  * terminals: a node `(TAG word)`; terminals whose TAG is a DELETE_LABEL (COLLINS.prm:
    -NONE- and the punctuation tags , : `` '' .) are removed from the sentence before
    anything else, in gold and test separately (so a predicted tree must tag punctuation
    as the gold does, or the lengths differ);
  * a sentence whose test tree has no word is skipped; one whose gold and test word counts
    differ ("length unmatch"), whose words differ, or that cannot be read (unbalanced
    brackets, a node with two words) is an ERROR: reported, and left out of every score
    (evalb.c stops altogether after MAX_ERROR = 10 errors; here all are counted);
  * brackets: every non-terminal node spans [first word, last word + 1) over the remaining
    words; brackets spanning no word (e.g. over punctuation only) are ignored; labels are
    cut at the first '-' or '=' (NP-SBJ -> NP); brackets labelled with a DELETE_LABEL
    (COLLINS.prm: TOP) are ignored. Unary chains and duplicate brackets count each time;
  * matching: each gold bracket, in order, takes the first unmatched test bracket with the
    same span and an equal label (EQ_LABEL: ADVP and PRT are equal); one-to-one;
  * crossing: test brackets crossing at least one gold bracket;
  * tags: words whose gold and test tags are equal (after deletion).
Totals: recall = matched / gold brackets, precision = matched / test brackets, F1 = their
harmonic mean (percentages); complete match = valid sentences with gold = test = matched
brackets; tagging accuracy = correct tags / words; and the same over sentences of at most
`cutoff_length` (40) gold words (-NONE- not counted, punctuation counted).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Sequence

import numpy as np

# Tokens split at ASCII whitespace only, as EVALB's C reader (isspace in the C locale)
# splits them: NBSP, U+2028 and the like are characters of a word.
_TOKEN = re.compile(r"\(|\)|[^\s()]+", re.ASCII)


@dataclasses.dataclass(frozen=True)
class EvalbParams:
    """The parameter file's settings (defaults: COLLINS.prm)."""

    delete_labels: tuple = ("TOP", "-NONE-", ",", ":", "``", "''", ".")
    delete_labels_for_length: tuple = ("-NONE-",)
    equivalent_labels: tuple = (("ADVP", "PRT"),)
    labeled: bool = True
    cutoff_length: int = 40

    def labels_equal(self, a: str, b: str) -> bool:
        return a == b or any({a, b} == {x, y} for x, y in self.equivalent_labels)

    def is_deleted(self, label: str) -> bool:
        return label in self.delete_labels


COLLINS = EvalbParams()


class _ReadError(ValueError):
    pass


@dataclasses.dataclass
class _Sentence:
    words: list  # (word, tag) after deletion
    brackets: list  # [start, end, label] over the kept words
    length: int  # words not in delete_labels_for_length (deleted punctuation counted)


def _read(line: str, params: EvalbParams) -> _Sentence:
    tokens = _TOKEN.findall(line)
    words: list = []
    brackets: list = []
    open_brackets: list = []
    length = 0
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "(":
            i += 1
            label = ""
            if i < len(tokens) and tokens[i] not in ("(", ")"):
                label = tokens[i]
                i += 1
            if i < len(tokens) and tokens[i] not in ("(", ")"):  # a terminal
                word = tokens[i]
                i += 1
                if i >= len(tokens) or tokens[i] != ")":
                    raise _ReadError("more than two elements in a bracket")
                i += 1
                if label not in params.delete_labels_for_length:
                    length += 1
                if not params.is_deleted(label):
                    words.append((word, label))
                continue
            open_brackets.append(len(brackets))
            brackets.append([len(words), None, label])
        elif token == ")":
            if not open_brackets:
                raise _ReadError("unbalanced brackets (too many closing)")
            brackets[open_brackets.pop()][1] = len(words)
            i += 1
        else:
            raise _ReadError(f"word {token!r} outside a terminal bracket")
    if open_brackets:
        raise _ReadError("unbalanced brackets (too many opening)")
    return _Sentence(words, brackets, length)


def _scored_brackets(brackets, params: EvalbParams) -> list:
    kept = []
    for start, end, label in brackets:
        if start == end:
            continue
        label = re.split(r"[-=]", label, maxsplit=1)[0]
        if any(params.labels_equal(label, d) for d in params.delete_labels):
            continue
        kept.append((start, end, label))
    return kept


@dataclasses.dataclass(frozen=True)
class SentenceScore:
    """One line's result: status "ok", "error" (message says why) or "skip"."""

    status: str
    length: int
    gold_brackets: int = 0
    test_brackets: int = 0
    matched: int = 0
    crossing: int = 0
    words: int = 0
    correct_tags: int = 0
    message: str = ""


def score_sentence(gold: str, test: str, params: EvalbParams = COLLINS) -> SentenceScore:
    """EVALB's result for one gold / test line pair."""
    try:
        gold_sentence = _read(gold, params)
    except _ReadError as error:
        return SentenceScore("error", 0, message=f"gold: {error}")
    length = gold_sentence.length
    try:
        test_sentence = _read(test, params)
    except _ReadError as error:
        return SentenceScore("error", length, message=f"test: {error}")
    if not test_sentence.words:
        return SentenceScore("skip", length, message="test tree has no word")
    if len(gold_sentence.words) != len(test_sentence.words):
        return SentenceScore("error", length, message=(
            f"length unmatch ({len(gold_sentence.words)}|{len(test_sentence.words)})"))
    for (gold_word, _), (test_word, _) in zip(gold_sentence.words, test_sentence.words):
        if gold_word != test_word:
            return SentenceScore("error", length,
                                 message=f"words unmatch ({gold_word}|{test_word})")
    gold_brackets = _scored_brackets(gold_sentence.brackets, params)
    test_brackets = _scored_brackets(test_sentence.brackets, params)
    used = [False] * len(test_brackets)
    matched = 0
    for start, end, label in gold_brackets:
        for j, (test_start, test_end, test_label) in enumerate(test_brackets):
            if used[j] or (start, end) != (test_start, test_end):
                continue
            if not params.labeled or params.labels_equal(label, test_label):
                used[j] = True
                matched += 1
                break
    crossing = sum(
        any((gs < ts < ge < te) or (ts < gs < te < ge) for gs, ge, _ in gold_brackets)
        for ts, te, _ in test_brackets)
    correct_tags = sum(params.labels_equal(g, t) for (_, g), (_, t)
                       in zip(gold_sentence.words, test_sentence.words))
    return SentenceScore("ok", length, len(gold_brackets), len(test_brackets), matched,
                         crossing, len(gold_sentence.words), correct_tags)


@dataclasses.dataclass(frozen=True)
class EvalbSummary:
    """Totals over a set of sentences (percentages, as EVALB prints them)."""

    sentences: int
    error_sentences: int
    skipped_sentences: int
    valid_sentences: int
    recall: float
    precision: float
    f1: float
    complete_match: float
    average_crossing: float
    tagging_accuracy: float
    matched: int
    gold_brackets: int
    test_brackets: int

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def bracket_f1(matched, gold, test):
    """Labelled bracketing F1 in percent from bracket totals (scalars or NumPy arrays of
    any shape): 2PR / (P + R) with P = matched / test and R = matched / gold, which is
    200 * matched / (gold + test); 0 where there is no bracket or no match."""
    matched, gold, test = (np.asarray(x, dtype=np.float64) for x in (matched, gold, test))
    denominator = gold + test
    return np.where(denominator > 0, 200.0 * matched / np.maximum(denominator, 1), 0.0)


def summarise(scores: Sequence[SentenceScore]) -> EvalbSummary:
    valid = [s for s in scores if s.status == "ok"]
    matched = sum(s.matched for s in valid)
    gold = sum(s.gold_brackets for s in valid)
    test = sum(s.test_brackets for s in valid)
    words = sum(s.words for s in valid)
    recall = 100.0 * matched / gold if gold else 0.0
    precision = 100.0 * matched / test if test else 0.0
    f1 = float(bracket_f1(matched, gold, test))
    complete = sum(s.gold_brackets == s.test_brackets == s.matched for s in valid)
    return EvalbSummary(
        sentences=len(scores), error_sentences=sum(s.status == "error" for s in scores),
        skipped_sentences=sum(s.status == "skip" for s in scores), valid_sentences=len(valid),
        recall=recall, precision=precision, f1=f1,
        complete_match=100.0 * complete / len(valid) if valid else 0.0,
        average_crossing=sum(s.crossing for s in valid) / len(valid) if valid else 0.0,
        tagging_accuracy=100.0 * sum(s.correct_tags for s in valid) / words if words else 0.0,
        matched=matched, gold_brackets=gold, test_brackets=test)


@dataclasses.dataclass(frozen=True)
class EvalbReport:
    all: EvalbSummary
    short: EvalbSummary  # sentences of at most params.cutoff_length words
    cutoff_length: int
    sentences: list  # SentenceScore per line

    def errors(self) -> list[tuple[int, str]]:
        """(line number, message) of every error sentence."""
        return [(i, s.message) for i, s in enumerate(self.sentences, 1) if s.status == "error"]

    def as_dict(self) -> dict:
        return {"all": self.all.as_dict(), f"len<={self.cutoff_length}": self.short.as_dict(),
                "errors": [{"line": i, "message": m} for i, m in self.errors()]}

    def format_text(self) -> str:
        def block(name, s: EvalbSummary) -> str:
            return (f"-- {name} --\nsentences {s.sentences} (errors {s.error_sentences}, "
                    f"skipped {s.skipped_sentences}, valid {s.valid_sentences})\n"
                    f"bracketing recall {s.recall:.2f}  precision {s.precision:.2f}  "
                    f"F1 {s.f1:.2f}\ncomplete match {s.complete_match:.2f}  average crossing "
                    f"{s.average_crossing:.2f}  tagging accuracy {s.tagging_accuracy:.2f}")
        return block("all", self.all) + "\n" + block(f"len<={self.cutoff_length}", self.short)


def evalb(gold_lines: Sequence[str], test_lines: Sequence[str],
          params: EvalbParams = COLLINS) -> EvalbReport:
    """Score test trees against gold trees line by line.

    Raises:
      ValueError: the two lists differ in length (EVALB's "number of lines unmatch").
    """
    if len(gold_lines) != len(test_lines):
        raise ValueError(f"{len(gold_lines)} gold trees but {len(test_lines)} test trees")
    scores = [score_sentence(g, t, params) for g, t in zip(gold_lines, test_lines)]
    short = [s for s in scores if s.length <= params.cutoff_length]
    return EvalbReport(summarise(scores), summarise(short), params.cutoff_length, scores)
