"""TF Serving warm-up requests, written into an export's `assets.extra/`.

TF Serving replays the records of `assets.extra/tf_serving_warmup_requests` (a TFRecord
file of `PredictionLog` protos) when it loads a model version, before the version serves
traffic, so the first users do not pay for the first run of the graph. For an export with
`--xla` this matters most: every (chunk size, source-length bucket) shape of the search is
compiled on its first request (seconds each), so the warm-up holds one request per shape
the signature can meet: chunk sizes 1, 2, 4, ... up to `chunk_size`, sources of every
multiple of XLA_LENGTH_BUCKET tokens up to the model's maximum. A plain export gets two
requests: 1 sentence, and `chunk_size` sentences (8 when the search is not chunked). With
`lanes`, a request is dealt into that many searches, so each request has `lanes` times the
rows: every lane then meets the chunk size.

Two limits bound the set. No request holds more rows than the export's `max_batch_rows`
(the signatures refuse more): a shape needing more rows is warmed by a request of
`max_batch_rows` rows if that still reaches it, else left out (no request can reach it).
TF Serving refuses a warm-up file of more than MAX_RECORDS records: when the shapes are more
(an XLA export with chunk size 128 at 1,024 positions has 8 x 128), the length buckets,
then if need be the chunk sizes, are sampled evenly, the smallest and largest of each
kept, and one line says how many shapes were kept; the others compile on their first
request.

The requests are made of one word repeated: a word the subword model spells as one piece,
so that n words are n source tokens whatever the language.

The records are written without TF Serving's Python package (tensorflow-serving-api, the
`[serving]` extra): the tensors are TensorFlow's own `TensorProto`s, and the three small
messages around them (PredictionLog > PredictLog > PredictRequest with its ModelSpec) are
encoded here in the protobuf wire format, field numbers from
tensorflow_serving/apis/{prediction_log,predict,model}.proto. tests/export/test_warmup.py
reads them back with TF Serving's own classes.
"""
from __future__ import annotations

import logging
import pathlib
from typing import Sequence

import numpy as np
import tensorflow as tf

from transformer_tf.config import EOS_ID, PAD_ID, DecodingConfig
from transformer_tf.data.bpe import python_processor
from transformer_tf.decoding.model_driver import XLA_LENGTH_BUCKET

logger = logging.getLogger(__name__)

WARMUP_FILE = "tf_serving_warmup_requests"
MAX_RECORDS = 1000  # TF Serving reads no warm-up file of more records


def one_piece_word(model_proto: bytes) -> str:
    """A word the subword model encodes as exactly one piece (the first such piece, by id,
    that is at least two characters long)."""
    processor = python_processor(model_proto)
    for piece_id in range(processor.get_piece_size()):
        if processor.is_control(piece_id) or processor.is_unknown(piece_id):
            continue
        word = processor.decode([piece_id]).strip()
        if len(word) >= 2 and " " not in word and processor.encode(word) == [piece_id]:
            return word
    raise ValueError("the subword model has no word spelt as one piece")


