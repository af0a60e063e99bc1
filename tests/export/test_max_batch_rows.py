"""The exports' `max_batch_rows` limit: a request of more rows fails as a whole with an
InvalidArgument error naming the limit, in every signature; a request within it gives
what the unlimited in-memory translator gives; the limit is recorded in assets.extra and
offered by `transformer-tf-export --help`."""
import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.inference.loading import read_export_info
from transformer_tf.config import DEFAULT_MAX_BATCH_ROWS

SENTENCES = ["A man is riding a bicycle.", "", "Two dogs play in the snow.", "A girl."]


@pytest.fixture(scope="module")
def loaded(serving_exports):
    return {variant: tf.saved_model.load(str(path)) for variant, path in serving_exports.items()}


def rows(count):
    return tf.constant((SENTENCES * count)[:count])


def test_the_limit_is_recorded_and_the_in_memory_translator_has_none(serving_exports,
                                                                      serving_translator):
    assert DEFAULT_MAX_BATCH_ROWS == 256
    for path in serving_exports.values():
        assert read_export_info(path)["max_batch_rows"] == 256
    assert serving_translator.max_batch_rows == 0
    assert serving_translator.with_max_batch_rows(0) is serving_translator


def test_every_signature_refuses_one_row_too_many(loaded, serving_translator):
    ids = serving_translator.encode_text(rows(257))[0]
    calls = {"serving_default": lambda: loaded["text"].signatures["serving_default"](
                 text=rows(257)),
             "translate_nbest": lambda: loaded["text"].signatures["translate_nbest"](
                 text=rows(257)),
             "translate_ids": lambda: loaded["text"].signatures["translate_ids"](
                 source_ids=ids),
             "ids_only": lambda: loaded["ids"].signatures["serving_default"](source_ids=ids)}
    for name, call in calls.items():
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="max_batch_rows=256: the request has more rows than this model "
                                 "accepts; send at most 256 rows per request"):
            call()


def test_a_request_within_the_limit_is_unchanged(loaded, serving_translator):
    batch = rows(256)
    served = loaded["text"].signatures["serving_default"](text=batch)
    expected = serving_translator.translate(batch)
    np.testing.assert_array_equal(served["translation"].numpy(),
                                  expected["translation"].numpy())
    np.testing.assert_array_equal(served["score"].numpy(), expected["score"].numpy())
    ids = serving_translator.encode_text(batch)[0]
    served = loaded["ids"].signatures["serving_default"](source_ids=ids)
    expected = serving_translator.translate_ids(ids)
    for key in ("ids", "length", "score"):
        np.testing.assert_array_equal(served[key].numpy(), expected[key].numpy())


def test_export_help_offers_the_limit(capsys):
    from transformer_tf.cli.export import main

    with pytest.raises(SystemExit):
        main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--max-batch-rows MAX_BATCH_ROWS" in help_text
    assert "0: no limit (default 256;" in help_text and "--enable_batching" in help_text


def test_translate_sends_batches_within_the_exports_limit(serving_exports, serving_translator,
                                                          tmp_path):
    """`translate --model --batch-size 512` on a 256-row export: batches of 256, the same
    outputs as the unlimited translator (300 non-blank lines: a full batch and a rest)."""
    from transformer_tf.inference.batch import from_translator, load_translator, translate_lines

    lines = SENTENCES * 100
    loaded = load_translator(model=str(serving_exports["text"]))
    assert loaded.max_batch_rows == 256
    calls = []
    original = loaded.translate_batch
    loaded.translate_batch = lambda batch: calls.append(len(batch)) or original(batch)
    served, served_scores = translate_lines(loaded, lines, batch_size=512, progress=False)
    assert calls == [256, 44]
    expected, expected_scores = translate_lines(from_translator(serving_translator), lines,
                                                batch_size=512, progress=False)
    assert served == expected
    np.testing.assert_allclose(served_scores, expected_scores, rtol=1e-5, atol=1e-5)
