"""Multi30k as a TensorFlow Datasets builder, so it loads like any other TFDS dataset.

Importing this module registers the builder "multi30k" with configs "en-de", "en-fr" and
"de-fr" (Translation features; supervised keys in that order) and splits train (29,000),
validation (val, 1,014) and test (test_2016_flickr, 1,000):

    import tensorflow_datasets as tfds
    import transformer_tf.data.multi30k_tfds  # registers "multi30k"
    ds = tfds.load("multi30k/en-de", split="train", data_dir=D, as_supervised=True,
                   download_and_prepare_kwargs={"download_config":
                       tfds.download.DownloadConfig(manual_dir="../shared/data/multi30k")})

The raw files are taken from the manual_dir if it holds them, else from
$TRANSFORMER_TF_DATA/multi30k, else downloaded (with SHA-256 checks, see `multi30k.py`)
into the download manager's download_dir.
"""
from __future__ import annotations

from pathlib import Path

import tensorflow_datasets as tfds
from etils import epath

from transformer_tf.data import multi30k
from transformer_tf.data.text_lines import iter_parallel_lines

PAIRS = (("en", "de"), ("en", "fr"), ("de", "fr"))
TFDS_SPLITS = {"train": "train", "validation": "valid", "test": "test"}


class Multi30k(tfds.core.GeneratorBasedBuilder):
    """Multi30k Task 1: English, German and French image descriptions (raw, cased)."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Task 1 raw text; test split is test_2016_flickr."}
    BUILDER_CONFIGS = [
        tfds.core.BuilderConfig(name=f"{a}-{b}", description=f"Multi30k task 1, {a} and {b}")
        for a, b in PAIRS
    ]
    MANUAL_DOWNLOAD_INSTRUCTIONS = (
        "Optional. Put the Multi30k task 1 raw files (train.<lang>.gz, val.<lang>.gz, "
        "test_2016_flickr.<lang>.gz from github.com/multi30k/dataset data/task1/raw) in the "
        "manual_dir; otherwise $TRANSFORMER_TF_DATA/multi30k is used, else they are downloaded."
    )

    @tfds.core.utils.classproperty
    @classmethod
    def code_path(cls) -> epath.Path:
        # TFDS finds a builder's source through `importlib_resources`, which this stack does
        # not install; the answer is simply this file (TFDS reads checksums.tsv beside it).
        return epath.Path(__file__)

    @property
    def _languages(self) -> tuple[str, str]:
        first, second = self.builder_config.name.split("-")
        return first, second

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description="Multi30k task 1 (Elliott et al., 2016): 31,014 image descriptions "
                        "translated between English, German and French.",
            features=tfds.features.Translation(languages=self._languages),
            supervised_keys=self._languages,
            homepage="https://github.com/multi30k/dataset",
        )

    def _raw_dir(self, dl_manager) -> Path:
        try:
            manual = Path(dl_manager.manual_dir)
        except (AssertionError, ValueError):  # no manual_dir given, or it is empty
            manual = None
        if manual is not None:
            found = multi30k.find_local(manual, self._languages)
            if found is not None:
                return found
        return multi30k.locate(None, self._languages,
                               cache_dir=Path(dl_manager.download_dir) / "multi30k")

    def _split_generators(self, dl_manager):
        directory = self._raw_dir(dl_manager)
        return {
            tfds_split: self._generate_examples(directory, multi30k.SPLIT_FILES[ours])
            for tfds_split, ours in TFDS_SPLITS.items()
        }

    def _generate_examples(self, directory: Path, stem: str):
        first, second = self._languages
        pairs = iter_parallel_lines(directory / f"{stem}.{first}.gz",
                                    directory / f"{stem}.{second}.gz")
        for index, (a, b) in enumerate(pairs):
            yield index, {first: a, second: b}
