"""The serving rules row by row: bounded and validated ids, blank rows in Unicode, no line
break in any output, and the ids-only export a core-ops server can load."""
import subprocess
import sys

import numpy as np
import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from transformer_tf.data.bpe import line_break_piece_ids, python_processor
from transformer_tf.data.source_text import blank_rows, is_blank
from transformer_tf.decoding.model_driver import search_model
from transformer_tf.inference.batch import from_translator, translate_lines


GOOD = ["A man is riding a bicycle.", "Two dogs play in the snow near a fence.", "A girl."]
UNICODE_BLANKS = ["\u00a0", "\u3000\u3000", "\u2028", "\u200b", "\ufeff", "\u0085",
                  " \u00a0\t\u2029\u200b\ufeff \u0085\u3000\u2009\u202f\u00ad\u2060"]


def ids_of(translator, sentences):
    """The text path's source ids for `sentences` (numpy int32 [N, S])."""
    return translator.encode_text(tf.constant(sentences))[0].numpy()


def run_ids(translator, rows):
    """translate_ids on ragged python rows, PAD-padded."""
    width = max(len(r) for r in rows)
    batch = np.array([list(r) + [PAD_ID] * (width - len(r)) for r in rows], np.int64)
    out = translator.translate_ids(tf.constant(batch, tf.int32))
    return {k: v.numpy() for k, v in out.items()}


def test_translate_ids_truncates_maps_unknown_ids_to_unk_and_blanks_padding(serving_translator):
    translator = serving_translator
    vocab = translator.model.source_vocab_size
    good = [list(row[row != PAD_ID]) for row in ids_of(translator, GOOD)]
    long_row = (good[1][:-1] * 1000)[:8000]  # 8,000 ids, no EOS
    cut = long_row[:translator.max_source_tokens] + [EOS_ID]
    bad_ids = good[0][:2] + [vocab, -1, 10 ** 6, BOS_ID] + good[0][2:]
    as_unk = good[0][:2] + [UNK_ID] * 4 + good[0][2:]
    rows = [good[0], long_row, [PAD_ID] * 7, bad_ids, [EOS_ID, 9, 9], good[2] + [77, 88], []]
    out = run_ids(translator, rows)
    expected = run_ids(translator, [good[0], cut, as_unk, good[2]])
    for got, want in ((0, 0), (1, 1), (3, 2), (5, 3)):  # text after EOS is ignored
        n = expected["length"][want]
        np.testing.assert_array_equal(out["ids"][got, :n], expected["ids"][want, :n])
        np.testing.assert_allclose(out["score"][got], expected["score"][want], rtol=1e-5)
    for blank in (2, 4, 6):  # all padding, EOS first, zero width
        assert out["length"][blank] == 0 and out["score"][blank] == 0.0
        assert not out["ids"][blank].any()
    assert out["ids"].shape[1] <= translator.model.max_target_length
    # The text signature on the same sentences agrees with the ids signature.
    text = translator.translate(tf.constant(GOOD))
    detokenized = translator.tokenizer.detokenize(expected["ids"][[0, 3]]).numpy()
    np.testing.assert_array_equal(detokenized, text["translation"].numpy()[[0, 2]])


def test_blank_rule_covers_unicode_whitespace_and_format_characters(serving_translator):
    not_blank = ["a", "\u00a0x", "\ufffd", "\u0301", "\U0001F642", "\u202e\u05d0"]
    assert all(is_blank(s) for s in UNICODE_BLANKS + ["", " \t"])
    assert not any(is_blank(s) for s in not_blank)
    in_graph = blank_rows(tf.constant(UNICODE_BLANKS + not_blank + [b"\xff\xfe"])).numpy()
    assert in_graph.tolist() == [True] * len(UNICODE_BLANKS) + [False] * (len(not_blank) + 1)

    batch = GOOD[:1] + UNICODE_BLANKS
    out = serving_translator.translate(tf.constant(batch))
    assert out["translation"].numpy()[1:].tolist() == [b""] * len(UNICODE_BLANKS)
    assert not out["score"].numpy()[1:].any()
    nbest = serving_translator.translate_nbest(tf.constant(batch))
    assert not nbest["translations"].numpy()[1:].astype(bool).any()
    assert not nbest["scores"].numpy()[1:].any()
    lines, scores = translate_lines(from_translator(serving_translator), batch, progress=False)
    assert [row[0] for row in lines[1:]] == [""] * len(UNICODE_BLANKS) and not scores[1:].any()
    assert lines[0][0] == out["translation"].numpy()[0].decode()


