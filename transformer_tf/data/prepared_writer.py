"""Prepared data directories: checked plain-text corpora + shared BPE model + JSON description.

`prepare_corpus(corpus, out_dir, ...)` does, in order:

1. checks every split (equal line counts, valid UTF-8) -> `CorpusError` before anything
   is written;
2. copies the training pairs as plain text, dropping pairs with an empty side (empty
   after `normalize_text`, i.e. nothing to tokenize);
3. trains the shared BPE model on both sides of the kept training text;
4. if `max_length` is given, drops the training pairs the tf.data pipeline would drop
   (`length_filter.drop_reasons`: a side over max_length tokens, EOS / BOS counted);
5. copies valid and test unchanged (nothing is dropped from evaluation data);
6. writes `prepared.json`. The numbers dropped are logged and recorded there.

Steps 2-6 write into a staging directory inside the output directory; only a complete
prepared directory replaces what the output directory held (prepared data of an earlier
run), so a failure leaves that as it was. A directory that holds anything else (a
training run, a SavedModel) is refused before anything is written.

The directory's layout and `prepared.json` are described (and read) in
`transformer_tf.data.prepared_reader`.
"""
from __future__ import annotations

import functools
import itertools
import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np

from transformer_tf.data import bpe as bpe_lib
from transformer_tf.data import multi30k, wmt
from transformer_tf.data.corpora import SPLITS, ParallelCorpus, ParallelFiles, text_file_corpus
from transformer_tf.data.length_filter import SPECIAL_TOKENS_PER_SIDE, drop_reasons
from transformer_tf.data.prepared_reader import (
    BPE_FILE,
    FORMAT_VERSION,
    METADATA_FILE,
    SPECIAL_IDS,
    PreparedData,
    load_prepared,
)
from transformer_tf.data.text_lines import (
    CorpusError,
    iter_lines,
    iter_parallel_lines,
    sha256_of_files,
    sha256_of_raw_file,
)

logger = logging.getLogger(__name__)

# Where `prepare_corpus` writes before the prepared files replace those of `out_dir`.
STAGING_DIR = ".staging"


def _write_pairs(pairs, files: ParallelFiles) -> int:
    count = 0
    with open(files.source, "w", encoding="utf-8") as source_out, \
            open(files.target, "w", encoding="utf-8") as target_out:
        for source, target in pairs:
            source_out.write(source + "\n")
            target_out.write(target + "\n")
            count += 1
    return count


def _length_filter(processor, max_length: int, dropped: dict, chunk: int = 8192):
    """Generator transform dropping the (source, target) pairs that
    `length_filter.drop_reasons` rejects, by their sentencepiece ids; adds the numbers
    dropped to dropped["empty"] and dropped["too_long"]. Encodes `chunk` pairs at a time."""

    def lengths(ids) -> np.ndarray:  # int [chunk], the special token counted
        return np.array([len(x) for x in ids], np.int64) + SPECIAL_TOKENS_PER_SIDE

    def apply(pairs):
        pairs = iter(pairs)
        while True:
            block = list(itertools.islice(pairs, chunk))
            if not block:
                return
            sources = processor.encode([s for s, _ in block], num_threads=os.cpu_count() or 1)
            targets = processor.encode([t for _, t in block], num_threads=os.cpu_count() or 1)
            empty, too_long = drop_reasons(lengths(sources), lengths(targets), max_length)
            dropped["empty"] += int(empty.sum())
            dropped["too_long"] += int(too_long.sum())
            yield from itertools.compress(block, ~(empty | too_long))

    return apply


