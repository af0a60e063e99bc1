"""Search over the model, the Translator module, SavedModel export and scripts/translate.py."""
import gzip
import io
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import DecodingConfig
from transformer_tf.presets import get_preset
from transformer_tf.data.bpe import BpeOptions, BpeTokenizer, train_bpe
from transformer_tf.decoding.model_driver import search_model
from transformer_tf.decoding.beam_and_greedy import beam_search, length_penalty, tile_beams
from transformer_tf.export.saved_model import export_saved_model
from transformer_tf.inference.translator import Translator
from transformer_tf.models.transformer import Transformer

REPO = pathlib.Path(__file__).resolve().parents[2]
GOOD = ["A man is riding a bicycle.", "Two dogs play in the snow near a fence."]
BAD = ["", "   \t ", "\xff\xfe nonsense".encode("latin-1"), "日本語 ☃ ∑ 🙂",
       " ".join(["dog"] * 200)]


@pytest.fixture(scope="module")
def tokenizer(shared_data_dir):
    lines = []
    for lang in ("en", "de"):
        with gzip.open(shared_data_dir / "multi30k" / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
            lines += [next(f).rstrip("\n") for _ in range(600)]
    return BpeTokenizer(train_bpe(lines, BpeOptions(vocab_size=400)))


@pytest.fixture(scope="module")
def model(tokenizer):
    tf.keras.utils.set_random_seed(3)
    config = get_preset("tiny").model.replace(vocab_size=tokenizer.vocab_size, max_position=64,
                                              d_model=32, num_heads=4, d_ff=64)
    model = Transformer(config)
    model.build()
    # Random weights that prefer EOS a little, so hypotheses end at varied lengths.
    embeddings = model.source_embedding.embeddings
    embeddings.assign(embeddings.numpy() + np.eye(1, embeddings.shape[0], 3).T * 0.3)
    return model


def full_recomputation_step(model, source_ids, beam_size, max_length):
    """A step function without any cache: re-runs the whole decoder on the prefix."""
    encoder_output, source_valid = model.encode(source_ids)
    encoder_output = tile_beams(encoder_output, beam_size)
    source_valid = tile_beams(source_valid, beam_size)

    def step_fn(ids, step, cache):
        prefix = tf.tensor_scatter_nd_update(
            cache["prefix"], tf.stack([tf.range(tf.shape(ids)[0]),
                                       tf.fill(tf.shape(ids), step)], axis=1), ids)
        logits = model.decode(prefix[:, :step + 1], encoder_output, source_valid)[:, -1]
        forbidden = tf.one_hot([0, 2], tf.shape(logits)[-1], on_value=-1e9, off_value=0.0)
        return logits + tf.reduce_sum(forbidden, 0), {"prefix": prefix}

    batch = tf.shape(source_ids)[0]
    return step_fn, {"prefix": tf.zeros([batch, max_length], tf.int32)}


@pytest.mark.parametrize("beam_size", [1, 4])
def test_cached_search_equals_search_by_full_recomputation(model, tokenizer, beam_size):
    translator = Translator(model, tokenizer, DecodingConfig(beam_size=beam_size, max_extra_length=6))
    source_ids, _, _ = translator.encode_text(tf.constant(GOOD + ["A girl."]))
    decoding = DecodingConfig(beam_size=beam_size, alpha=0.6, max_extra_length=6)
    cached = search_model(model, source_ids, decoding, n_best=beam_size)
    lengths = tf.reduce_sum(tf.cast(source_ids != 0, tf.int32), 1) + 6
    max_len = int(tf.reduce_max(lengths))
    step_fn, cache = full_recomputation_step(model, source_ids, beam_size, max_len)
    full = beam_search(step_fn, cache, 3, beam_size, lengths, alpha=0.6, n_best=beam_size,
                       max_decode_length=max_len)
    np.testing.assert_array_equal(cached.ids.numpy(), full.ids.numpy())
    np.testing.assert_array_equal(cached.lengths.numpy(), full.lengths.numpy())
    if beam_size == 1:  # greedy reports log P, beam search log P / lp(len)
        np.testing.assert_allclose(
            cached.scores.numpy() / length_penalty(cached.lengths, 0.6).numpy(),
            full.scores.numpy(), rtol=1e-4)
    else:
        np.testing.assert_allclose(cached.scores.numpy(), full.scores.numpy(), rtol=1e-4)
    assert len(set(cached.lengths.numpy().ravel().tolist())) > 1  # not all hit the limit


def test_bad_inputs_do_not_poison_the_batch(model, tokenizer):
    translator = Translator(model, tokenizer, DecodingConfig(beam_size=2, max_extra_length=5))
    batch = GOOD + BAD
    out = translator.translate(tf.constant(batch))
    translations, scores = out["translation"].numpy(), out["score"].numpy()
    assert translations.shape == (len(batch),) and np.all(np.isfinite(scores))
    assert translations[2] == b"" and translations[3] == b"" and scores[2] == scores[3] == 0.0
    alone = translator.translate(tf.constant(GOOD))
    np.testing.assert_array_equal(alone["translation"].numpy(), translations[:2])
    np.testing.assert_allclose(alone["score"].numpy(), scores[:2], rtol=1e-5)
    source_ids, truncated, empty = translator.encode_text(tf.constant(batch))
    assert source_ids.shape[1] == 64  # 63 tokens + EOS: the over-long row was truncated
    np.testing.assert_array_equal(truncated.numpy(), [0, 0, 0, 0, 0, 0, 1])
    np.testing.assert_array_equal(empty.numpy(), [0, 0, 1, 1, 0, 0, 0])


FRESH_PROCESS = r"""
import json, sys
import tensorflow as tf, tensorflow_text  # noqa: F401
loaded = tf.saved_model.load(sys.argv[1])
text = tf.constant(json.loads(sys.argv[2]))
out = loaded.signatures["serving_default"](text=text)
nbest = loaded.signatures["translate_nbest"](text=text)
print(json.dumps({"translation": [t.decode() for t in out["translation"].numpy()],
                  "score": out["score"].numpy().tolist(),
                  "nbest": [[t.decode() for t in row] for row in nbest["translations"].numpy()]}))
"""


@pytest.fixture(scope="module")
def exported(model, tokenizer, tmp_path_factory):
    translator = Translator(model, tokenizer, DecodingConfig(beam_size=3, max_extra_length=8))
    path = export_saved_model(translator, tmp_path_factory.mktemp("sm") / "toy" / "1")
    return translator, path


def test_saved_model_in_a_fresh_process_matches_the_in_memory_model(exported):
    translator, path = exported
    sentences = GOOD + ["", "A child in a red coat."]
    result = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(path), json.dumps(sentences)],
                            capture_output=True, text=True, timeout=300, check=True)
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    expected = translator.translate(tf.constant(sentences))
    assert loaded["translation"] == [t.decode() for t in expected["translation"].numpy()]
    np.testing.assert_allclose(loaded["score"], expected["score"].numpy(), rtol=1e-5)
    assert [row[0] for row in loaded["nbest"]] == loaded["translation"]
    assert all(len(row) == 3 for row in loaded["nbest"])


