"""CTranslate2 export: a tiny random Transformer converted and run by CTranslate2 must give
our model's log-probabilities and greedy outputs (post-norm with sinusoidal positions,
pre-norm with learned positions); ConvS2S runs are refused with a clear error."""
import gzip
import json
import pathlib
import runpy

import numpy as np
import pytest
import tensorflow as tf

ctranslate2 = pytest.importorskip("ctranslate2")

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID, DecodingConfig
from transformer_tf.presets import get_preset
from transformer_tf.data.bpe import BpeOptions, BpeTokenizer, train_bpe  # noqa: E402
from transformer_tf.export import ctranslate2 as ct2_export  # noqa: E402
from transformer_tf.inference.translator import Translator  # noqa: E402
from transformer_tf.models.transformer import Transformer  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
SENTENCES = ["A man is riding a bicycle.", "Two dogs play in the snow near a fence.",
             "A girl in a red coat.", "\u00a0\u3000 "]


@pytest.fixture(scope="module")
def tokenizer(shared_data_dir):
    lines = []
    for lang in ("en", "de"):
        with gzip.open(shared_data_dir / "multi30k" / f"train.{lang}.gz", "rt",
                       encoding="utf-8") as f:
            lines += [next(f).rstrip("\n") for _ in range(400)]
    return BpeTokenizer(train_bpe(lines, BpeOptions(vocab_size=350)))


def _random_model(tokenizer, norm_position, position_encoding):
    tf.keras.utils.set_random_seed(5)
    config = get_preset("tiny").model.replace(
        vocab_size=tokenizer.vocab_size, max_position=40, d_model=32, num_heads=4, d_ff=64,
        dropout=0.0, norm_position=norm_position, position_encoding=position_encoding)
    model = Transformer(config)
    model.build()
    # Random biases and LayerNorm parameters too (they start at 0 and 1), so that a
    # mislaid bias or gamma/beta cannot go unnoticed.
    rng = np.random.default_rng(0)
    for variable in model.weights:
        if variable.path.endswith(("bias", "gamma", "beta")):
            variable.assign(variable.numpy() + rng.normal(0, 0.2, variable.shape))
    return model


@pytest.mark.parametrize("norm_position,position_encoding",
                         [("post", "sinusoidal"), ("pre", "learned")])
def test_ctranslate2_matches_our_model(tokenizer, tmp_path, norm_position, position_encoding):
    model = _random_model(tokenizer, norm_position, position_encoding)
    out = ct2_export.export_ctranslate2(model, tokenizer.model_proto, tmp_path / "ct2" / "1",
                                        DecodingConfig(beam_size=1, max_extra_length=8))
    assert {"model.bin", "config.json", "shared_vocabulary.json", "bpe.model",
            "transformer_tf.json"} <= {p.name for p in out.iterdir()}
    assert json.loads((out / "config.json").read_text())["layer_norm_epsilon"] == 1e-6
    runner = ct2_export.CTranslate2Translator(out, intra_threads=1)
    sources = runner.source_tokens(SENTENCES[:3])
    processor = runner.processor

    # Teacher forcing: CT2's per-token log-probs of a target vs our log-softmax (with the
    # logits of PAD and BOS masked as our search masks them).
    targets = [sources[1][:6], sources[0][:4], sources[2][:7]]
    scored = runner.translator.score_batch(sources, targets)
    for source, target, result in zip(sources, targets, scored):
        source_ids = [processor.piece_to_id(p) for p in source] + [EOS_ID]
        target_ids = [processor.piece_to_id(p) for p in target]
        logits = model((tf.constant([source_ids]), tf.constant([[BOS_ID] + target_ids])))[0]
        logits = logits.numpy().astype(np.float64)
        logits[:, [PAD_ID, BOS_ID]] = -1e9
        log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(
            -1, keepdims=True)) - logits.max(-1, keepdims=True)
        expected = log_probs[np.arange(len(target_ids) + 1), target_ids + [EOS_ID]]
        assert result.tokens == target + ["</s>"]
        np.testing.assert_allclose(result.log_probs, expected, atol=2e-4, rtol=1e-4)

    # Greedy search, text in and text out: identical to our Translator's.
    ours = Translator(model, tokenizer, DecodingConfig(beam_size=1, max_extra_length=8))
    expected = [t.decode("utf-8") for t in
                ours.translate(tf.constant(SENTENCES))["translation"].numpy()]
    got = runner.translate(SENTENCES, beam_size=1)
    assert got == expected
    assert got[-1] == "" and any(got[:-1])
    # Two workers, each call cut into two sub-batches: the same outputs, in order.
    in_lanes = ct2_export.CTranslate2Translator(out, intra_threads=1, inter_threads=2)
    assert in_lanes.translate(SENTENCES[::-1] + SENTENCES, beam_size=1) == expected[::-1] + expected


def test_positions_are_ours_not_ct2_default(tokenizer, tmp_path):
    """The written table is the paper's interleaved sin/cos (CT2's built-in one is not)."""
    model = _random_model(tokenizer, "post", "sinusoidal")
    spec = ct2_export.transformer_spec(model, ct2_export.vocabulary(tokenizer.model_proto))
    table = spec.encoder.position_encodings.encodings.numpy()  # validated: a NumpyVariable
    position, i = 3, 5  # PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...)
    angle = position / 10000 ** (2 * i / 32)
    np.testing.assert_allclose(table[position, 2 * i: 2 * i + 2],
                               [np.sin(angle), np.cos(angle)], rtol=1e-5)


def test_convs2s_run_gets_a_clear_error(tmp_path, capsys):
    model_dir = tmp_path / "run"
    model_dir.mkdir()
    config = get_preset("tiny").model.get_config()
    (model_dir / "run_config.json").write_text(json.dumps({
        "format": 2, "family": "convs2s", "preset": "tiny", "data_dir": "nowhere",
        "model": {"vocab_size": config["vocab_size"]}, "training": {}, "decoding": {}}))
    with pytest.raises(ValueError, match="'convs2s' cannot be exported to CTranslate2"):
        ct2_export.export_model_dir_ctranslate2(model_dir, tmp_path / "out" / "1")
    script = runpy.run_path(str(REPO / "scripts" / "export_ctranslate2.py"))
    assert script["main"](["--model-dir", str(model_dir), "--out",
                           str(tmp_path / "out" / "1")]) == 2
    assert "only the Transformer family is convertible" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
