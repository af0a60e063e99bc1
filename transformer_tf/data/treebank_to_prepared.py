"""A treebank as prepared data: the translation data format, with words as the source and
linearised trees as the target.

`prepare_treebank(treebank_dir, out_dir)` reads every `.mrg` file under `treebank_dir`,
splits them by file (`treebank_reader.split_files`: the standard sections of a full treebank, or
the documented split of the sample), cleans the trees (`treebank_reader.clean_tree`), and writes a
prepared directory (`transformer_tf.data.prepared_reader`) through `prepared_writer.prepare_corpus`:

  {split}.en     the words of each sentence, separated by single spaces
  {split}.tree   its linearisation (`linearise.linearise`, leaves "slot" or "words")
  bpe.model      one shared BPE model; every bracket token (and the word slot) is a
                 user-defined piece, so each tree token is exactly one id
  {split}.gold   (added here) the cleaned gold trees, one per line, TOP root, real tags:
                 the reference for EVALB scoring

and records the split rule, the files of each split, the constituent labels, the leaf
convention and the gold files under "treebank" in prepared.json. Nothing is dropped from valid and test; training
trees longer than `max_length` target tokens are dropped (and counted) as for translation.
"""
from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

from transformer_tf.data import bpe as bpe_lib
from transformer_tf.data.corpora import text_file_corpus
from transformer_tf.data.linearise import (
    DEFAULT_LEAVES, WORD_SLOT, constituent_labels, linearise, tree_symbols)
from transformer_tf.data.prepared_reader import (
    BPE_FILE, METADATA_FILE, TREE_LANGUAGE, PreparedData, load_prepared)
from transformer_tf.data.prepared_writer import prepare_corpus
from transformer_tf.data.treebank_reader import (
    TreebankError, clean_tree, find_mrg_files, read_mrg_file, split_files)

logger = logging.getLogger(__name__)

SOURCE_LANGUAGE, TARGET_LANGUAGE = "en", TREE_LANGUAGE
GOLD_SUFFIX = "gold"
WORD_START = "\u2581"  # sentencepiece's word-start mark


def tree_token_ids(processor, vocab_size: int) -> dict[str, int]:
    """{piece text without the word-start mark: its first id below vocab_size} of a
    subword processor (control and unknown pieces left out)."""
    token_ids: dict[str, int] = {}
    for piece_id in range(min(processor.get_piece_size(), vocab_size)):
        if processor.is_control(piece_id) or processor.is_unknown(piece_id):
            continue
        token = processor.id_to_piece(piece_id).lstrip(WORD_START)
        token_ids.setdefault(token, piece_id)
    return token_ids


def leaves_of_vocabulary(model_proto: bytes) -> str:
    """The leaf convention ("slot" or "words", `data.linearise`) of a parsing model's
    vocabulary: "slot" when the word slot is one of its pieces. (`prepare_treebank`
    refuses "words" data whose vocabulary learned the slot's text as a piece.)"""
    processor = bpe_lib.python_processor(model_proto)
    return "slot" if WORD_SLOT in tree_token_ids(processor, processor.get_piece_size()) else "words"


def gold_path(prepared: PreparedData, split: str) -> Path:
    return prepared.directory / prepared.metadata["treebank"]["gold"][split]


def prepare_treebank(treebank_dir, out_dir, vocab_size: int = 8000,
                     max_length: int | None = None, subword: str = "bpe",
                     leaves: str = DEFAULT_LEAVES) -> PreparedData:
    """Prepare `treebank_dir` (a directory of .mrg files) into `out_dir`; see the module
    docstring. Raises TreebankError (file and line) on an ill-formed file.

    `subword`: "bpe" (sentencepiece; the tree tokens are user-defined pieces) or
    "wordpiece" (words kept whole where the vocabulary holds them, as the paper's 16k-token
    vocabulary; the tree tokens are whole pieces, added where the learner left them out)."""
    out_dir = Path(out_dir)
    rule, split = split_files(find_mrg_files(treebank_dir))
    logger.info("treebank split %s", rule)
    trees, dropped_empty = {}, {}
    for name, files in split.items():
        if not files:
            raise TreebankError(f"{treebank_dir}: split {name!r} has no file")
        cleaned = [clean_tree(tree) for path in files for tree in read_mrg_file(path)]
        trees[name] = [t for t in cleaned if t is not None]
        dropped_empty[name] = len(cleaned) - len(trees[name])
    labels = sorted(constituent_labels(trees["train"]))
    staging = out_dir / ".treebank_text"
    staging.mkdir(parents=True, exist_ok=True)
    pairs = {}
    for name, split_trees in trees.items():
        source = staging / f"{name}.{SOURCE_LANGUAGE}"
        target = staging / f"{name}.{TARGET_LANGUAGE}"
        source.write_text("".join(" ".join(t.words()) + "\n" for t in split_trees),
                          encoding="utf-8")
        target.write_text("".join(" ".join(linearise(t, leaves)) + "\n" for t in split_trees),
                          encoding="utf-8")
        pairs[name] = (source, target)
    corpus = text_file_corpus(SOURCE_LANGUAGE, TARGET_LANGUAGE, pairs["train"],
                              pairs["valid"], pairs["test"], name="ptb")
    options = bpe_lib.BpeOptions(
        vocab_size=vocab_size, subword=subword,
        user_defined_symbols=tuple((WORD_START if subword == "bpe" else "") + s
                                   for s in tree_symbols(labels, leaves)))
    try:
        prepare_corpus(corpus, out_dir, options, max_length,
                       inputs={name: {"files": [str(f.resolve()) for f in files]}
                               for name, files in split.items()})
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    learned = leaves_of_vocabulary((out_dir / BPE_FILE).read_bytes())
    if learned != leaves:
        raise TreebankError(
            f"{out_dir}: the vocabulary learned {WORD_SLOT!r} as a piece, so models of it "
            f"would be read as {learned!r} leaves; prepare with --leaves slot or another "
            "--vocab-size")
    gold = {}
    for name, split_trees in trees.items():
        gold[name] = f"{name}.{GOLD_SUFFIX}"
        (out_dir / gold[name]).write_text("".join(t.to_string() + "\n" for t in split_trees),
                                          encoding="utf-8")
    metadata_path = out_dir / METADATA_FILE
    metadata = json.loads(metadata_path.read_text())
    metadata["treebank"] = {
        "directory": str(Path(treebank_dir).resolve()), "split_rule": rule,
        "files": {name: [f.name for f in files] for name, files in split.items()},
        "sentences": {name: len(t) for name, t in trees.items()},
        "dropped_without_words": dropped_empty, "labels": labels, "gold": gold,
        "leaves": leaves,
    }
    metadata_path.write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n")
    return load_prepared(out_dir)
