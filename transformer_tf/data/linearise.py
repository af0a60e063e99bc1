"""Trees as token sequences (Vinyals, Kaiser et al. 2015, "Grammar as a foreign language"),
and back, with deterministic repair of ill-formed sequences.

Source: the words, separated by single spaces. Target: the tree under its TOP root as
labelled opening and closing brackets, with every part-of-speech node replaced by one leaf
per word. Two conventions for the leaf (`LEAVES`):

    (TOP (S (NP (NNP Ms.) (NNP Haag)) (VP (VBZ plays) (NP (NNP Elianti))) (. .)))
    "slot":   (S (NP XX XX )NP (VP XX (NP XX )NP )VP XX )S
    "words":  (S (NP Ms. Haag )NP (VP plays (NP Elianti )NP )VP . )S

"slot" is Vinyals et al.'s: one placeholder `XX` per word, so the output vocabulary is the
~2 x 26 bracket tokens plus one. "words" writes the word itself: the decoder then finds its
place in the sentence by content (the word after the one it wrote last) rather than by
counting placeholders, which a Transformer trained on a few thousand sentences does not
learn (README, parsing results); with the "tree" output grammar the words are copied from
the source piece by piece, so the output is the input with brackets around. In both, every
leaf maps back onto the next input word (a leaf's own text is never used), and tags are
left out: they would add a tagging task, and EVALB's bracket scores ignore them. The tree
read back
carries `XX` as the tag of every word except punctuation, whose tag comes from
PUNCTUATION_TAGS (the tag these word forms carry in the PTB training files): EVALB deletes
punctuation by the tags of each tree separately, so a predicted tree must tag it as the
gold tree does (`'`, tagged POS more often than '', is left as XX).

Reading back (`delinearise`) never fails; it repairs, left to right, and counts each kind:
  * a leaf beyond the number of words: dropped (extra_word_slots);
  * a closing bracket with nothing open: dropped (unmatched_closings);
  * a closing bracket whose label differs from the open one: closes it anyway, the opening
    label kept (relabelled_closings);
  * a constituent closed without any word inside: dropped (empty_constituents);
  * any other token (with "slot" leaves: an ordinary subword piece or a bare bracket; with
    "words" every token that is not a labelled bracket is a leaf): dropped (unknown_tokens);
  * at the end, words without a slot are attached, in order, to the innermost open
    constituent (or the root) (missing_word_slots), then the open brackets are closed
    (unclosed_brackets).
The in-graph reading of the exported parser (transformer_tf.inference.parser) applies the
same rules; a test checks that both agree.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from transformer_tf.data.treebank_reader import ROOT_LABEL, Tree

WORD_SLOT = "XX"
PLACEHOLDER_TAG = "XX"
LEAVES = ("slot", "words")
# "words": on the WSJ sample the slot models never learned to place the words (README,
# parsing results); the same budget with words as leaves parses.
DEFAULT_LEAVES = "words"
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


def check_leaves(leaves: str) -> str:
    if leaves not in LEAVES:
        raise ValueError(f"leaves must be one of {LEAVES}, got {leaves!r}")
    return leaves


def is_bracket(token: str) -> bool:
    """A labelled opening or closing bracket token ("(NP", ")NP")."""
    return len(token) > 1 and token[0] in (OPEN, CLOSE)


def is_leaf(token: str, leaves: str) -> bool:
    """A target token that takes the next input word."""
    return token == WORD_SLOT if leaves == "slot" else not is_bracket(token)


def linearise(tree: Tree, leaves: str = DEFAULT_LEAVES) -> list[str]:
    """The target tokens of `tree` (its TOP root is not written), leaves as `leaves`
    ("slot" or "words", see the module docstring)."""
    check_leaves(leaves)
    tokens: list[str] = []

    def visit(node: Tree) -> None:
        if node.is_preterminal:
            tokens.append(WORD_SLOT if leaves == "slot" else node.children[0])
            return
        tokens.append(OPEN + node.label)
        for child in node.children:
            visit(child)
        tokens.append(CLOSE + node.label)

    for child in (tree.children if tree.label == ROOT_LABEL else (tree,)):
        visit(child)
    return tokens


def tree_symbols(labels: Sequence[str], leaves: str = DEFAULT_LEAVES) -> list[str]:
    """Every tree token for constituent `labels` (sorted): opening and closing brackets,
    then, with "slot" leaves, the word slot (with "words" the leaves are ordinary words)."""
    labels = sorted(set(labels))
    brackets = [OPEN + label for label in labels] + [CLOSE + label for label in labels]
    return brackets + ([WORD_SLOT] if check_leaves(leaves) == "slot" else [])


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


def delinearise(tokens: Sequence[str], words: Sequence[str],
                leaves: str = DEFAULT_LEAVES) -> tuple[Tree, RepairCounts]:
    """The tree that `tokens` describe over `words`, repaired (see the module docstring);
    `leaves`: the convention of `tokens` ("slot" or "words").

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

    check_leaves(leaves)
    for token in tokens:
        if is_leaf(token, leaves):
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


def tree_from_output(linearised: str, sentence: str,
                     leaves: str = DEFAULT_LEAVES) -> tuple[str, RepairCounts]:
    """(bracketed tree string, repairs) for a model output (leaves as `leaves`) and its
    input sentence; "" for a sentence without words."""
    words = sentence_words(sentence)
    if not words:
        return "", RepairCounts()
    tree, counts = delinearise(linearised.split(), words, leaves)
    return tree.to_string(), counts