def test_saved_model_cli_shows_the_text_signature(exported):
    _, path = exported
    cli = pathlib.Path(sys.executable).with_name("saved_model_cli")
    shown = subprocess.run([str(cli), "show", "--all", "--dir", str(path)],
                           capture_output=True, text=True, timeout=120, check=True).stdout
    serving = shown.split("signature_def['serving_default']")[1].split("signature_def[")[0]
    assert "inputs['text'] tensor_info:\n        dtype: DT_STRING\n        shape: (-1)" in serving
    assert "outputs['translation'] tensor_info:\n        dtype: DT_STRING\n        shape: (-1)" in serving
    assert "outputs['score'] tensor_info:\n        dtype: DT_FLOAT\n        shape: (-1)" in serving
    assert "signature_def['translate_ids']" in shown


def test_translate_script_keeps_order_and_empty_lines(exported, monkeypatch, capsys):
    translator, path = exported
    lines = ["Two dogs play in the snow near a fence.", "", "A man is riding a bicycle.",
             " ".join(["cat"] * 100)]
    # Then lines that end at "\n" only: a lone "\r" inside a line, CRLF endings and invalid
    # UTF-8 keep one output line per input line (one process for both, to save a start-up).
    raw = b"A dog.\rA cat.\r\nTwo men \xff sit.\n"
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "translate.py"), "--model", str(path), "--quiet"],
        input="\n".join(lines).encode() + b"\n" + raw, capture_output=True, timeout=300,
        check=True)
    out = result.stdout.decode().split("\n")[:-1]
    expected = [t.decode() for t in translator.translate(tf.constant(lines))["translation"].numpy()]
    assert out[:4] == expected and out[1] == "" and len(out) == 6
    assert "line 4:" in result.stderr.decode() and "truncated" in result.stderr.decode()
    # Other search settings than the export's rebuild the model around its weights
    # (in this process: the script's main, to save a second start-up).
    from transformer_tf.cli.translate import main
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"A man.\nA dog.\n")))
    assert main(["--model", str(path), "--quiet", "--n-best", "2", "--beam-size", "2",
                 "--stopping", "k_finished"]) == 0
    rows = [line.split(" ||| ") for line in capsys.readouterr().out.strip().split("\n")]
    assert [r[0] for r in rows] == ["0", "0", "1", "1"]
    assert float(rows[0][2]) >= float(rows[1][2])
    same = Translator(translator.model, translator.tokenizer,
                      translator.decoding.replace(beam_size=2, stopping="k_finished"), n_best=2)
    want = same.translate_nbest(tf.constant(["A man.", "A dog."]))["translations"].numpy()
    assert [r[1] for r in rows] == [t.decode() for t in want.reshape(-1)]


@pytest.mark.parametrize("arguments, message", [
    (["--model-dir", "/nonexistent"], "run_config.json not found"),
    (["--beam-size", "0"], "argument --beam-size: must be at least 1"),
    (["--lanes", "0"], "lanes"),
])
def test_export_script_reports_bad_arguments(tmp_path, capsys, arguments, message):
    # A run directory with a valid run_config.json (and no checkpoint): the decoding
    # override is checked before anything is loaded.
    from transformer_tf.presets import get_preset
    from transformer_tf.rundir.model_dir import RunConfig, write_run_config
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    preset = get_preset("tiny")
    write_run_config(run_dir, RunConfig(preset.model, preset.training, preset.decoding,
                                        data_dir=str(tmp_path), preset="tiny"))
    from transformer_tf.cli.export import main
    try:
        code = main(["--model-dir", str(run_dir), "--out", str(tmp_path / "out" / "1"),
                     *arguments])
    except SystemExit as stop:  # a flag's type: argparse stops at parse time
        code = stop.code
    stderr = capsys.readouterr().err
    assert code == 2, stderr[-2000:]
    assert "error:" in stderr.strip().splitlines()[-1]
    assert message in stderr
