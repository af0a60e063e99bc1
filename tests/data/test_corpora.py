"""Corpora: Multi30k lookup and checked download (from a local HTTP server), TFDS WMT14 end
to end on mock data."""
import http.server
import shutil
import threading

import pytest
import tensorflow_datasets as tfds

from transformer_tf.data import multi30k
from transformer_tf.data.bpe import BpeOptions
from transformer_tf.data.corpora import ParallelCorpus, ParallelFiles, text_file_corpus
from transformer_tf.data.datasets import make_training_dataset
from transformer_tf.data.prepared_reader import load_prepared
from transformer_tf.data.prepared_writer import prepare_dataset
from transformer_tf.data.text_lines import CorpusError
from transformer_tf.data.wmt import tfds_pairs, wmt14_name, write_tfds_corpus


def test_multi30k_found_through_data_dir_and_environment(shared_data_dir, monkeypatch):
    monkeypatch.delenv("TRANSFORMER_TF_DATA", raising=False)
    for data_dir in (shared_data_dir, shared_data_dir / "multi30k"):
        corpus = multi30k.multi30k_corpus("en", "de", data_dir=data_dir, download_if_missing=False)
        assert corpus.splits["valid"].source.name == "val.en.gz"
        assert corpus.splits["test"].target.name == "test_2016_flickr.de.gz"
    monkeypatch.setenv("TRANSFORMER_TF_DATA", str(shared_data_dir))
    corpus = multi30k.multi30k_corpus("fr", "en", download_if_missing=False)
    assert corpus.splits["train"] == ParallelFiles(shared_data_dir / "multi30k" / "train.fr.gz",
                                                   shared_data_dir / "multi30k" / "train.en.gz")
    assert corpus.check() == multi30k.SPLIT_SIZES


@pytest.fixture()
def mirror(multi30k_dir, tmp_path):
    """A copy of the canonical download location (en and de only), to be corrupted at will."""
    directory = tmp_path / "mirror"
    directory.mkdir()
    for name in multi30k.file_names(("en", "de")):
        shutil.copy(multi30k_dir / name, directory / name)
    return directory


@pytest.fixture()
def http_mirror(mirror):
    """(mirror directory, URL template, list of requested paths): `mirror` served over
    HTTP on 127.0.0.1 by a server thread that lives for the test."""
    requested = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(mirror), **kwargs)

        def log_message(self, format, *args):  # quiet; remember what was asked for
            requested.append(self.path)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield mirror, f"http://127.0.0.1:{server.server_address[1]}/{{file}}", requested
    finally:
        server.shutdown()
        server.server_close()


def test_multi30k_download_over_http_checks_checksums(http_mirror, multi30k_dir, tmp_path,
                                                      monkeypatch):
    monkeypatch.delenv("TRANSFORMER_TF_DATA", raising=False)
    mirror, url, requested = http_mirror
    cache = tmp_path / "cache"
    corpus = multi30k.multi30k_corpus("de", "en", cache_dir=cache, url_template=url)
    names = sorted(multi30k.file_names(("en", "de")))
    assert sorted(p.name for p in cache.iterdir()) == names  # no .part left
    assert sorted(requested) == sorted(f"/{name}" for name in names)
    for name in names:
        assert (cache / name).read_bytes() == (multi30k_dir / name).read_bytes()
    assert corpus.splits["train"].source == cache / "train.de.gz"
    assert corpus.splits["valid"].check() == 1014
    # Found again without fetching: the mirror may disappear.
    shutil.rmtree(mirror)
    assert multi30k.multi30k_corpus("de", "en", cache_dir=cache, url_template=url,
                                    download_if_missing=False).splits == corpus.splits
    assert len(requested) == len(names)


def test_multi30k_download_rejects_a_corrupted_file(http_mirror, tmp_path, monkeypatch):
    monkeypatch.delenv("TRANSFORMER_TF_DATA", raising=False)
    mirror, url, _ = http_mirror
    (mirror / "val.de.gz").write_bytes(b"not the real file")
    cache = tmp_path / "cache"
    with pytest.raises(multi30k.ChecksumError, match="val.de.gz: checksum mismatch"):
        multi30k.multi30k_corpus("en", "de", cache_dir=cache, url_template=url)
    assert not (cache / "val.de.gz").exists()
    assert not [p for p in cache.iterdir() if p.name.endswith(".part")]
    (mirror / "train.en.gz").unlink()  # a file missing on the server: HTTP 404
    shutil.rmtree(cache)
    with pytest.raises(CorpusError, match="train.en.gz: could not download .*404"):
        multi30k.multi30k_corpus("en", "de", cache_dir=cache, url_template=url)
    assert not [p for p in cache.iterdir() if "train.en" in p.name]


