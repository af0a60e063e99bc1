"""Multi30k Task 1 (English, German, French image descriptions), raw cased text.

Splits: train (29,000 pairs), valid = "val" (1,014), test = "test_2016_flickr" (1,000).
Files are `<name>.<lang>.gz`, one sentence per line.

Where the files come from, first match wins:

1. `data_dir` if given: `data_dir/multi30k/` or `data_dir/` itself, whichever holds the
   files. If neither does, they are downloaded into `data_dir/multi30k/` (when
   `download=True`).
2. `$TRANSFORMER_TF_DATA/multi30k/` if it holds the files.
3. The download cache `cache_dir` (default `default_cache_dir()/multi30k`), filled from
   `MULTI30K_URL` when needed.

Downloads go through `keras.utils.get_file` with `file_hash` (SHA-256 from
`MULTI30K_SHA256`): each file is fetched under a hidden `.NAME.part` name, verified, and
only then renamed into place; a mismatch raises `ChecksumError` and leaves nothing behind.
A `.part` file that an interrupted run left and that already has the right digest is used
without fetching it again. The TFDS builder (`multi30k_tfds`) finds and fetches the files
through `locate` too, so there is one code path whether the files are local or downloaded.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path

from transformer_tf.data.corpora import (
    ParallelCorpus,
    ParallelFiles,
    data_root,
    default_cache_dir,
)
from transformer_tf.data.text_lines import CorpusError, sha256_of_raw_file

logger = logging.getLogger(__name__)

LANGUAGES = ("en", "de", "fr")
# Our split name -> the Multi30k file stem.
SPLIT_FILES = {"train": "train", "valid": "val", "test": "test_2016_flickr"}
SPLIT_SIZES = {"train": 29000, "valid": 1014, "test": 1000}
MULTI30K_URL = "https://github.com/multi30k/dataset/raw/master/data/task1/raw/{file}"
MULTI30K_SHA256 = {
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
}


class ChecksumError(CorpusError):
    """A downloaded file does not have the expected SHA-256."""


def file_names(languages) -> list[str]:
    """The Multi30k file names for `languages`, all splits."""
    return [f"{stem}.{lang}.gz" for stem in SPLIT_FILES.values() for lang in languages]


def _has_files(directory: Path, languages) -> bool:
    return all((directory / name).is_file() for name in file_names(languages))


def find_local(data_dir=None, languages=LANGUAGES) -> Path | None:
    """The directory holding the Multi30k files for `languages`, without downloading.

    Looks in `data_dir` (or $TRANSFORMER_TF_DATA when `data_dir` is None), in its
    `multi30k/` subdirectory first. Returns None when the files are not there.
    """
    root = data_root(data_dir)
    if root is None:
        return None
    for candidate in (root / "multi30k", root):
        if _has_files(candidate, languages):
            return candidate
    return None


def _fetch(name: str, url: str, directory: Path) -> None:
    """`directory/name` from `url` through keras.utils.get_file, SHA-256 checked."""
    from keras.utils import get_file  # imported on use: only downloads need Keras here

    partial = directory / f".{name}.part"
    expected = MULTI30K_SHA256[name]
    try:
        # get_file shows its progress bar on stdout, which belongs to the scripts' results.
        with contextlib.redirect_stdout(sys.stderr):
            get_file(fname=partial.name, origin=url, file_hash=expected,
                     hash_algorithm="sha256", cache_dir=str(directory), cache_subdir="")
        os.replace(partial, directory / name)
    except ValueError:  # get_file's "Incomplete or corrupted file detected"
        actual = sha256_of_raw_file(partial) if partial.exists() else "nothing"
        raise ChecksumError(f"{name}: checksum mismatch for {url}: expected sha256 "
                            f"{expected}, got {actual}") from None
    except Exception as error:  # get_file raises a bare Exception for URL errors
        raise CorpusError(f"{name}: could not download {url}: {error}") from error
    finally:
        partial.unlink(missing_ok=True)


def download(directory, languages=LANGUAGES, url_template: str = MULTI30K_URL) -> Path:
    """Downloads the missing Multi30k files for `languages` into `directory` (see the
    module docstring for how). `url_template` (with a `{file}` field) may point elsewhere,
    e.g. a mirror (http://, https:// or file://).

    Returns:
      `directory` as a Path.

    Raises:
      ChecksumError: a fetched file has the wrong digest (nothing of it is kept).
      CorpusError: a fetch failed (network error, missing file) or `directory` is not
        writable.
    """
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CorpusError(f"cannot create the download directory {directory}: {error}") from None
    if not os.access(directory, os.W_OK):  # get_file would silently write elsewhere
        raise CorpusError(f"the download directory {directory} is not writable")
    for name in file_names(languages):
        if not (directory / name).is_file():
            url = url_template.format(file=name)
            logger.info("downloading %s", url)
            _fetch(name, url, directory)
    return directory


def locate(
    data_dir=None,
    languages=LANGUAGES,
    download_if_missing: bool = True,
    cache_dir=None,
    url_template: str = MULTI30K_URL,
) -> Path:
    """The directory of the Multi30k files, downloading them if needed (see module doc)."""
    found = find_local(data_dir, languages)
    if found is not None:
        return found
    target = Path(data_dir) / "multi30k" if data_dir is not None else (
        Path(cache_dir) if cache_dir is not None else default_cache_dir() / "multi30k"
    )
    if _has_files(target, languages):
        return target
    if not download_if_missing:
        raise CorpusError(
            f"Multi30k files for {list(languages)} not found (looked in "
            f"{data_dir or '$TRANSFORMER_TF_DATA'} and {target}) and downloading is off "
            f"(--no-download): put {', '.join(file_names(languages))} in one of those "
            "directories, or allow the download"
        )
    return download(target, languages, url_template)


def multi30k_corpus(
    source_language: str = "en",
    target_language: str = "de",
    data_dir=None,
    download_if_missing: bool = True,
    cache_dir=None,
    url_template: str = MULTI30K_URL,
) -> ParallelCorpus:
    """Multi30k as a ParallelCorpus with splits train / valid / test (test 2016 Flickr)."""
    for language in (source_language, target_language):
        if language not in LANGUAGES:
            raise CorpusError(f"Multi30k has no language {language!r}; choose from {LANGUAGES}")
    languages = (source_language, target_language)
    directory = locate(data_dir, languages, download_if_missing, cache_dir, url_template)
    splits = {
        split: ParallelFiles(
            directory / f"{stem}.{source_language}.gz", directory / f"{stem}.{target_language}.gz"
        )
        for split, stem in SPLIT_FILES.items()
    }
    return ParallelCorpus("multi30k", source_language, target_language, splits)
