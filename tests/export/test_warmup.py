"""TF Serving warm-up requests (`export.warmup`): every export carries them, they parse as
TF Serving's PredictionLog records (read with TF Serving's own classes, tensorflow-serving-api
in the [test] extra; the writer does without them), every one runs through the SavedModel's
signature as TF Serving would replay it, and an XLA export's set covers every compiled
shape."""
import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import EOS_ID, DecodingConfig
from transformer_tf.data.bpe import python_processor
from transformer_tf.decoding.model_driver import XLA_LENGTH_BUCKET
from transformer_tf.export.warmup import (
    MAX_RECORDS, WARMUP_FILE, one_piece_word, warmup_batches, write_warmup_requests)
from transformer_tf.inference.loading import EXTRA_DIR, read_export_info

MAX_POSITION = 24


def tf_serving_apis():
    """TF Serving's own message classes (tensorflow_serving.apis), or skip."""
    pytest.importorskip("tensorflow_serving.apis.prediction_log_pb2",
                        reason="tensorflow-serving-api is not installed: pip install -e '.[test]'")
    from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

    return predict_pb2, prediction_log_pb2


def read_warmup_requests(path) -> list[tuple[str, dict]]:
    """(signature name, {input name: numpy array}) of each record of a warm-up file, as TF
    Serving's PredictionLog parses it."""
    _, prediction_log_pb2 = tf_serving_apis()
    requests = []
    for record in tf.data.TFRecordDataset(str(path)):
        log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
        request = log.predict_log.request
        requests.append((request.model_spec.signature_name,
                         {name: tf.make_ndarray(proto) for name, proto in request.inputs.items()}))
    return requests


def test_records_are_the_messages_tf_servings_own_classes_build(tmp_path):
    """The hand-encoded records parse, with TF Serving's classes, to the very messages those
    classes build: several inputs, text and int32 ids, and a string of 20,000 bytes (its
    lengths take varints of 1, 2 and 3 bytes)."""
    predict_pb2, prediction_log_pb2 = tf_serving_apis()
    requests = [{"text": ["Ein Hund läuft.", ""]},
                {"source_ids": np.array([[5, 6, 3], [7, 3, 0]], np.int32), "text": ["x" * 20000]},
                {}]
    path = write_warmup_requests(tmp_path / WARMUP_FILE, requests, signature_name="translate_ids")
    records = [record.numpy() for record in tf.data.TFRecordDataset(str(path))]
    assert len(records) == len(requests)
    for record, inputs in zip(records, requests):
        expected = predict_pb2.PredictRequest()
        expected.model_spec.signature_name = "translate_ids"
        for name, value in inputs.items():
            expected.inputs[name].CopyFrom(tf.make_tensor_proto(value))
        log = prediction_log_pb2.PredictionLog.FromString(record)
        assert log.WhichOneof("log_type") == "predict_log"
        assert log.predict_log.request == expected
        assert log == prediction_log_pb2.PredictionLog(
            predict_log=prediction_log_pb2.PredictLog(request=expected))


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
