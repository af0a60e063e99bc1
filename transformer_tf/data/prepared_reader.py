"""The prepared data directory on disk: its layout, `prepared.json`, and the reader.

`transformer_tf.data.prepared_writer` writes such a directory; `load_prepared` reads it back as a
`PreparedData`.

Layout of a prepared directory (all paths in the JSON are relative to it):

    prepared.json
    bpe.model, bpe.vocab         shared sentencepiece BPE model (+ readable vocabulary), or
                                 a word-piece model ("model_type": "wordpiece")
    train.<src>, train.<tgt>     plain UTF-8, one sentence per line
    valid.<src>, valid.<tgt>     (if the corpus has them)
    test.<src>,  test.<tgt>

`prepared.json`:

    {
      "format_version": 1,
      "dataset": "multi30k",
      "source_language": "en", "target_language": "de",
      "vocab_size": 8000,
      "special_ids": {"pad": 0, "unk": 1, "bos": 2, "eos": 3},
      "bpe": {"model": "bpe.model", "vocab": "bpe.vocab", "model_type": "bpe",
              "normalization": "identity", "remove_extra_whitespaces": true,
              "byte_fallback": true, "character_coverage": 0.9999,
              "max_training_sentences": 2000000, "seed": 1234,
              "user_defined_symbols": [], "sha256": "..."},
      "splits": {"train": {"source": "train.en", "target": "train.de", "examples": 29000,
                           "sha256": "..."}, "valid": {...}, "test": {...}},
      "filtering": {"max_length": 256, "dropped_empty": 0, "dropped_too_long": 0},
      "corpus_sha256": "...",            # of the input files (decompressed), in split order
      "inputs": {"train": {"source": "/abs/train.en.gz", "target": "..."}, ...}
    }

A treebank prepared for parsing (`transformer_tf.data.treebank_to_prepared`) has the same layout
with target language "tree" (linearised trees), plus `{split}.gold` (the gold trees) and a
"treebank" entry in `prepared.json` (split rule, files, labels, gold file names).

A reader accepts only `format_version == FORMAT_VERSION` and the project's special ids
(`SPECIAL_IDS`, from `transformer_tf.config`).
"""
from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from transformer_tf.data import bpe as bpe_lib
from transformer_tf.data.corpora import ParallelFiles
from transformer_tf.data.text_lines import CorpusError
from transformer_tf.runtime.json_file import JsonFileError, read_json_file

FORMAT_VERSION = 1
METADATA_FILE = "prepared.json"
BPE_FILE = "bpe.model"
# The target language of a treebank prepared for parsing (linearised trees).
TREE_LANGUAGE = "tree"
# "special_ids" of prepared.json: the ids the BPE model reserves (see transformer_tf.config).
SPECIAL_IDS = {"pad": PAD_ID, "unk": UNK_ID, "bos": BOS_ID, "eos": EOS_ID}


@dataclasses.dataclass(frozen=True)
class PreparedData:
    """A prepared data directory, as `load_prepared` reads it.

    Attributes:
      directory: the directory.
      source_language, target_language: language codes.
      vocab_size: size of the shared BPE vocabulary (ids 0..vocab_size-1).
      splits: split name -> ParallelFiles (absolute paths of plain-text files).
      metadata: the whole `prepared.json` as a dict.
    """

    directory: Path
    source_language: str
    target_language: str
    vocab_size: int
    splits: dict[str, ParallelFiles]
    metadata: dict[str, Any]

    @property
    def bpe_model_path(self) -> Path:
        return self.directory / self.metadata["bpe"]["model"]

    @functools.cached_property
    def tokenizer(self):
        """The shared in-graph tokenizer, BPE or word pieces (built on first use)."""
        return bpe_lib.make_tokenizer(self.bpe_model_path.read_bytes())

    @property
    def normalization(self) -> str:
        return self.metadata["bpe"]["normalization"]

    def files(self, split: str) -> ParallelFiles:
        """The (source, target) files of `split`; KeyError names the available splits."""
        if split not in self.splits:
            raise KeyError(f"{self.directory} has no split {split!r}; it has {sorted(self.splits)}")
        return self.splits[split]

    def num_examples(self, split: str) -> int:
        return int(self.metadata["splits"][split]["examples"])


def load_prepared(directory) -> PreparedData:
    """Reads a directory written by `prepare_corpus` (or `scripts/prepare_data.py`).

    Raises:
      CorpusError: no `prepared.json`, an unsupported format version, or missing files.
    """
    directory = Path(directory).resolve()
    path = directory / METADATA_FILE
    if not path.is_file():
        raise CorpusError(
            f"{directory} is not a prepared data directory (no {METADATA_FILE}); "
            "create one with scripts/prepare_data.py"
        )
    try:
        metadata = read_json_file(path)
    except JsonFileError as error:
        raise CorpusError(f"{error}; prepare the data again") from None
    if not isinstance(metadata, dict):
        raise CorpusError(f"{path}: not a prepared data description; prepare the data again")
    if metadata.get("format_version") != FORMAT_VERSION:
        raise CorpusError(
            f"{path}: format_version {metadata.get('format_version')!r} is not supported "
            f"(expected {FORMAT_VERSION}); prepare the data again"
        )
    if metadata["special_ids"] != SPECIAL_IDS:
        raise CorpusError(f"{path}: special ids {metadata['special_ids']} != {SPECIAL_IDS}")
    splits = {
        split: ParallelFiles(directory / entry["source"], directory / entry["target"])
        for split, entry in metadata["splits"].items()
    }
    missing = [str(p) for files in splits.values() for p in files if not p.is_file()]
    if not (directory / metadata["bpe"]["model"]).is_file():
        missing.append(str(directory / metadata["bpe"]["model"]))
    if missing:
        raise CorpusError(f"prepared data {directory} is missing files: {missing}")
    return PreparedData(
        directory=directory,
        source_language=metadata["source_language"],
        target_language=metadata["target_language"],
        vocab_size=int(metadata["vocab_size"]),
        splits=splits,
        metadata=metadata,
    )
