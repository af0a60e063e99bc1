"""Fuzzing every signature of both exports (text and ids-only) of a tiny model that prefers
line-break pieces, and scripts/translate.py on a file of every nasty case.

Per row it checks what the serving rules promise (transformer_tf.data.source_text): one
output per input, blank rows "" / no ids with score 0, finite scores, no line break, ids
inside the vocabulary and within the length limit, and that a good sentence's output does
not depend on its neighbours.
"""
import gzip
import itertools
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID
from transformer_tf.data.bpe import line_break_piece_ids
from transformer_tf.data.source_text import is_blank

REPO = pathlib.Path(__file__).resolve().parents[2]
PROBES = ["A man is riding a bicycle.", "Two dogs play in the snow near a fence.",
          "A little girl in a pink dress.", "People sit outside a cafe."]
BLANK_CHARS = " \t\u00a0\u3000\u2028\u2029\u200b\ufeff\u0085\u2009\u202f\u00ad\u2060\x00\x0b\x0c\x1f"
JUNK_RANGES = [(0x4E00, 0x4FFF), (0x1F600, 0x1F64F), (0x0300, 0x036F), (0x202A, 0x202E),
               (0xE000, 0xE0FF), (0x0600, 0x06FF), (0x20, 0x7E), (0x0, 0x1F)]
NUM_TEXT, NUM_IDS = 1100, 1000


def make_text(rng, sentences):
    """One hostile (or ordinary) input string, as bytes."""
    kind = rng.randint(8)
    sentence = sentences[rng.randint(len(sentences))]
    if kind == 0:
        return sentence.encode()
    if kind == 1:  # blank in some Unicode way
        return "".join(rng.choice(list(BLANK_CHARS), rng.randint(0, 6))).encode()
    if kind == 2:  # arbitrary bytes, mostly invalid UTF-8
        return bytes(rng.randint(0, 256, rng.randint(1, 40)).tolist())
    if kind == 3:  # controls spliced into a sentence
        cut = rng.randint(len(sentence) + 1)
        return (sentence[:cut] + "".join(rng.choice(list("\x00\r\x0b\x1b\u2028\ufeff"), 3))
                + sentence[cut:]).encode()
    if kind == 4:  # random code points (CJK, emoji, combining, bidi, private use, ...)
        low, high = JUNK_RANGES[rng.randint(len(JUNK_RANGES))]
        return "".join(chr(c) for c in rng.randint(low, high + 1, rng.randint(1, 30))).encode()
    if kind == 5:  # far beyond the model's positions
        return " ".join([sentence] * rng.randint(2, 40)).encode()
    if kind == 6:  # 300 combining marks on one letter
        return ("e" + "\u0301" * 300).encode()
    return b""  # empty


def make_ids(rng, vocab, good_ids):
    """One hostile (or ordinary) row of ids (list of int)."""
    kind = rng.randint(6)
    good = good_ids[rng.randint(len(good_ids))]
    if kind == 0:
        return good
    if kind == 1:  # anything, in and out of the vocabulary
        return rng.randint(-5, vocab + 5, rng.randint(0, 40)).tolist()
    if kind == 2:  # padding only, or EOS first
        return [PAD_ID] * rng.randint(0, 5) if rng.rand() < 0.5 else [EOS_ID] + good
    if kind == 3:  # far beyond the model's positions
        return (good[:-1] * 200)[:rng.randint(100, 3000)]
    if kind == 4:  # specials and padding inside
        row = list(good)
        row.insert(rng.randint(len(row)), [PAD_ID, BOS_ID, 10 ** 9][rng.randint(3)])
        return row
    return good[:-1]  # no EOS


def pad(rows):
    width = max([len(r) for r in rows] + [0])
    return np.array([r + [PAD_ID] * (width - len(r)) for r in rows], np.int32)


@pytest.fixture(scope="module")
def signatures(serving_exports):
    text = tf.saved_model.load(str(serving_exports["text"]))
    ids = tf.saved_model.load(str(serving_exports["ids"]))
    return {"serving_default": text.signatures["serving_default"],
            "translate_nbest": text.signatures["translate_nbest"],
            "translate_ids": text.signatures["translate_ids"],
            "ids_only": ids.signatures["serving_default"], "_keep": (text, ids)}


