"""The exports' forced-decoding signatures: `score` (text) gives what the library function
`inference.forced_decoding.forced_scores` gives for the same pieces, `score_ids` (also in
the ids-only export, core ops only) the same from ids; both refuse mismatched inputs."""
import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import EOS_ID, PAD_ID
from transformer_tf.data.bpe import python_processor
from transformer_tf.inference.forced_decoding import forced_scores

from .conftest import MAX_POSITION

SOURCES = ["A man is riding a bicycle.", "Two dogs play in the snow.", "", "A girl."]
TARGETS = ["Ein Mann fährt Fahrrad.", "", "Zwei Hunde.", "ein " * 40]


@pytest.fixture(scope="module")
def loaded(serving_exports):
    return {variant: tf.saved_model.load(str(path)) for variant, path in serving_exports.items()}


def _pieces_and_eos(processor, text, limit):
    return processor.encode(text.strip())[:limit] + [EOS_ID]


def test_score_is_the_forced_log_probability_of_the_pieces(loaded, serving_translator,
                                                           serving_bpe):
    out = loaded["text"].signatures["score"](source=tf.constant(SOURCES),
                                             target=tf.constant(TARGETS))
    processor = python_processor(serving_bpe.model_proto)
    expected_ids = [_pieces_and_eos(processor, t, MAX_POSITION - 1) for t in TARGETS]
    width = max(map(len, expected_ids))
    padded_targets = np.array([ids + [PAD_ID] * (width - len(ids)) for ids in expected_ids])
    source_ids = [_pieces_and_eos(processor, s, MAX_POSITION - 1) for s in SOURCES]
    padded_sources = np.array([ids + [PAD_ID] * (max(map(len, source_ids)) - len(ids))
                               for ids in source_ids])
    expected = forced_scores(serving_translator.model, padded_sources, padded_targets)
    np.testing.assert_array_equal(out["token_ids"].numpy(), padded_targets)
    np.testing.assert_array_equal(out["length"].numpy(), [len(i) for i in expected_ids])
    np.testing.assert_array_equal(out["truncated"].numpy(), [False, False, False, True])
    np.testing.assert_allclose(out["token_scores"].numpy(), expected.token_scores.numpy(),
                               atol=1e-5)
    np.testing.assert_allclose(out["log_prob"].numpy(), expected.log_prob.numpy(), atol=1e-4)
    assert np.all(out["log_prob"].numpy() < 0)
    # score_ids from the ids, in both exports, agrees.
    for variant in ("text", "ids"):
        by_ids = loaded[variant].signatures["score_ids"](
            source_ids=tf.constant(padded_sources, tf.int32),
            target_ids=tf.constant(padded_targets, tf.int32))
        np.testing.assert_allclose(by_ids["log_prob"].numpy(), out["log_prob"].numpy(),
                                   atol=1e-5)
        np.testing.assert_array_equal(by_ids["token_ids"].numpy(), padded_targets)


def test_score_refuses_mismatched_rows_and_too_many_rows(loaded):
    score = loaded["text"].signatures["score"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="one target per source"):
        score(source=tf.constant(SOURCES), target=tf.constant(TARGETS[:2]))
    many = tf.constant(["A dog."] * 257)
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_batch_rows=256"):
        score(source=many, target=many)


def test_score_runs_in_a_tf1_session_loader(serving_exports, loaded):
    # TF Serving's C++ loader restores variables as TF1's loader does (test_serving_rules).
    feed = {"source": SOURCES[:2], "target": TARGETS[:2]}
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"],
                                                    str(serving_exports["text"]))
        signature = meta.signature_def["score"]
        out = session.run({key: info.name for key, info in signature.outputs.items()},
                          {signature.inputs[k].name: v for k, v in feed.items()})
    expected = loaded["text"].signatures["score"](source=tf.constant(SOURCES[:2]),
                                                  target=tf.constant(TARGETS[:2]))
    np.testing.assert_allclose(out["log_prob"], expected["log_prob"].numpy(), rtol=1e-5)
