"""Trees as token sequences (Vinyals, Kaiser et al. 2015, "Grammar as a foreign language"),
and back, with deterministic repair of ill-formed sequences.

Source: the words, separated by single spaces. Target: the tree under its TOP root as
labelled opening and closing brackets, with every part-of-speech node replaced by one
placeholder token `XX` per word:

    (TOP (S (NP (NNP Ms.) (NNP Haag)) (VP (VBZ plays) (NP (NNP Elianti))) (. .)))
    ->  (S (NP XX XX )NP (VP XX (NP XX )NP )VP XX )S

Why one placeholder and not the tags: the target then says nothing about the words
themselves, so every placeholder maps back onto the next input word (the words are
copied, never generated), and the output vocabulary is the ~2 x 26 bracket tokens plus
one; tags would add a tagging task (EVALB's bracket scores ignore tags). The tree read back
carries `XX` as the tag of every word except punctuation, whose tag comes from
PUNCTUATION_TAGS (the tag these word forms carry in the PTB training files): EVALB deletes
punctuation by the tags of each tree separately, so a predicted tree must tag it as the
gold tree does (`'`, tagged POS more often than '', is left as XX).

Reading back (`delinearise`) never fails; it repairs, left to right, and counts each kind:
  * `XX` beyond the number of words: dropped (extra_word_slots);
  * a closing bracket with nothing open: dropped (unmatched_closings);
  * a closing bracket whose label differs from the open one: closes it anyway, the opening
    label kept (relabelled_closings);
  * a constituent closed without any word inside: dropped (empty_constituents);
  * any other token (unknown piece, bare bracket): dropped (unknown_tokens);
  * at the end, words without a slot are attached, in order, to the innermost open
    constituent (or the root) (missing_word_slots), then the open brackets are closed
    (unclosed_brackets).
The in-graph reading of the exported parser (transformer_tf.inference.parser) applies the
same rules; a test checks that both agree.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from transformer_tf.data.treebank import ROOT_LABEL, Tree

WORD_SLOT = "XX"
PLACEHOLDER_TAG = "XX"
OPEN, CLOSE = "(", ")"
PUNCTUATION_TAGS = {
    ",": ",", ".": ".", "?": ".", "!": ".", "``": "``", "`": "``", "''": "''",
    ":": ":", ";": ":", "--": ":", "-": ":", "...": ":",
}
# Brackets inside words would break the bracketed output: the PTB spells them so.
WORD_ESCAPES = {"(": "-LRB-", ")": "-RRB-"}
REPAIR_KINDS = ("extra_word_slots", "missing_word_slots", "unmatched_closings",
                "relabelled_closings", "empty_constituents", "unclosed_brackets",
                "unknown_tokens")


def escape_word(word: str) -> str:
    return WORD_ESCAPES.get(word, word)


def sentence_words(text: str) -> list[str]:
    """The whitespace-separated words of an input sentence, brackets escaped."""
    return [escape_word(w) for w in text.split()]


def output_tag(word: str) -> str:
    return PUNCTUATION_TAGS.get(word, PLACEHOLDER_TAG)


def linearise(tree: Tree) -> list[str]:
    """The target tokens of `tree` (its TOP root is not written)."""
    tokens: list[str] = []

    def visit(node: Tree) -> None:
        if node.is_preterminal:
            tokens.append(WORD_SLOT)
            return
        tokens.append(OPEN + node.label)
        for child in node.children:
            visit(child)
        tokens.append(CLOSE + node.label)

    for child in (tree.children if tree.label == ROOT_LABEL else (tree,)):
        visit(child)
    return tokens


def tree_symbols(labels: Sequence[str]) -> list[str]:
    """Every target token for constituent `labels` (sorted): opening and closing brackets,
    then the word slot."""
    labels = sorted(set(labels))
    return [OPEN + label for label in labels] + [CLOSE + label for label in labels] + [WORD_SLOT]


def constituent_labels(trees) -> set[str]:
    labels: set[str] = set()

    def visit(node: Tree) -> None:
        if node.is_preterminal:
            return
        labels.add(node.label)
        for child in node.children:
            visit(child)

    for tree in trees:
        for child in tree.children:
            visit(child)
    return labels


@dataclasses.dataclass
class RepairCounts:
    """How many repairs of each kind (see the module docstring) were made."""

    extra_word_slots: int = 0
    missing_word_slots: int = 0
    unmatched_closings: int = 0
    relabelled_closings: int = 0
    empty_constituents: int = 0
    unclosed_brackets: int = 0
    unknown_tokens: int = 0
    repaired_sentences: int = 0  # sentences with at least one repair

    def add(self, other: "RepairCounts") -> "RepairCounts":
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))
        return self

    @property
    def total(self) -> int:
        return sum(getattr(self, kind) for kind in REPAIR_KINDS)

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "total": self.total}


def delinearise(tokens: Sequence[str], words: Sequence[str]) -> tuple[Tree, RepairCounts]:
    """The tree that `tokens` describe over `words`, repaired (see the module docstring).

    Returns:
      (Tree rooted at TOP with the words and their output tags, RepairCounts).
    """
    counts = RepairCounts()
    stack: list[tuple[str, list]] = [(ROOT_LABEL, [])]
    next_word = 0

    def close() -> None:
        label, children = stack.pop()
        if children:
            stack[-1][1].append(Tree(label, tuple(children)))
        else:
            counts.empty_constituents += 1

    for token in tokens:
        if token == WORD_SLOT:
            if next_word < len(words):
                word = words[next_word]
                stack[-1][1].append(Tree(output_tag(word), (word,)))
                next_word += 1
            else:
                counts.extra_word_slots += 1
        elif token.startswith(OPEN) and len(token) > 1:
            stack.append((token[1:], []))
        elif token.startswith(CLOSE) and len(token) > 1:
            if len(stack) == 1:
                counts.unmatched_closings += 1
                continue
            if token[1:] != stack[-1][0]:
                counts.relabelled_closings += 1
            close()
        else:
            counts.unknown_tokens += 1
    for word in words[next_word:]:
        stack[-1][1].append(Tree(output_tag(word), (word,)))
        counts.missing_word_slots += 1
    while len(stack) > 1:
        counts.unclosed_brackets += 1
        close()
    counts.repaired_sentences = int(counts.total > 0)
    return Tree(ROOT_LABEL, tuple(stack[0][1])), counts


def tree_from_output(linearised: str, sentence: str) -> tuple[str, RepairCounts]:
    """(bracketed tree string, repairs) for a model output and its input sentence; ""
    for a sentence without words."""
    words = sentence_words(sentence)
    if not words:
        return "", RepairCounts()
    tree, counts = delinearise(linearised.split(), words)
    return tree.to_string(), counts