@pytest.fixture(scope="module")
def sentences(shared_data_dir):
    with gzip.open(shared_data_dir / "multi30k" / "val.en.gz", "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in itertools.islice(handle, 200)]


def _batches(rng, make, total, probes):
    """Batches of 1..100 generated rows with 1-2 probes at random places; yields
    (rows, {row index: probe index})."""
    made = 0
    while made < total:
        size = int(rng.choice([1, 3, 17, 40, 64, 100]))
        rows = [make() for _ in range(size)]
        at = {}
        for _ in range(1 + (size > 1)):
            where = rng.randint(len(rows) + 1)
            rows.insert(where, None)
            at = {k + (k >= where): v for k, v in at.items()}
            at[where] = rng.randint(len(probes))
        for where, probe in at.items():
            rows[where] = probes[probe]
        made += len(rows)
        yield rows, at


def test_fuzz_text_signatures(signatures, serving_translator, sentences):
    rng = np.random.RandomState(17)
    translate, nbest = signatures["serving_default"], signatures["translate_nbest"]
    base = translate(text=tf.constant(PROBES))
    base_text, base_score = base["translation"].numpy(), base["score"].numpy()
    base_nbest = nbest(text=tf.constant(PROBES))["translations"].numpy()
    probes = [p.encode() for p in PROBES]
    count = 0
    rows_with_huge = [("x" * 100_000).encode()]
    for rows, at in _batches(rng, lambda: make_text(rng, sentences), NUM_TEXT, probes):
        rows = rows + rows_with_huge
        rows_with_huge = []
        out = translate(text=tf.constant(rows))
        texts, scores = out["translation"].numpy(), out["score"].numpy()
        many = nbest(text=tf.constant(rows))
        many_texts, many_scores = many["translations"].numpy(), many["scores"].numpy()
        assert texts.shape == scores.shape == (len(rows),)
        assert many_texts.shape == many_scores.shape == (len(rows), 2)
        for row, raw in enumerate(rows):
            if is_blank(raw.decode("utf-8", errors="replace")):
                assert texts[row] == b"" and scores[row] == 0.0, raw
                assert not many_texts[row].any() and not many_scores[row].any(), raw
                continue
            assert np.isfinite(scores[row]) and scores[row] <= 0.0, raw
            assert many_scores[row, 0] >= many_scores[row, 1], raw
            for text in [texts[row], *many_texts[row]]:
                assert b"\n" not in text and b"\r" not in text, (raw, text)
        for row, probe in at.items():  # a good row is not changed by its neighbours
            assert texts[row] == base_text[probe]
            np.testing.assert_allclose(scores[row], base_score[probe], rtol=1e-4)
            np.testing.assert_array_equal(many_texts[row], base_nbest[probe])
        count += len(rows)
    assert count >= NUM_TEXT


def test_fuzz_ids_signatures(signatures, serving_translator, serving_bpe, check_ids_output):
    rng = np.random.RandomState(23)
    translator = serving_translator
    vocab, max_tokens = translator.model.source_vocab_size, translator.max_source_tokens
    extra, max_target = translator.decoding.max_extra_length, translator.model.max_target_length
    forbidden = line_break_piece_ids(serving_bpe.model_proto)
    encoded = translator.encode_text(tf.constant(PROBES))[0].numpy()
    probes = [[int(i) for i in row if i != PAD_ID] for row in encoded]
    base = signatures["ids_only"](source_ids=tf.constant(pad(probes)))
    base_ids, base_length = base["ids"].numpy(), base["length"].numpy()
    count = 0
    for rows, at in _batches(rng, lambda: make_ids(rng, vocab, probes), NUM_IDS, probes):
        batch = tf.constant(pad(rows))
        out = {k: v.numpy() for k, v in signatures["ids_only"](source_ids=batch).items()}
        same = signatures["translate_ids"](source_ids=batch)  # the text export's copy
        for key in ("ids", "length", "score"):
            np.testing.assert_array_equal(same[key].numpy(), out[key])
        check_ids_output(out, rows, vocab, max_tokens, extra, max_target,
                         [PAD_ID, BOS_ID] + forbidden)
        ids, length = out["ids"], out["length"]
        for row, probe in at.items():
            n = base_length[probe]
            assert length[row] == n
            np.testing.assert_array_equal(ids[row, :n], base_ids[probe, :n])
        count += len(rows)
    assert count >= NUM_IDS


NASTY_LINES = [
    b"A man is riding a bicycle.", b"", b"   \t", "\u00a0\u3000".encode(), "\u2028".encode(),
    "\u200b\ufeff".encode(), "\u0085".encode(), b"\x00", b"A\x00dog.", b"\xff\xfe\xfd",
    b"A dog\rruns.", b"Two cats.\r", b"\x0b\x0c\x1c", "a\u2028b\u2029c\u0085d".encode(),
    "\ufeffA woman sings.".encode(), ("e" + "\u0301" * 300).encode(), "日本語 ☃ 🙂".encode(),
    "\u202eevil\u202c".encode(), b"dog " * 3000, b"Two dogs play in the snow near a fence.",
]


def test_translate_script_keeps_one_line_per_line_on_nasty_input(serving_exports):
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "translate.py"), "--model",
         str(serving_exports["text"]), "--quiet", "--scores"],
        input=b"\n".join(NASTY_LINES) + b"\n", capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout.split(b"\n")
    assert out[-1] == b"" and len(out) - 1 == len(NASTY_LINES), out
    for raw, line in zip(NASTY_LINES, out):
        text, score = line.decode().rsplit("\t", 1)
        if is_blank(raw.decode("utf-8", errors="replace")):
            assert text == "" and float(score) == 0.0, raw
        assert "\r" not in text
