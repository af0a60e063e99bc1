"""Parallel corpora as file pairs per split, whatever their origin.

A `ParallelCorpus` names a language pair and, for each split ("train", "valid", "test"),
a `ParallelFiles` pair: line i of the source file translates line i of the target file.
Files may be gzipped. The other corpus modules return this type:

- `text_file_corpus` for plain files given by the user,
- `transformer_tf.data.multi30k.multi30k_corpus` for Multi30k (local copy or download),
- `transformer_tf.data.wmt.write_tfds_corpus` for TFDS datasets such as WMT14.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Mapping

from transformer_tf.data.text_lines import CorpusError, check_parallel_files

SPLITS = ("train", "valid", "test")
DATA_ENV_VAR = "TRANSFORMER_TF_DATA"


@dataclasses.dataclass(frozen=True)
class ParallelFiles:
    """One split of a parallel corpus: two line-aligned text files (optionally .gz)."""

    source: Path
    target: Path

    def __post_init__(self):
        object.__setattr__(self, "source", Path(self.source))
        object.__setattr__(self, "target", Path(self.target))

    def check(self, reject_control_characters: bool = False) -> int:
        """Number of sentence pairs; raises CorpusError subclasses on bad input (see
        `text_lines.check_parallel_files`)."""
        return check_parallel_files(self.source, self.target, reject_control_characters)

    def __iter__(self):  # allows `source, target = files`
        return iter((self.source, self.target))


@dataclasses.dataclass(frozen=True)
class ParallelCorpus:
    """A language pair and its file pairs per split.

    Attributes:
      name: a short name recorded in prepared data ("multi30k", "wmt14_translate/de-en", ...).
      source_language, target_language: language codes ("en", "de", ...).
      splits: split name ("train", "valid", "test") -> ParallelFiles. "train" is required.
    """

    name: str
    source_language: str
    target_language: str
    splits: Mapping[str, ParallelFiles]

    def __post_init__(self):
        if "train" not in self.splits:
            raise CorpusError(f"corpus {self.name!r} has no 'train' split")
        unknown = sorted(set(self.splits) - set(SPLITS))
        if unknown:
            raise CorpusError(f"corpus {self.name!r}: unknown split(s) {unknown}; use {SPLITS}")
        if self.source_language == self.target_language:
            raise CorpusError(
                f"source and target language are both {self.source_language!r}"
            )

    def check(self) -> dict[str, int]:
        """Checks every split (line counts, UTF-8); returns split -> number of pairs."""
        return {split: files.check() for split, files in self.splits.items()}


def _pair(value) -> ParallelFiles | None:
    if value is None:
        return None
    if isinstance(value, ParallelFiles):
        return value
    source, target = value
    return ParallelFiles(Path(source), Path(target))


def text_file_corpus(
    source_language: str,
    target_language: str,
    train,
    valid=None,
    test=None,
    name: str = "text",
) -> ParallelCorpus:
    """A corpus from user files; each split is a (source_path, target_path) pair or None."""
    splits = {
        split: files
        for split, files in (("train", _pair(train)), ("valid", _pair(valid)), ("test", _pair(test)))
        if files is not None
    }
    return ParallelCorpus(name, source_language, target_language, splits)


def data_root(data_dir=None) -> Path | None:
    """The data root: `data_dir` if given, else $TRANSFORMER_TF_DATA, else None."""
    if data_dir is not None:
        return Path(data_dir)
    env = os.environ.get(DATA_ENV_VAR)
    return Path(env) if env else None


def default_cache_dir() -> Path:
    """Where downloads go: $TRANSFORMER_TF_CACHE, else $XDG_CACHE_HOME/transformer_tf,
    else ~/.cache/transformer_tf."""
    if os.environ.get("TRANSFORMER_TF_CACHE"):
        return Path(os.environ["TRANSFORMER_TF_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "transformer_tf"
