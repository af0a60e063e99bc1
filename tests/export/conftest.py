"""Fixtures for the serving-robustness tests: a tiny tokenizer, a tiny Transformer that
prefers line-break pieces, and its two exports (text and ids-only)."""
import gzip
import itertools

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import EOS_ID, PAD_ID, DecodingConfig
from transformer_tf.presets import get_preset
from transformer_tf.data.bpe import BpeOptions, BpeTokenizer, python_processor, train_bpe
from transformer_tf.export.saved_model import export_saved_model
from transformer_tf.inference.translator import Translator
from transformer_tf.models.transformer import Transformer

SERVING_DECODING = DecodingConfig(beam_size=2, alpha=0.6, max_extra_length=4)
MAX_POSITION = 24


@pytest.fixture(scope="session")
def serving_bpe(shared_data_dir):
    """A 400-piece BPE model (byte fallback) over 600 Multi30k lines per language, with one
    sentence holding a carriage return so that a learned piece contains one."""
    lines = ["A dog\rruns."]
    for lang in ("en", "de"):
        with gzip.open(shared_data_dir / "multi30k" / f"train.{lang}.gz", "rt",
                       encoding="utf-8") as handle:
            lines += [next(handle).rstrip("\n") for _ in range(600)]
    return BpeTokenizer(train_bpe(lines, BpeOptions(vocab_size=400)))


class LineBreakLovingTransformer(Transformer):
    """A Transformer whose every step adds +30 to the logits of `favourite_ids`: left
    alone, a search emits nothing else."""

    favourite_ids: tuple = ()

    def decode_step(self, ids, step, state):
        logits, state = super().decode_step(ids, step, state)
        bias = tf.reduce_sum(tf.one_hot(list(self.favourite_ids), tf.shape(logits)[-1]), 0)
        return logits + 30.0 * bias, state


@pytest.fixture(scope="session")
def line_break_model(serving_bpe):
    """(model, favourite ids): <0x0A>, <0x0D> and the learned piece holding "\\r"."""
    processor = python_processor(serving_bpe.model_proto)
    favourite = [processor.piece_to_id("<0x0A>"), processor.piece_to_id("<0x0D>")]
    favourite += [i for i in range(processor.get_piece_size())
                  if not processor.is_byte(i) and "\r" in processor.id_to_piece(i)]
    assert len(favourite) == 3, favourite
    tf.keras.utils.set_random_seed(5)
    config = get_preset("tiny").model.replace(
        vocab_size=serving_bpe.vocab_size, max_position=MAX_POSITION, d_model=16,
        num_heads=2, d_ff=32, num_layers=1)
    model = LineBreakLovingTransformer(config)
    model.favourite_ids = tuple(favourite)
    model.build()
    embeddings = model.source_embedding.embeddings  # prefer EOS a little: varied lengths
    embeddings.assign(embeddings.numpy() + np.eye(1, embeddings.shape[0], 3).T * 0.3)
    return model, favourite


@pytest.fixture(scope="session")
def serving_translator(line_break_model, serving_bpe):
    return Translator(line_break_model[0], serving_bpe, SERVING_DECODING)


@pytest.fixture(scope="session")
def serving_exports(serving_translator, serving_bpe, built_once_per_session):
    """{"text": path, "ids": path}: the translator exported both ways (once per session:
    the workers' translators are built from the same seed, which the key checks)."""
    import hashlib

    digest = hashlib.sha256(serving_bpe.model_proto)
    for weight in serving_translator.model.weights:
        digest.update(weight.numpy().tobytes())

    def build(root):
        export_saved_model(serving_translator, root / "text" / "1")
        export_saved_model(serving_translator, root / "ids" / "1", ids_only=True)

    root = built_once_per_session("serving_exports", digest.hexdigest()[:16], build)
    return {"text": root / "text" / "1", "ids": root / "ids" / "1"}


@pytest.fixture(scope="session")
def tiny_run(serving_bpe, tmp_path_factory):
    """A training run directory (run_config.json, bpe.model, checkpoints/ckpt-1) of a tiny
    random Transformer over `serving_bpe`, for the export commands; d_model 16, 24
    positions, beam 2."""
    from transformer_tf.config import TrainingConfig
    from transformer_tf.rundir import checkpoints, model_dir as model_dir_lib
    from transformer_tf.training.fit import build_model_and_optimizer

    run = tmp_path_factory.mktemp("tiny_run") / "model"
    run.mkdir()
    config = get_preset("tiny").model.replace(
        vocab_size=serving_bpe.vocab_size, max_position=MAX_POSITION, d_model=16,
        num_heads=2, d_ff=32, num_layers=1)
    training = TrainingConfig()
    model_dir_lib.write_run_config(run, model_dir_lib.RunConfig(
        model=config, training=training, decoding=SERVING_DECODING, data_dir="unused",
        preset="tiny"))
    proto = run.parent / "bpe.model"
    proto.write_bytes(serving_bpe.model_proto)
    model_dir_lib.write_tokenizer(run, proto)
    tf.keras.utils.set_random_seed(7)
    trainer = build_model_and_optimizer(config, training)
    checkpoints.make_manager(trainer.network, trainer.optimizer, run, max_to_keep=1).save(
        checkpoint_number=1)
    return run


