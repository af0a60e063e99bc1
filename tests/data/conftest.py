"""Fixtures shared by the data tests: Multi30k slices and small BPE models, built once.

BPE models here are small (vocabulary 1,000 incl. 256 byte pieces) and trained on a few
thousand sentences, so they take well under a second to train.
"""
from __future__ import annotations

import gzip
import itertools
import pathlib

import pytest

from transformer_tf.data import bpe
from transformer_tf.data.corpora import text_file_corpus
from transformer_tf.data.prepared_writer import prepare_corpus

SMALL_VOCAB = 1000


def read_gz_lines(path, limit=None) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8", newline="\n") as handle:
        lines = (line.rstrip("\n") for line in handle)
        return list(itertools.islice(lines, limit))


def write_lines(path, lines) -> pathlib.Path:
    path = pathlib.Path(path)
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        for line in lines:
            handle.write(line + "\n")
    return path


@pytest.fixture(scope="session")
def gz_lines():
    """read_gz_lines(path, limit=None) -> list of str (test modules cannot import conftest)."""
    return read_gz_lines


@pytest.fixture(scope="session")
def multi30k_dir(shared_data_dir) -> pathlib.Path:
    return shared_data_dir / "multi30k"


@pytest.fixture(scope="session")
def small_bpe_proto(multi30k_dir) -> bytes:
    """BPE model proto trained on 3,000 training sentences of each of en, de, fr."""
    sentences = []
    for language in ("en", "de", "fr"):
        sentences += read_gz_lines(multi30k_dir / f"train.{language}.gz", 3000)
    return bpe.train_bpe(sentences, bpe.BpeOptions(vocab_size=SMALL_VOCAB))


@pytest.fixture(scope="session")
def small_tokenizer(small_bpe_proto) -> bpe.BpeTokenizer:
    return bpe.BpeTokenizer(small_bpe_proto)


@pytest.fixture(scope="session")
def small_corpus_files(multi30k_dir, tmp_path_factory) -> dict:
    """Plain-text en-de slices of Multi30k: train 4,000, valid 300, test 200 pairs."""
    directory = tmp_path_factory.mktemp("m30k_slice")
    files = {}
    for split, stem, limit in (("train", "train", 4000), ("valid", "val", 300),
                               ("test", "test_2016_flickr", 200)):
        files[split] = tuple(
            write_lines(directory / f"{split}.{lang}",
                        read_gz_lines(multi30k_dir / f"{stem}.{lang}.gz", limit))
            for lang in ("en", "de")
        )
    return files


@pytest.fixture(scope="session")
def small_prepared(small_corpus_files, tmp_path_factory):
    """A prepared directory (vocabulary 1,000, max_length 64) over the en-de slices."""
    corpus = text_file_corpus("en", "de", **small_corpus_files, name="m30k-slice")
    out = tmp_path_factory.mktemp("prepared")
    return prepare_corpus(corpus, out, bpe.BpeOptions(vocab_size=SMALL_VOCAB), max_length=64)