def test_line_break_pieces_are_never_emitted(serving_translator, line_break_model, serving_bpe):
    _, favourite = line_break_model
    forbidden = line_break_piece_ids(serving_bpe.model_proto)
    assert set(favourite) <= set(forbidden)
    processor = python_processor(serving_bpe.model_proto)
    for piece_id in forbidden:
        assert set(processor.decode([piece_id])) & set("\n\r\x0b\x0c\x1c\x1d\x1e")
    out = serving_translator.translate_nbest(tf.constant(GOOD))["translations"].numpy()
    assert out.astype(bool).all()  # real, non-empty hypotheses
    assert not any(b"\n" in t or b"\r" in t for t in out.ravel())
    ids = run_ids(serving_translator, [row[row != PAD_ID] for row in ids_of(serving_translator, GOOD)])
    assert not np.isin(ids["ids"], forbidden).any()
    # The same model without the rule emits them: the bias is real.
    plain = search_model(serving_translator.model, ids_of(serving_translator, GOOD),
                         serving_translator.decoding)
    assert np.isin(plain.ids.numpy(), favourite).any()


# saved_model_cli run, in a process that fails if tensorflow_text ever gets imported.
SAVED_MODEL_CLI_WITHOUT_TF_TEXT = r"""
import atexit, os, sys
atexit.register(lambda: "tensorflow_text" in sys.modules and os._exit(7))
from tensorflow.python.tools.saved_model_cli import main
sys.argv[0] = "saved_model_cli"
sys.exit(main())
"""


def test_ids_only_export_loads_with_core_ops_only(serving_exports, serving_translator, tmp_path):
    path = serving_exports["ids"]
    assert (path / "assets.extra" / "bpe.model").read_bytes() == \
        serving_translator.tokenizer.model_proto
    rows = ids_of(serving_translator, GOOD)
    np.save(tmp_path / "rows.npy", rows.astype(np.int32))
    done = subprocess.run(
        [sys.executable, "-c", SAVED_MODEL_CLI_WITHOUT_TF_TEXT, "run", "--dir", str(path),
         "--tag_set", "serve", "--signature_def", "serving_default",
         "--inputs", f"source_ids={tmp_path / 'rows.npy'}", "--outdir", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    expected = serving_translator.translate_ids(tf.constant(rows))
    for key in ("ids", "length", "score"):
        np.testing.assert_allclose(np.load(tmp_path / "out" / f"{key}.npy"),
                                   expected[key].numpy(), rtol=1e-5)


def test_translate_lines_reads_the_ids_only_export(serving_exports, serving_translator):
    from transformer_tf.inference.batch import load_translator
    loaded = load_translator(model=str(serving_exports["ids"]))
    lines, scores = translate_lines(loaded, GOOD + ["\u3000"], progress=False)
    expected = serving_translator.translate(tf.constant(GOOD))
    assert [row[0] for row in lines] == [t.decode() for t in expected["translation"].numpy()] + [""]
    np.testing.assert_allclose(scores[:3, 0], expected["score"].numpy(), rtol=1e-5)


def test_text_export_runs_in_a_tf1_session_loader(serving_exports, serving_translator):
    # TF Serving's C++ loader restores variables through the MetaGraph's saver, as TF1's
    # Python loader does. Keras 3 variables alone leave the signatures reading variables
    # that loader never restores ("Could not find variable ..."): core_variables fixes it.
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"],
                                                    str(serving_exports["text"]))
        signature = meta.signature_def["serving_default"]
        out = session.run({key: info.name for key, info in signature.outputs.items()},
                          {signature.inputs["text"].name: GOOD})
    expected = serving_translator.translate(tf.constant(GOOD))
    np.testing.assert_array_equal(out["translation"], expected["translation"].numpy())
    np.testing.assert_allclose(out["score"], expected["score"].numpy(), rtol=1e-5)
