"""Penn Treebank `.mrg` files: reading, cleaning and the file split.

A tree is a `Tree(label, children)`; a pre-terminal (part-of-speech node) has one child,
the word (a str); every other node has Tree children. The PTB wraps each sentence in a
root with an empty label, `( (S ...) )`; `read_trees` keeps it and `clean_tree` names it
`TOP` (the label EVALB's COLLINS.prm deletes).

Cleaning (`clean_tree`), the usual preprocessing of parsing papers:
  * `-NONE-` pre-terminals (traces, empty elements) are removed, and so is every
    constituent that removal leaves without words;
  * function tags and indices are stripped from constituent labels (NP-SBJ-1 -> NP,
    NP=2 -> NP, PP-LOC-CLR -> PP); part-of-speech tags are kept as they are (-LRB-, -NONE-
    are tags, not labels with a function tag);
  * punctuation is kept.

The reader is a plain bracket reader (no dependency): `(`, `)` and whitespace delimit
tokens, as in the PTB files and in EVALB. Ill-formed input raises `TreebankError` naming
the file and line.

Splits (`split_files`): with the standard layout of the full treebank (files named
wsj_SSNN.mrg, sections SS 02-21 present with 22 and 23) the standard split is used:
train 02-21, valid 22, test 23. Any other set of files (such as the 199-file NLTK sample
wsj_0001 .. wsj_0199) is split by file, in sorted file-name order: the last 7.5% of the files
(rounded, at least one) are test, as many before them valid, the rest train. For the sample:
train wsj_0001-0169 (3,501 sentences), valid wsj_0170-0184 (217), test wsj_0185-0199 (196).
"""
from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path
from typing import Iterator, Union

from transformer_tf.data.text_lines import CorpusError

ROOT_LABEL = "TOP"
NONE_TAG = "-NONE-"
STANDARD_SECTIONS = {"train": range(2, 22), "valid": (22,), "test": (23,)}
SAMPLE_HELD_OUT_FRACTION = 0.075
_FILE_NAME = re.compile(r"wsj_(\d\d)(\d\d)\.mrg$")
_TOKEN = re.compile(r"\(|\)|[^\s()]+")


class TreebankError(CorpusError):
    """A treebank file is not a sequence of well-formed bracketed trees."""


@dataclasses.dataclass(frozen=True)
class Tree:
    """A constituency tree node.

    Attributes:
      label: the constituent label or part-of-speech tag ("" for the PTB's unnamed root).
      children: Tree nodes, or for a pre-terminal exactly one str (the word).
    """

    label: str
    children: tuple

    @property
    def is_preterminal(self) -> bool:
        return len(self.children) == 1 and isinstance(self.children[0], str)

    def words(self) -> list[str]:
        return [leaf.children[0] for leaf in self.preterminals()]

    def tags(self) -> list[str]:
        return [leaf.label for leaf in self.preterminals()]

    def preterminals(self) -> Iterator["Tree"]:
        if self.is_preterminal:
            yield self
            return
        for child in self.children:
            yield from child.preterminals()

    def to_string(self) -> str:
        """One-line bracketed form, `(S (NP (DT the) (NN cat)) (VP (VBD sat)))`."""
        if self.is_preterminal:
            return f"({self.label} {self.children[0]})"
        return f"({self.label} {' '.join(child.to_string() for child in self.children)})"


Node = Union[Tree, str]


def read_trees(text: str, source: str = "<string>") -> list[Tree]:
    """Every bracketed tree in `text` (one file's content), in order.

    Raises:
      TreebankError: unbalanced brackets, a word outside any bracket, a node mixing words
        and sub-trees or holding two words; the message names `source` and the line.
    """
    trees: list[Tree] = []
    # stack of (label, children, line) of the open nodes
    stack: list[tuple[str | None, list, int]] = []
    line = 1
    position = 0
    expect_label = False
    for match in _TOKEN.finditer(text):
        line += text.count("\n", position, match.start())
        position = match.start()
        token = match.group()
        if token == "(":
            if expect_label:  # "((" : an unnamed node
                stack[-1] = ("", stack[-1][1], stack[-1][2])
            stack.append((None, [], line))
            expect_label = True
        elif token == ")":
            if not stack:
                raise TreebankError(f"{source}:{line}: ')' closes nothing")
            label, children, start = stack.pop()
            if label is None:
                label = ""
            expect_label = False
            node = _make_node(label, children, f"{source}:{start}")
            if stack:
                stack[-1][1].append(node)
            else:
                trees.append(node)
        else:
            if not stack:
                raise TreebankError(f"{source}:{line}: {token!r} outside any bracket")
            if expect_label:
                stack[-1] = (token, stack[-1][1], stack[-1][2])
                expect_label = False
            else:
                stack[-1][1].append(token)
    if stack:
        raise TreebankError(f"{source}:{stack[-1][2]}: bracket opened here is never closed")
    return trees


