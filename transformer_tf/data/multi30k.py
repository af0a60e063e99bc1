"""Multi30k Task 1 (English, German, French image descriptions), raw cased text.

Splits: train (29,000 pairs), valid = "val" (1,014), test = "test_2016_flickr" (1,000).
Files are `<name>.<lang>.gz`, one sentence per line.

Where the files come from, first match wins:

1. `data_dir` if given: `data_dir/multi30k/` or `data_dir/` itself, whichever holds the
   files. If neither does, they are downloaded into `data_dir/multi30k/` (when
   `download=True`).
2. `$TRANSFORMER_TF_DATA/multi30k/` if it holds the files.
3. The download cache `cache_dir` (default `default_cache_dir()/multi30k`), filled from
   `MULTI30K_URL` when needed. Every downloaded file is checked against `MULTI30K_SHA256`
   before it is moved into place; a mismatch raises `ChecksumError` and leaves nothing.
"""
from __future__ import annotations

import logging
import os
import tempfile
import urllib.request
from pathlib import Path

from transformer_tf.data.corpora import (
    ParallelCorpus,
    ParallelFiles,
    data_root,
    default_cache_dir,
)
from transformer_tf.data.textio import CorpusError, sha256_of_raw_file

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


def download(directory, languages=LANGUAGES, url_template: str = MULTI30K_URL) -> Path:
    """Downloads the missing Multi30k files for `languages` into `directory`.

    Each file is fetched to a temporary name, its SHA-256 checked against
    `MULTI30K_SHA256`, and only then renamed into place. `url_template` (with a `{file}`
    field) may point elsewhere, e.g. a `file://` mirror.

    Returns:
      `directory` as a Path.

    Raises:
      ChecksumError: a fetched file has the wrong digest (it is deleted).
      CorpusError: a fetch failed (network error, missing file).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name in file_names(languages):
        final = directory / name
        if final.is_file():
            continue
        url = url_template.format(file=name)
        logger.info("downloading %s", url)
        handle, temporary = tempfile.mkstemp(prefix=name + ".", suffix=".part", dir=directory)
        try:
            with os.fdopen(handle, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
                for block in iter(lambda: response.read(1 << 20), b""):
                    out.write(block)
            actual = sha256_of_raw_file(Path(temporary))
            expected = MULTI30K_SHA256[name]
            if actual != expected:
                raise ChecksumError(
                    f"checksum mismatch for {url}: expected sha256 {expected}, got {actual}"
                )
            os.replace(temporary, final)
        except OSError as error:  # urllib.error.URLError is an OSError
            raise CorpusError(f"could not download {url}: {error}") from error
        finally:
            if os.path.exists(temporary):
                os.remove(temporary)
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
            f"{data_dir or '$TRANSFORMER_TF_DATA'} and {target}) and downloading is off"
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
