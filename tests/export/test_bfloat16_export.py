"""export --precision bfloat16 (`export.precision`, `export.saved_model`): refused on a CPU
without native bfloat16 unless forced, allowed with AVX512-BF16/AMX-BF16 or a GPU; a
forced export of the tiny run has the float32 export's signatures, records its precision,
is reported by translate --model, is rebuilt in bfloat16, and translates as the float32
model does on most sentences, with scores within a bound derived from bfloat16's rounding.

One bfloat16 export per session (`built_once_per_session`); the float32 side is the run
decoded in this process, and the signatures are compared with `serving_exports`' text
export (float32, same signatures whatever the weights)."""
import gzip
import hashlib
import io
import itertools
import json
import sys

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.cli import export as export_cli
from transformer_tf.cli import translate as translate_cli
from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID
from transformer_tf.export.precision import PrecisionRefused, check_export_precision
from transformer_tf.export.saved_model import export_ensemble, export_model_dir
from transformer_tf.inference.loading import (
    EXPORT_INFO,
    EXTRA_DIR,
    load_trained,
    model_from_saved_model,
)
from transformer_tf.inference.translator import Translator

AVX2 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n"
AVX512_BF16 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma avx512f avx512_bf16\n"
AMX = "processor\t: 0\nflags\t\t: fpu avx2 amx_tile amx_bf16\n"
SENTENCES = 40
# bfloat16 keeps 8 significant bits: each rounding errs by at most 2^-8 relatively.
UNIT_ROUNDOFF = 2.0**-8


@pytest.fixture
def cpu(tmp_path, monkeypatch):
    """A function(text): this process's CPU flags read from `text` (TRANSFORMER_TF_CPUINFO)."""
    def use(text):
        path = tmp_path / "cpuinfo"
        path.write_text(text)
        monkeypatch.setenv("TRANSFORMER_TF_CPUINFO", str(path))
    return use


def run_cli(main, argv, capsys, monkeypatch, stdin=""):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    try:
        status = main(argv)
    except SystemExit as stop:
        status = stop.code
    return (status, *capsys.readouterr())


@pytest.fixture(scope="module")
def sources(shared_data_dir):
    with gzip.open(shared_data_dir / "multi30k" / "test_2016_flickr.en.gz", "rt",
                   encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in itertools.islice(handle, SENTENCES)]


@pytest.fixture(scope="module")
def bf16_export(tiny_run, built_once_per_session, tmp_path_factory):
    """The tiny run exported by the command with --precision bfloat16 --force-precision on
    an AVX2 CPU's flags (the forced path, whatever this machine is)."""
    cpuinfo = tmp_path_factory.mktemp("avx2") / "cpuinfo"
    cpuinfo.write_text(AVX2)
    digest = hashlib.sha256()
    for path in sorted((tiny_run / "checkpoints").glob("ckpt-1*")):
        digest.update(path.read_bytes())

    def build(root):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("TRANSFORMER_TF_CPUINFO", str(cpuinfo))
            assert export_cli.main(["--model-dir", str(tiny_run), "--out", str(root / "1"),
                                    "--precision", "bfloat16", "--force-precision",
                                    "--no-warmup"]) == 0

    return built_once_per_session("bf16_export", digest.hexdigest()[:16], build) / "1"


@pytest.fixture(scope="module")
def loaded_bf16(bf16_export):
    return tf.saved_model.load(str(bf16_export))


# ---------------------------------------------------------------- where it may run
@pytest.mark.parametrize("flags", [AVX512_BF16, AMX])
def test_a_cpu_with_native_bfloat16_may_export_it(flags, cpu):
    cpu(flags)
    assert check_export_precision("bfloat16") == "mixed_bfloat16"


def test_a_gpu_may_export_it_whatever_the_cpu(cpu, monkeypatch):
    cpu(AVX2)
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: ["GPU:0"] if kind == "GPU" else [])
    assert check_export_precision("bfloat16") == "mixed_bfloat16"


def test_float32_and_forced_bfloat16_are_allowed_anywhere(cpu):
    cpu(AVX2)
    assert check_export_precision("float32") == "float32"
    assert check_export_precision("bfloat16", force=True) == "mixed_bfloat16"
    with pytest.raises(ValueError, match="float32, bfloat16"):
        check_export_precision("float16", force=True)