def warmup_batches(model_proto: bytes, decoding: DecodingConfig, max_source_length: int,
                   max_rows: int = 0, max_records: int = MAX_RECORDS) -> list[list[str]]:
    """The sentences of each warm-up request (see the module doc): at most `max_records`
    requests of at most `max_rows` rows each (0: any number)."""
    word = one_piece_word(model_proto)
    chunk = decoding.chunk_size or 8
    lanes = decoding.lanes
    if not decoding.xla:
        full = min(chunk * lanes, max_rows) if max_rows else chunk * lanes
        return [[word], [" ".join([word] * 7)] * full]
    sizes = _reachable_sizes(chunk, lanes, max_rows)
    # A bucket of b positions holds b - 1 tokens and EOS.
    lengths = list(range(XLA_LENGTH_BUCKET, max_source_length + 1, XLA_LENGTH_BUCKET))
    total = len(sizes) * len(lengths)
    if total > max_records:
        lengths = spread(lengths, max(2, max_records // len(sizes)))
        sizes = spread(sizes, max_records // len(lengths))
        message = (f"warm-up: {len(sizes) * len(lengths)} of {total} (chunk size, length "
                   f"bucket) shapes kept (TF Serving reads at most {max_records} records); "
                   "the others compile on their first request")
        logger.warning("%s", message)
    return [[" ".join([word] * (length - 1))] * rows
            for size, rows in sizes for length in lengths]


def _reachable_sizes(chunk: int, lanes: int, max_rows: int) -> list[tuple[int, int]]:
    """(compiled chunk rows, request rows) for each chunk size a request of at most
    `max_rows` rows (0: any) can meet: 1, 2, 4, ... up to `chunk`, a request of rows per
    lane r meeting min(chunk, the power of two >= r) (decoding.model_driver)."""
    found = {}
    for size in sorted({min(2 ** i, chunk) for i in range(chunk.bit_length() + 1)}):
        rows = size * lanes if not max_rows else min(size * lanes, max_rows)
        per_lane = -(-rows // lanes)
        met = min(chunk, 1 << (per_lane - 1).bit_length())
        found.setdefault(met, rows)
    return sorted(found.items())


def spread(items: Sequence, count: int) -> list:
    """`count` of `items`, evenly spaced and in order, the first and last always among
    them (so at least 2 of 2 or more items); all of them if count >= len(items)."""
    count = max(count, 2)
    if count >= len(items):
        return list(items)
    step = (len(items) - 1) / (count - 1)
    return [items[round(i * step)] for i in range(count)]


def as_source_ids(model_proto: bytes, batch: Sequence[str]) -> np.ndarray:
    """int32 [len(batch), S]: the sentences' ids + EOS, PAD-padded (an ids signature's
    input)."""
    rows = [ids + [EOS_ID] for ids in python_processor(model_proto).encode(list(batch))]
    width = max(len(r) for r in rows)
    return np.array([r + [PAD_ID] * (width - len(r)) for r in rows], np.int32)


# Field numbers in TF Serving's protos (tensorflow_serving/apis/*.proto).
PREDICTION_LOG_PREDICT_LOG = 6  # PredictionLog.predict_log (PredictLog)
PREDICT_LOG_REQUEST = 1  # PredictLog.request (PredictRequest)
REQUEST_MODEL_SPEC = 1  # PredictRequest.model_spec (ModelSpec)
REQUEST_INPUTS = 2  # PredictRequest.inputs (map<string, TensorProto>)
MODEL_SPEC_SIGNATURE_NAME = 3  # ModelSpec.signature_name (string)
MAP_KEY, MAP_VALUE = 1, 2  # the fields of a map entry


def write_warmup_requests(path, requests: Sequence[dict],
                          signature_name: str = "serving_default") -> pathlib.Path:
    """Write one `PredictionLog` per request ({input name: array-like}: a PredictRequest
    of `signature_name`) to the TFRecord file `path`."""
    path = pathlib.Path(path)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for inputs in requests:
            writer.write(prediction_log(inputs, signature_name))
    return path


def prediction_log(inputs: dict, signature_name: str) -> bytes:
    """A serialized PredictionLog whose predict_log.request asks `signature_name` for
    `inputs` ({input name: array-like}, each made a TensorProto by tf.make_tensor_proto)."""
    model_spec = _field(MODEL_SPEC_SIGNATURE_NAME, signature_name.encode())
    request = _field(REQUEST_MODEL_SPEC, model_spec)
    for name, value in inputs.items():  # a map is a repeated field of (key, value) entries
        tensor = tf.make_tensor_proto(value).SerializeToString()
        entry = _field(MAP_KEY, name.encode()) + _field(MAP_VALUE, tensor)
        request += _field(REQUEST_INPUTS, entry)
    return _field(PREDICTION_LOG_PREDICT_LOG, _field(PREDICT_LOG_REQUEST, request))


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2: a string, bytes or a message)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    """A non-negative integer as a protobuf varint: 7 bits a byte, low bits first, the
    high bit set on every byte but the last."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
