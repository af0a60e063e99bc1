"""Fixtures for the serving-robustness tests: a tiny tokenizer, a tiny Transformer that
prefers line-break pieces, and its two exports (text and ids-only)."""
import gzip

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import DecodingConfig, get_preset
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
def serving_exports(serving_translator, tmp_path_factory):
    """{"text": path, "ids": path}: the translator exported both ways."""
    root = tmp_path_factory.mktemp("serving_exports")
    return {"text": export_saved_model(serving_translator, root / "text" / "1"),
            "ids": export_saved_model(serving_translator, root / "ids" / "1", ids_only=True)}
