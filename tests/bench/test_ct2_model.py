"""bench/workers/ct2_model.py writes the CTranslate2 decoding peer's model: run in a process
of its own, it must hold the very weights bench/workers/decode_tf.py decodes, so that
CTranslate2 scores a target exactly as our model of the same shape and seed does."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

ctranslate2 = pytest.importorskip("ctranslate2")

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKERS = ROOT / "bench" / "workers"


def test_the_peer_model_scores_as_decode_tfs_model(tmp_path, monkeypatch):
    done = subprocess.run([sys.executable, str(WORKERS / "ct2_model.py"), "--shapes", "tiny",
                           "--out", str(tmp_path)], capture_output=True, text=True, check=True)
    entry = json.loads(done.stdout.strip().splitlines()[-1])["models"]["tiny"]
    tokens = entry["vocabulary"]
    assert tokens[:5] == ["<blank>", "<unk>", "<s>", "</s>", "t4"] and len(tokens) == 512

    # decode_tf.py's model, built in this process as decode_tf.py builds it.
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    monkeypatch.syspath_prepend(str(WORKERS))
    import common
    from fixed_length import decode_model

    model = decode_model(common.SHAPES["tiny"])
    assert entry["params"] == int(sum(np.prod(v.shape) for v in model.weights))

    source_ids = [17, 301, 45, 45, 9, EOS_ID]
    target_ids = [88, 6, 402, 230]
    translator = ctranslate2.Translator(entry["dir"], device="cpu", intra_threads=1)
    scored = translator.score_batch([[tokens[i] for i in source_ids[:-1]]],
                                    [[tokens[i] for i in target_ids]])[0]
    logits = model((tf.constant([source_ids]), tf.constant([[BOS_ID] + target_ids])))[0]
    logits = logits.numpy().astype(np.float64)
    logits[:, [PAD_ID, BOS_ID]] = -1e9  # what the converted projection's bias forbids
    log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(
        -1, keepdims=True)) - logits.max(-1, keepdims=True)
    expected = log_probs[np.arange(len(target_ids) + 1), target_ids + [EOS_ID]]
    np.testing.assert_allclose(scored.log_probs, expected, atol=2e-4, rtol=1e-4)
