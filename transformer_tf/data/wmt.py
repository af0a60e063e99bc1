"""TensorFlow Datasets translation corpora (WMT14 En-De and En-Fr, the paper's data).

`tfds_pairs` reads a TFDS translation dataset as (source, target) string pairs through
`tfds.load` (with its usual `data_dir` / `download` options). `write_tfds_corpus` writes
its splits as plain line-aligned text files, so the rest of the pipeline (BPE training,
tf.data bucketing) treats every corpus alike.

TFDS split names map to ours: train -> "train", validation -> "valid", test -> "test"
(for wmt14_translate, validation is newstest2013 and test is newstest2014).
"""
from __future__ import annotations

import logging
from pathlib import Path

import tensorflow as tf

from transformer_tf.data.corpora import ParallelCorpus, ParallelFiles
from transformer_tf.data.text_lines import CorpusError

logger = logging.getLogger(__name__)

WMT14_DATASETS = {
    frozenset(("de", "en")): "wmt14_translate/de-en",
    frozenset(("fr", "en")): "wmt14_translate/fr-en",
}
TFDS_SPLITS = {"train": "train", "valid": "validation", "test": "test"}


def wmt14_name(source_language: str, target_language: str) -> str:
    """The TFDS name of the WMT14 pair, e.g. ("en", "de") -> "wmt14_translate/de-en"."""
    try:
        return WMT14_DATASETS[frozenset((source_language, target_language))]
    except KeyError:
        raise CorpusError(
            f"WMT14 has no {source_language}-{target_language} pair; use en-de or en-fr"
        ) from None


def tfds_pairs(
    name: str,
    split: str,
    source_language: str,
    target_language: str,
    data_dir=None,
    download: bool = True,
) -> tf.data.Dataset:
    """A TFDS translation split as a dataset of (source, target) tf.string scalars.

    Args:
      name: TFDS name, e.g. "wmt14_translate/de-en".
      split: TFDS split name ("train", "validation", "test", or a slice like "train[:1%]").
      source_language, target_language: feature keys of the Translation feature.
      data_dir: TFDS data directory (None: TFDS' default, ~/tensorflow_datasets).
      download: let TFDS download and prepare the data if it is not there.
    """
    # Imported on use: tensorflow_datasets adds ~0.3-0.7 s to every import of this module
    # (and of data.prepared_writer, which imports it), and only the WMT path reads TFDS.
    import tensorflow_datasets as tfds

    dataset = tfds.load(name, split=split, data_dir=data_dir, download=download,
                        shuffle_files=False)
    return dataset.map(lambda example: (example[source_language], example[target_language]))


def _clean(raw: bytes) -> str:
    # A sentence must stay on one line: line breaks inside it would misalign the files.
    return raw.decode("utf-8", errors="replace").replace("\r", " ").replace("\n", " ")


def write_tfds_corpus(
    name: str,
    source_language: str,
    target_language: str,
    out_dir,
    data_dir=None,
    download: bool = True,
    splits=TFDS_SPLITS,
) -> ParallelCorpus:
    """Writes a TFDS translation dataset as `<out_dir>/<split>.<lang>` text files.

    Args:
      name: TFDS name, e.g. "wmt14_translate/de-en".
      source_language, target_language: the language pair (direction of translation).
      out_dir: directory for the text files (created).
      data_dir, download: passed to `tfds.load`.
      splits: our split name -> TFDS split name; a split absent from the dataset is skipped
        (except "train").

    Returns:
      A ParallelCorpus over the written files.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for split, tfds_split in splits.items():
        try:
            pairs = tfds_pairs(name, tfds_split, source_language, target_language,
                               data_dir, download)
        except (ValueError, KeyError) as error:
            if split == "train":
                raise
            logger.warning("%s has no split %r (%s); skipping it", name, tfds_split, error)
            continue
        files = ParallelFiles(out_dir / f"{split}.{source_language}",
                              out_dir / f"{split}.{target_language}")
        count = 0
        with open(files.source, "w", encoding="utf-8") as source_out, \
                open(files.target, "w", encoding="utf-8") as target_out:
            for source, target in pairs.batch(4096).as_numpy_iterator():
                for s, t in zip(source, target):
                    source_out.write(_clean(s) + "\n")
                    target_out.write(_clean(t) + "\n")
                    count += 1
        logger.info("wrote %d %s pairs of %s to %s", count, split, name, out_dir)
        written[split] = files
    return ParallelCorpus(name, source_language, target_language, written)