def prepare_corpus(
    corpus: ParallelCorpus,
    out_dir,
    bpe_options: bpe_lib.BpeOptions = bpe_lib.BpeOptions(),
    max_length: int | None = None,
    inputs: dict | None = None,
    reject_control_characters: bool = False,
    tokenizer=None,
) -> PreparedData:
    """Checks `corpus`, trains the shared BPE model, writes a prepared directory.

    Args:
      corpus: the parallel corpus (needs a "train" split).
      out_dir: output directory: new, empty, or prepared data, which is replaced once the
        new files are complete (a failure leaves it as it was); anything else is refused.
      bpe_options: vocabulary size, normalisation, etc. of the BPE model.
      max_length: drop training pairs longer than this many tokens per side (BPE tokens
        + 1); None keeps all lengths. Valid and test are never filtered.
      inputs: what to record as the origin of each split in the JSON "inputs" field
        (default: the absolute paths of the corpus files).
      reject_control_characters: refuse the corpus (ControlCharacterError) if a line
        holds NUL or another control character, instead of a warning that counts them.
      tokenizer: the path of an existing sentencepiece model (e.g. a run's bpe.model) to
        use instead of training one, so that a run can be fine-tuned on this corpus
        (`train --init-from`); `bpe_options` must then describe how it was trained.

    Returns:
      The PreparedData, as `load_prepared(out_dir)` would return it.

    Raises:
      LineCountMismatchError, InvalidUtf8Error, CorpusError: bad input, before any output.
    """
    out_dir = Path(out_dir)
    # Read (and parsed) before anything is written: a wrong path fails at once.
    given_proto = Path(tokenizer).read_bytes() if tokenizer is not None else None
    if given_proto is not None:
        try:
            bpe_lib.python_processor(given_proto)
        except RuntimeError as error:
            raise CorpusError(f"{tokenizer}: not a sentencepiece model ({error})") from None
    counts = {}
    for split, files in corpus.splits.items():
        counts[split] = files.check(reject_control_characters)
        logger.info("%s: %d pairs in %s / %s", split, counts[split], files.source, files.target)
        if counts[split] == 0 and split != "train":
            logger.warning("the %s split is empty (%s / %s): nothing to %s on", split,
                           files.source, files.target,
                           "validate" if split == "valid" else "test")
    src, tgt = corpus.source_language, corpus.target_language
    for split, files in corpus.splits.items():
        for path, language in zip(files, (src, tgt)):
            if path.resolve() == (out_dir / f"{split}.{language}").resolve():
                raise CorpusError(
                    f"input {path} would be overwritten by the prepared copy; choose another "
                    "output directory"
                )
    _check_output_directory(out_dir)
    staging = out_dir / STAGING_DIR
    if staging.exists():  # left by a prepare that was killed
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    try:
        _write_prepared(corpus, staging, counts, bpe_options, max_length, inputs,
                        given_proto, tokenizer)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _publish(staging, out_dir)
    return load_prepared(out_dir)


def _write_prepared(corpus, out_dir: Path, counts: dict, bpe_options, max_length, inputs,
                    given_proto, tokenizer) -> None:
    """Steps 2-6 of the module docstring into `out_dir` (`prepare_corpus`'s staging
    directory), `counts` the pairs per split that the check counted."""
    src, tgt = corpus.source_language, corpus.target_language
    normalize = functools.partial(bpe_lib.normalize_text, normalization=bpe_options.normalization)
    dropped = {"empty": 0, "too_long": 0}

    # 1. Training text without empty pairs.
    def non_empty(pairs):
        for source, target in pairs:
            if normalize(source) and normalize(target):
                yield source, target
            else:
                dropped["empty"] += 1

    out = {split: ParallelFiles(out_dir / f"{split}.{src}", out_dir / f"{split}.{tgt}")
           for split in corpus.splits}
    train_in = corpus.splits["train"]
    staged = ParallelFiles(out_dir / f".train.{src}.tmp", out_dir / f".train.{tgt}.tmp")
    _write_pairs(non_empty(iter_parallel_lines(*train_in)), staged)

    # 2. Shared BPE model on both sides (or the one given).
    if given_proto is not None:
        model_proto = given_proto
        logger.info("using the tokenizer %s (not training one)", tokenizer)
    else:
        both_sides = itertools.chain(iter_lines(staged.source), iter_lines(staged.target))
        model_proto = bpe_lib.train_subword_model(both_sides, bpe_options)
    model_path = bpe_lib.save_model(model_proto, out_dir / BPE_FILE)
    processor = bpe_lib.python_processor(model_proto)

    # 3. Length filter.
    pairs = iter_parallel_lines(*staged)
    if max_length is not None:
        pairs = _length_filter(processor, max_length, dropped)(pairs)
    kept = _write_pairs(pairs, out["train"])
    for path in staged:
        path.unlink()
    if dropped["empty"] or dropped["too_long"]:
        logger.warning(
            "dropped %d empty and %d over-long (> %s tokens) training pairs of %d; kept %d",
            dropped["empty"], dropped["too_long"], max_length, counts["train"], kept,
        )
    else:
        logger.info("kept all %d training pairs", kept)
    if kept == 0:
        raise CorpusError("no training pair left after dropping empty and over-long pairs")

    # 4. Evaluation splits, unchanged.
    examples = {"train": kept}
    for split in SPLITS[1:]:
        if split in corpus.splits:
            examples[split] = _write_pairs(iter_parallel_lines(*corpus.splits[split]), out[split])

    input_paths = [p for split in SPLITS if split in corpus.splits for p in corpus.splits[split]]
    metadata = {
        "format_version": FORMAT_VERSION,
        "dataset": corpus.name,
        "source_language": src,
        "target_language": tgt,
        "vocab_size": int(processor.get_piece_size()),
        "special_ids": dict(SPECIAL_IDS),
        "bpe": {
            "model": model_path.name,
            "vocab": model_path.with_suffix(".vocab").name,
            "model_type": bpe_options.subword,
            "normalization": bpe_options.normalization,
            "remove_extra_whitespaces": True,
            "byte_fallback": bpe_options.byte_fallback and bpe_options.subword == "bpe",
            "character_coverage": bpe_options.character_coverage,
            "max_training_sentences": bpe_options.max_training_sentences,
            "seed": bpe_options.seed,
            "user_defined_symbols": list(bpe_options.user_defined_symbols),
            "sha256": sha256_of_raw_file(model_path),
            **({"copied_from": str(Path(tokenizer).resolve())} if tokenizer is not None else {}),
        },
        "splits": {
            split: {
                "source": files.source.name,
                "target": files.target.name,
                "examples": examples[split],
                "sha256": sha256_of_files(files),
            }
            for split, files in out.items()
        },
        "filtering": {
            "max_length": max_length,
            "dropped_empty": dropped["empty"],
            "dropped_too_long": dropped["too_long"],
        },
        "corpus_sha256": sha256_of_files(input_paths),
        "inputs": inputs or {
            split: {"source": str(files.source.resolve()), "target": str(files.target.resolve())}
            for split, files in corpus.splits.items()
        },
    }
    (out_dir / METADATA_FILE).write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n")