def test_an_avx2_cpu_is_refused_before_loading_naming_the_flags(cpu, tiny_run, tmp_path,
                                                                 capsys, monkeypatch):
    cpu(AVX2)
    for export, model in ((export_model_dir, tiny_run), (export_ensemble, [tiny_run])):
        with pytest.raises(PrecisionRefused) as refused:
            export(model, tmp_path / "saved" / "1", precision="bfloat16")
        assert "avx512_bf16, amx_bf16" in str(refused.value)
        assert "--force-precision" in str(refused.value)
    status, _, err = run_cli(export_cli.main, ["--model-dir", str(tiny_run), "--out",
                                               str(tmp_path / "cli" / "1"), "--precision",
                                               "bfloat16"], capsys, monkeypatch)
    assert status == 2 and err.startswith("error: --precision bfloat16:"), err
    assert not (tmp_path / "saved").exists() and not (tmp_path / "cli").exists()


# ---------------------------------------------------------------- the export
def test_the_signatures_are_the_float32_exports(loaded_bf16, serving_exports):
    def described(loaded):
        return {name: (function.structured_input_signature, function.structured_outputs)
                for name, function in loaded.signatures.items()}

    float32 = tf.saved_model.load(str(serving_exports["text"]))
    assert described(loaded_bf16) == described(float32)


def test_the_precision_is_recorded_reported_and_rebuilt(bf16_export, tiny_run, capsys,
                                                        monkeypatch):
    info = json.loads((bf16_export / EXTRA_DIR / EXPORT_INFO).read_text())
    assert info["precision"] == "bfloat16"
    # Rebuilt for other search settings: in bfloat16 again, the run's float32 weights.
    model, _, _ = model_from_saved_model(bf16_export)
    trained, _, _, _ = load_trained(tiny_run)
    assert model.compute_dtype == "bfloat16" and model.variable_dtype == "float32"
    for mine, theirs in zip(model.weights, trained.weights):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    # The laid-out inference kernels are stored in bfloat16.
    kept = model.keep_inference_weights()
    assert kept and {v.dtype for v in kept} == {tf.bfloat16}
    status, out, err = run_cli(translate_cli.main, ["--model", str(bf16_export)],
                               capsys, monkeypatch, stdin="A dog runs.\n")
    assert status == 0 and len(out.splitlines()) == 1, err
    assert "precision: bfloat16 (as exported)" in err


def test_translations_agree_with_float32_and_scores_are_within_rounding(
        loaded_bf16, tiny_run, sources):
    model, tokenizer, run, _ = load_trained(tiny_run)
    translator = Translator(model, tokenizer, run.decoding)
    text = tf.constant(sources)
    expected = translator.translate(text)
    served = loaded_bf16.signatures["serving_default"](text=text)
    same = expected["translation"].numpy() == served["translation"].numpy()
    # "Most": near-ties of a random tiny model may flip; a trained one agrees more.
    assert same.mean() >= 0.75, same.mean()

    # Both score float32's translations (forced decoding, the same pieces). Bound on the
    # |log P difference| of a sentence, from float32's logits z there: every bfloat16
    # product rounds its two inputs (2u relative, u = 2^-8) and the errors add along the
    # longest chain of products from the embeddings to the logits (1 layer: encoder v,
    # output, 2 FFN; cross-attention k/v, output; decoder 2 FFN; output projection: 10),
    # so |dz| <= 2u * 10 * max|z| at each step; a log-softmax moves by at most 2 max|dz|,
    # and log P by at most the sum over its `length` tokens.
    exact = translator.score(text, expected["translation"])
    rounded = loaded_bf16.signatures["score"](source=text, target=expected["translation"])
    token_ids = exact["token_ids"].numpy()
    np.testing.assert_array_equal(token_ids, rounded["token_ids"].numpy())
    source, _, _ = translator.encode_text(text)
    target_input = np.concatenate([np.full((len(sources), 1), BOS_ID), token_ids[:, :-1]], 1)
    target_input[target_input == EOS_ID] = PAD_ID  # EOS is scored, never an input
    logits = model((source, target_input)).numpy()
    largest = np.abs(logits).max(axis=(1, 2))
    bound = exact["length"].numpy() * 2 * (2 * UNIT_ROUNDOFF * 10 * largest)
    difference = np.abs(exact["log_prob"].numpy() - rounded["log_prob"].numpy())
    assert (difference <= bound).all(), (difference, bound)
    assert difference.max() > 0  # the products did run in bfloat16
    print(f"agreement {same.mean():.3f}; |d log P| max {difference.max():.4f}, "
          f"median {np.median(difference):.4f}; bound median {np.median(bound):.3f}")