def test_multi30k_download_keeps_a_verified_partial_file(multi30k_dir, tmp_path, monkeypatch):
    # An interrupted run left every file fetched and verified, but not yet renamed; the
    # mirror is gone, yet nothing needs fetching.
    monkeypatch.delenv("TRANSFORMER_TF_DATA", raising=False)
    cache = tmp_path / "cache"
    cache.mkdir()
    for name in multi30k.file_names(("en", "fr")):
        shutil.copy(multi30k_dir / name, cache / f".{name}.part")
    corpus = multi30k.multi30k_corpus("fr", "en", cache_dir=cache,
                                      url_template="http://127.0.0.1:9/{file}")
    assert corpus.splits["test"].source == cache / "test_2016_flickr.fr.gz"
    assert sorted(p.name for p in cache.iterdir()) == sorted(multi30k.file_names(("en", "fr")))


def test_multi30k_missing_without_download_is_an_error(tmp_path, monkeypatch):
    monkeypatch.delenv("TRANSFORMER_TF_DATA", raising=False)
    with pytest.raises(CorpusError, match="downloading is off \\(--no-download\\): put train.en.gz"):
        multi30k.multi30k_corpus("en", "de", cache_dir=tmp_path, download_if_missing=False)
    with pytest.raises(CorpusError, match="no language"):
        multi30k.multi30k_corpus("en", "cs")


def test_corpus_validation(tmp_path):
    with pytest.raises(CorpusError, match="no 'train' split"):
        ParallelCorpus("x", "en", "de", {"valid": ParallelFiles("a", "b")})
    with pytest.raises(CorpusError, match="both 'en'"):
        text_file_corpus("en", "en", ("a", "b"))


def test_wmt14_names():
    assert wmt14_name("en", "de") == wmt14_name("de", "en") == "wmt14_translate/de-en"
    assert wmt14_name("fr", "en") == "wmt14_translate/fr-en"
    with pytest.raises(CorpusError):
        wmt14_name("en", "cs")


def test_tfds_wmt14_end_to_end_on_mock_data(tmp_path):
    with tfds.testing.mock_data(num_examples=24):
        pairs = list(tfds_pairs("wmt14_translate/de-en", "train", "en", "de").as_numpy_iterator())
        assert len(pairs) == 24 and all(isinstance(s, bytes) for pair in pairs for s in pair)
        prepared = prepare_dataset("wmt14", "en", "de", tmp_path / "wmt",
                                   bpe_options=BpeOptions(vocab_size=300), max_length=64)
    assert not (tmp_path / "wmt" / ".tfds_text").exists()  # staging text removed
    prepared = load_prepared(tmp_path / "wmt")
    assert prepared.metadata["dataset"] == "wmt14_translate/de-en"
    assert prepared.metadata["inputs"]["valid"] == {"tfds": "wmt14_translate/de-en",
                                                    "split": "validation"}
    assert {s: prepared.num_examples(s) for s in ("train", "valid", "test")} == {
        "train": 24, "valid": 24, "test": 24}
    # The en side of the prepared text is what TFDS gave for "en".
    first_en = prepared.files("train").source.read_text(encoding="utf-8").splitlines()[0]
    assert first_en == pairs[0][0].decode().replace("\n", " ")
    batches = list(make_training_dataset(prepared, tokens_per_batch=256, max_length=64,
                                         seed=0).as_numpy_iterator())
    assert sum(labels.shape[0] for _, labels in batches) == 24
    for (source, target_input), labels in batches:
        assert source.size <= 256 and labels.size <= 256 and target_input.shape == labels.shape


def test_write_tfds_corpus_keeps_each_sentence_on_one_line(tmp_path):
    with tfds.testing.mock_data(num_examples=5):
        corpus = write_tfds_corpus("wmt14_translate/fr-en", "fr", "en", tmp_path,
                                   splits={"train": "train"})
    assert corpus.check() == {"train": 5}
    assert corpus.name == "wmt14_translate/fr-en" and corpus.splits["train"].source.suffix == ".fr"


def test_multi30k_tfds_builder_from_manual_dir_and_environment(multi30k_dir, gz_lines,
                                                               tmp_path, monkeypatch):
    import transformer_tf.data.multi30k_tfds  # noqa: F401  (registers "multi30k")

    monkeypatch.delenv("TRANSFORMER_TF_DATA", raising=False)
    config = tfds.download.DownloadConfig(manual_dir=str(multi30k_dir))
    builder = tfds.builder("multi30k/en-fr", data_dir=str(tmp_path / "tfds"))
    builder.download_and_prepare(download_config=config)
    splits = builder.info.splits
    assert {name: splits[name].num_examples for name in ("train", "validation", "test")} == {
        "train": 29000, "validation": 1014, "test": 1000}
    assert builder.info.supervised_keys == ("en", "fr")
    pairs = tfds_pairs("multi30k/en-fr", "validation", "en", "fr",
                       data_dir=str(tmp_path / "tfds"), download=False)
    got = {(a.decode(), b.decode()) for a, b in pairs.as_numpy_iterator()}
    want = set(zip(gz_lines(multi30k_dir / "val.en.gz"), gz_lines(multi30k_dir / "val.fr.gz")))
    assert got == want

    # No manual_dir: found through $TRANSFORMER_TF_DATA.
    monkeypatch.setenv("TRANSFORMER_TF_DATA", str(multi30k_dir.parent))
    test = tfds.load("multi30k/de-fr", split="test", data_dir=str(tmp_path / "tfds2"),
                     as_supervised=True)
    assert sum(1 for _ in test) == 1000