def _check_output_directory(out_dir: Path) -> None:
    """Refuses (CorpusError) an `out_dir` that holds anything but prepared data: a
    training run, a SavedModel or files of the user's own would lose their bpe.model and
    whatever else shares a prepared file's name."""
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise CorpusError(f"{out_dir} is a file, not a directory; choose another output "
                          "directory")
    if (out_dir / METADATA_FILE).exists():
        return  # prepared data: prepared again, in place
    foreign = sorted(path.name for path in out_dir.iterdir()
                     if not path.name.startswith("."))  # our staging, a killed run's
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise CorpusError(
            f"{out_dir} is not empty and holds no prepared data ({shown}): preparing there "
            "could replace files it holds (a run's bpe.model); choose an empty or new "
            "output directory")


def _publish(staging: Path, out_dir: Path) -> None:
    """Moves a complete prepared directory from `staging` into `out_dir`: the old
    prepared.json goes first and the new one comes last, so that `out_dir` never passes
    for prepared data while its files are being swapped."""
    (out_dir / METADATA_FILE).unlink(missing_ok=True)
    for path in sorted(staging.iterdir()):
        if path.name != METADATA_FILE:
            os.replace(path, out_dir / path.name)
    os.replace(staging / METADATA_FILE, out_dir / METADATA_FILE)
    staging.rmdir()


DATASETS = ("multi30k", "wmt14", "files")


def prepare_dataset(
    dataset: str,
    source_language: str,
    target_language: str,
    out_dir,
    *,
    bpe_options: bpe_lib.BpeOptions = bpe_lib.BpeOptions(),
    max_length: int | None = None,
    data_dir=None,
    download: bool = True,
    files: dict | None = None,
    reject_control_characters: bool = False,
    tokenizer=None,
) -> PreparedData:
    """Prepares a named dataset into `out_dir` (what `scripts/prepare_data.py` runs).

    Args:
      dataset: "multi30k" (local copy under `data_dir` / $TRANSFORMER_TF_DATA, else
        downloaded), "wmt14" (TFDS wmt14_translate/{de-en,fr-en}; `data_dir` is the TFDS
        data directory) or "files" (`files` maps "train" / "valid" / "test" to
        (source_path, target_path); "train" is required).
      source_language, target_language: the translation direction.
      out_dir: the prepared directory to write.
      bpe_options, max_length, reject_control_characters, tokenizer: see `prepare_corpus`.
      data_dir, download: where the corpus is, and whether it may be downloaded.
    """
    out_dir = Path(out_dir)
    staging = inputs = None
    if dataset == "multi30k":
        corpus = multi30k.multi30k_corpus(source_language, target_language, data_dir=data_dir,
                                          download_if_missing=download)
    elif dataset == "wmt14":
        staging = out_dir / ".tfds_text"
        corpus = wmt.write_tfds_corpus(wmt.wmt14_name(source_language, target_language),
                                       source_language, target_language, staging,
                                       data_dir=data_dir, download=download)
        inputs = {split: {"tfds": corpus.name, "split": wmt.TFDS_SPLITS[split]}
                  for split in corpus.splits}
    elif dataset == "files":
        files = dict(files or {})
        if files.get("train") is None:
            raise CorpusError("dataset 'files' needs training files (source and target)")
        corpus = text_file_corpus(source_language, target_language, files.get("train"),
                                  files.get("valid"), files.get("test"))
    else:
        raise CorpusError(f"unknown dataset {dataset!r}; choose one of {DATASETS}")
    try:
        return prepare_corpus(corpus, out_dir, bpe_options, max_length, inputs,
                              reject_control_characters, tokenizer)
    finally:
        if staging is not None:
            for path in staging.glob("*"):
                path.unlink()
            staging.rmdir()