def _make_node(label: str, children: list, where: str) -> Tree:
    words = [c for c in children if isinstance(c, str)]
    if words and (len(children) != 1):
        raise TreebankError(f"{where}: node ({label} ...) mixes words and sub-trees or has "
                            f"more than one word: {children!r}")
    if not children:
        raise TreebankError(f"{where}: empty node ({label})")
    return Tree(label, tuple(children))


def read_mrg_file(path) -> list[Tree]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise TreebankError(f"{path}: not UTF-8 text ({error})") from None
    return read_trees(text, str(path))


def strip_function_tags(label: str) -> str:
    """NP-SBJ-1 -> NP, NP=2 -> NP, PRT|ADVP -> PRT; labels starting with '-' (-NONE-,
    -LRB-) are returned unchanged."""
    if not label or label.startswith("-"):
        return label
    return re.split(r"[-=|]", label, maxsplit=1)[0] or label


def clean_tree(tree: Tree) -> Tree | None:
    """The tree without -NONE- elements, emptied constituents and function tags, under a
    TOP root; None if no word is left. Part-of-speech tags are unchanged."""
    def clean(node: Tree) -> Tree | None:
        if node.is_preterminal:
            return None if node.label == NONE_TAG else node
        children = tuple(c for c in (clean(child) for child in node.children) if c is not None)
        if not children:
            return None
        return Tree(strip_function_tags(node.label), children)

    cleaned = clean(tree)
    if cleaned is None:
        return None
    if cleaned.label in ("", ROOT_LABEL, "ROOT"):
        return Tree(ROOT_LABEL, cleaned.children)
    return Tree(ROOT_LABEL, (cleaned,))


def clean_trees(trees) -> list[Tree]:
    return [t for t in (clean_tree(tree) for tree in trees) if t is not None]


def find_mrg_files(directory) -> list[Path]:
    """Every `.mrg` file under `directory` (recursively), sorted by file name."""
    directory = Path(directory)
    if not directory.is_dir():
        raise TreebankError(f"{directory}: not a directory of .mrg files")
    files = sorted(directory.rglob("*.mrg"), key=lambda p: (p.name, str(p)))
    if not files:
        raise TreebankError(f"{directory}: no .mrg files found")
    return files


def treebank_identity(directory) -> str:
    """What a treebank is, wherever it lies: "<directory name>: N .mrg files, sha256
    <12 hex digits>" of their paths under `directory` and contents, so that a study
    recorded on one machine is recognised in a copy elsewhere, and a changed file is not."""
    directory = Path(directory)
    files = find_mrg_files(directory)
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(directory).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return f"{directory.name}: {len(files)} .mrg files, sha256 {digest.hexdigest()[:12]}"


def _section(path: Path) -> int | None:
    match = _FILE_NAME.search(path.name)
    return int(match.group(1)) if match else None


def split_files(files) -> tuple[str, dict[str, list[Path]]]:
    """(rule, split -> files): the standard section split when the files have it, else the
    sample split by file (see the module docstring)."""
    files = sorted((Path(f) for f in files), key=lambda p: (p.name, str(p)))
    sections = {_section(f) for f in files}
    if {22, 23} <= sections and sections & set(STANDARD_SECTIONS["train"]):
        split = {name: [f for f in files if _section(f) in wanted]
                 for name, wanted in STANDARD_SECTIONS.items()}
        return "standard sections: train 02-21, valid 22, test 23", split
    if len(files) < 3:
        raise TreebankError(f"need at least 3 .mrg files to split by file, got {len(files)}")
    held_out = max(1, round(len(files) * SAMPLE_HELD_OUT_FRACTION))
    train, valid, test = (files[:-2 * held_out], files[-2 * held_out:-held_out],
                          files[-held_out:])
    rule = (f"by file in name order: train {train[0].name}..{train[-1].name}, "
            f"valid {valid[0].name}..{valid[-1].name}, test {test[0].name}..{test[-1].name}")
    return rule, {"train": train, "valid": valid, "test": test}
