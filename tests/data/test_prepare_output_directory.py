"""What `prepare_corpus` may write over: prepared data only, and only once the new
prepared directory is complete; a run, a SavedModel or a user's files are refused."""
import hashlib

import pytest

from transformer_tf.data.bpe import BpeOptions
from transformer_tf.data.corpora import text_file_corpus
from transformer_tf.data.prepared_reader import load_prepared
from transformer_tf.data.prepared_writer import STAGING_DIR, prepare_corpus
from transformer_tf.data.text_lines import CorpusError

WORDS = "a dog runs the cat sleeps one bird sings over green hills and blue water".split()


def corpus(tmp_path, name, pairs=200):
    """A small en-de corpus of `pairs` lines in tmp_path/name.{en,de}."""
    lines = [" ".join(WORDS[(i + k) % len(WORDS)] for k in range(3 + i % 5))
             for i in range(pairs)]
    (tmp_path / f"{name}.en").write_text("".join(f"{x}\n" for x in lines))
    (tmp_path / f"{name}.de").write_text("".join(f"{x.upper()}\n" for x in lines))
    return text_file_corpus("en", "de", (tmp_path / f"{name}.en", tmp_path / f"{name}.de"))


def digests(directory):
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(directory.iterdir()) if path.is_file()}


def test_a_run_directory_is_refused_before_anything_is_written(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run_config.json").write_text("{}")
    (run / "bpe.model").write_bytes(b"the run's own tokenizer")
    before = digests(run)
    with pytest.raises(CorpusError, match=r"run is not empty and holds no prepared data "
                                          r"\(bpe.model, run_config.json\)"):
        prepare_corpus(corpus(tmp_path, "train"), run, BpeOptions(vocab_size=300))
    assert digests(run) == before and sorted(p.name for p in run.iterdir()) == [
        "bpe.model", "run_config.json"]


def test_a_failed_prepare_leaves_the_prepared_data_it_would_replace(tmp_path):
    out = tmp_path / "out"
    first = prepare_corpus(corpus(tmp_path, "train"), out, BpeOptions(vocab_size=300))
    before = digests(out)
    # Every pair is longer than 2 tokens: nothing left to train on, after the BPE model
    # and the staged training text were written.
    with pytest.raises(CorpusError, match="no training pair left"):
        prepare_corpus(corpus(tmp_path, "other", pairs=150), out, BpeOptions(vocab_size=320),
                       max_length=2)
    assert digests(out) == before and not (out / STAGING_DIR).exists()
    assert load_prepared(out).num_examples("train") == first.num_examples("train") == 200


def test_prepared_data_is_replaced_by_a_complete_new_one(tmp_path):
    out = tmp_path / "out"
    prepare_corpus(corpus(tmp_path, "train"), out, BpeOptions(vocab_size=300))
    before = digests(out)
    (out / STAGING_DIR).mkdir()  # as a killed prepare would leave it
    (out / STAGING_DIR / "train.en").write_text("half written\n")
    again = prepare_corpus(corpus(tmp_path, "other", pairs=150), out, BpeOptions(vocab_size=320))
    assert again.num_examples("train") == 150 and not (out / STAGING_DIR).exists()
    after = digests(out)
    assert all(after[name] != before[name] for name in ("train.en", "prepared.json"))
    assert sorted(p.name for p in out.iterdir()) == [
        "bpe.model", "bpe.vocab", "prepared.json", "train.de", "train.en"]
