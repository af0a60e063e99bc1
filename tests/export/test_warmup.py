"""TF Serving warm-up requests (`export.warmup`): every export carries them, they parse as
TF Serving's PredictionLog records, every one runs through the SavedModel's signature as
TF Serving would replay it, and an XLA export's set covers every compiled shape."""
import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import EOS_ID, DecodingConfig
from transformer_tf.data.bpe import python_processor
from transformer_tf.decoding.model_search import XLA_LENGTH_BUCKET
from transformer_tf.export.warmup import (
    WARMUP_FILE, one_piece_word, read_warmup_requests, warmup_batches)
from transformer_tf.inference.loading import EXTRA_DIR, read_export_info

MAX_POSITION = 24


@pytest.mark.parametrize("variant, input_name", [("text", "text"), ("ids", "source_ids")])
def test_every_warmup_request_runs_through_the_signature(serving_exports, variant,
                                                         input_name):
    path = serving_exports[variant]
    requests = read_warmup_requests(path / EXTRA_DIR / WARMUP_FILE)
    chunk_size = read_export_info(path)["decoding"]["chunk_size"]
    assert [len(inputs[input_name]) for _, inputs in requests] == [1, chunk_size]
    serving = tf.saved_model.load(str(path)).signatures["serving_default"]
    for signature, inputs in requests:
        assert signature == "serving_default" and list(inputs) == [input_name]
        outputs = serving(**{name: tf.constant(value) for name, value in inputs.items()})
        assert all(len(out) == len(inputs[input_name]) for out in outputs.values())


@pytest.mark.parametrize("lanes", [1, 3])
def test_xla_warmup_covers_every_compiled_shape(serving_bpe, lanes):
    proto = serving_bpe.model_proto
    processor = python_processor(proto)
    word = one_piece_word(proto)
    assert len(processor.encode(word)) == 1 and len(processor.encode(f"{word} {word}")) == 2
    decoding = DecodingConfig(chunk_size=8, xla=True, lanes=lanes)
    shapes = set()
    for batch in warmup_batches(proto, decoding, MAX_POSITION):
        tokens = {len(ids) + 1 for ids in processor.encode(batch)}  # + EOS
        assert len(tokens) == 1  # one bucket per request
        # Rows per lane (search_in_lanes deals them out in turn).
        shapes.add((-(-len(batch) // lanes), tokens.pop()))
    # The chunk sizes a lane's rows can be cut into (1, 2, 4, 8 rows) x every source
    # bucket up to the model's maximum, once each.
    buckets = range(XLA_LENGTH_BUCKET, MAX_POSITION + 1, XLA_LENGTH_BUCKET)
    expected = {(size, length) for size in (1, 2, 4, 8) for length in buckets}
    assert shapes == expected
    assert len(warmup_batches(proto, decoding, MAX_POSITION)) == len(expected)
    # Without XLA: one short sentence, and a full chunk in every lane.
    plain = warmup_batches(proto, DecodingConfig(chunk_size=8, lanes=lanes), MAX_POSITION)
    assert [len(batch) for batch in plain] == [1, 8 * lanes]
    assert EOS_ID not in np.concatenate([processor.encode(b)[0] for b in plain])
