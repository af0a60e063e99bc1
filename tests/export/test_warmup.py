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
    MAX_RECORDS, WARMUP_FILE, one_piece_word, read_warmup_requests, warmup_batches)
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


@pytest.mark.parametrize("chunk_size, shapes", [(128, 8 * 128), (256, 9 * 128)])
def test_xla_warmup_stays_within_tf_servings_record_cap(serving_bpe, chunk_size, shapes,
                                                        caplog):
    """At 1,024 positions an XLA export has 128 length buckets; with chunk sizes up to
    128 or 256 that was 1,024 or 1,152 requests, over the 1,000 TF Serving reads."""
    proto = serving_bpe.model_proto
    processor = python_processor(proto)
    decoding = DecodingConfig(chunk_size=chunk_size, xla=True)
    with caplog.at_level("WARNING", logger="transformer_tf.export.warmup"):
        batches = warmup_batches(proto, decoding, 1024)
    assert MAX_RECORDS == 1000 and len(batches) <= MAX_RECORDS
    assert caplog.messages == [f"warm-up: {len(batches)} of {shapes} (chunk size, length "
                               "bucket) shapes kept (TF Serving reads at most 1000 records); "
                               "the others compile on their first request"]
    kept = {(len(batch), len(processor.encode(batch[0])) + 1) for batch in batches}
    assert len(kept) == len(batches)  # one request per shape
    sizes, lengths = {size for size, _ in kept}, {length for _, length in kept}
    assert sizes == {2 ** i for i in range(chunk_size.bit_length())}  # every chunk size
    assert min(lengths) == XLA_LENGTH_BUCKET and max(lengths) == 1024  # both ends
    assert len(lengths) >= 100 and kept == {(s, n) for s in sizes for n in lengths}
    steps = np.diff(sorted(lengths)) // XLA_LENGTH_BUCKET
    assert set(steps.tolist()) <= {1, 2}  # spread evenly, no gap
    assert warmup_batches(proto, decoding, 1024) == batches  # deterministic


def test_warmup_requests_stay_within_max_batch_rows(serving_bpe):
    proto = serving_bpe.model_proto
    # Lanes 8 x chunk 64: a full chunk in every lane is 512 rows, over a limit of 256.
    plain = warmup_batches(proto, DecodingConfig(chunk_size=64, lanes=8), MAX_POSITION,
                           max_rows=256)
    assert [len(batch) for batch in plain] == [1, 256]
    xla = warmup_batches(proto, DecodingConfig(chunk_size=64, lanes=8, xla=True), MAX_POSITION,
                         max_rows=256)
    # 256 rows are 32 per lane: chunk sizes 1 to 32 can be met, 64 cannot.
    assert sorted({len(batch) for batch in xla}) == [8, 16, 32, 64, 128, 256]
    # Lanes 3, at most 100 rows: 34 per lane, searched as a chunk of 64.
    odd = warmup_batches(proto, DecodingConfig(chunk_size=64, lanes=3, xla=True), MAX_POSITION,
                         max_rows=100)
    assert sorted({len(batch) for batch in odd}) == [3, 6, 12, 24, 48, 96, 100]