@pytest.fixture(scope="session")
def small_wordpiece_tokenizer(shared_data_dir):
    """A word-piece tokenizer (about 300 pieces) over 300 Multi30k lines per language."""
    from transformer_tf.data.bpe import make_tokenizer
    from transformer_tf.data.wordpiece import train_wordpiece

    lines = []
    for lang in ("en", "de"):
        with gzip.open(shared_data_dir / "multi30k" / f"train.{lang}.gz", "rt",
                       encoding="utf-8") as handle:
            lines += [next(handle).rstrip("\n") for _ in range(300)]
    return make_tokenizer(train_wordpiece(lines, 300))


def tiny_parser():
    """A Parser over a tiny random parsing model ("slot" leaves, tree grammar, greedy)."""
    from transformer_tf.data.linearise import tree_symbols
    from transformer_tf.inference.parser import Parser

    symbols = tree_symbols(["S", "NP", "VP"], "slot")
    lines = ["the cat sat on the mat .", "( S ( NP XX XX ) )", "dogs bark loudly"] * 30
    tokenizer = BpeTokenizer(train_bpe(lines, BpeOptions(
        vocab_size=300, user_defined_symbols=tuple("\u2581" + s for s in symbols))))
    tf.keras.utils.set_random_seed(11)
    model = Transformer(get_preset("tiny").model.replace(
        vocab_size=tokenizer.vocab_size, max_position=32, d_model=16, num_heads=2, d_ff=32,
        num_layers=1))
    model.build()
    return Parser(Translator(model, tokenizer, DecodingConfig(
        beam_size=1, alpha=0.3, max_extra_length=8, grammar="tree")))


@pytest.fixture(scope="session")
def variant_exports(line_break_model, serving_bpe, small_wordpiece_tokenizer, serving_exports,
                    tmp_path_factory):
    """{variant: SavedModel path} of every export variant, each exported once: "text" and
    "ids" (`serving_exports`), "lanes" (3 lanes of chunks of 4, no row limit), "xla"
    (chunks of 2 compiled by XLA), "wordpiece" (a model over word pieces, each request
    searched whole: chunk size 0) and "parser" (sentences in, trees out)."""
    from transformer_tf.export.saved_model import export_parser

    root = tmp_path_factory.mktemp("variant_exports")
    model = line_break_model[0]
    decodings = {"lanes": SERVING_DECODING.replace(chunk_size=4, lanes=3),
                 "xla": SERVING_DECODING.replace(chunk_size=2, xla=True)}
    paths = dict(serving_exports)
    for name, decoding in decodings.items():
        paths[name] = export_saved_model(Translator(model, serving_bpe, decoding),
                                         root / name / "1", warmup=False,
                                         max_batch_rows=0 if name == "lanes" else 256)
    tf.keras.utils.set_random_seed(13)
    wordpiece_model = Transformer(get_preset("tiny").model.replace(
        vocab_size=small_wordpiece_tokenizer.vocab_size, max_position=MAX_POSITION,
        d_model=16, num_heads=2, d_ff=32, num_layers=1))
    wordpiece_model.build()
    paths["wordpiece"] = export_saved_model(
        Translator(wordpiece_model, small_wordpiece_tokenizer,
                   SERVING_DECODING.replace(chunk_size=0)),
        root / "wordpiece" / "1", warmup=False)
    paths["parser"] = export_parser(tiny_parser(), root / "parser" / "1", warmup=False)
    return paths


def _clean_length(row, max_tokens):
    """Source pieces the model sees: up to the first EOS, PAD dropped, at most max_tokens."""
    kept = [i for i in itertools.takewhile(lambda i: i != EOS_ID, row) if i != PAD_ID]
    return min(len(kept), max_tokens)


def _check_ids_output(out, rows, vocab, max_tokens, extra, max_target, forbidden):
    """The serving rules for an ids signature's output `out` ({name: numpy}) of source
    `rows`: one output per row; a row with no piece gives no ids and score 0; otherwise
    1..limit ids inside the vocabulary, none of `forbidden`, ending in EOS unless cut at
    the limit, a finite score <= 0."""
    ids, length, score = out["ids"], out["length"], out["score"]
    assert ids.shape[0] == length.shape[0] == score.shape[0] == len(rows)
    assert ids.shape[1] <= max_target and np.isfinite(score).all()
    for row, source in enumerate(rows):
        n = _clean_length(source, max_tokens)
        if n == 0:
            assert length[row] == 0 and score[row] == 0.0 and not ids[row].any(), source
            continue
        limit = min(n + 1 + extra, max_target)
        assert 1 <= length[row] <= limit and score[row] <= 0.0, source
        emitted = ids[row, :length[row]]
        assert ((emitted >= 0) & (emitted < vocab)).all() and not ids[row, length[row]:].any()
        assert not np.isin(emitted, forbidden).any(), emitted
        assert emitted[-1] == EOS_ID or length[row] == limit, emitted


@pytest.fixture(scope="session")
def check_ids_output():
    """`_check_ids_output`, for the fuzz tests of the ids signatures."""
    return _check_ids_output
