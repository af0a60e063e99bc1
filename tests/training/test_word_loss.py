"""The loss with pooled word pieces (`TrainingConfig.word_loss` "any"):

* worked by hand on a small vocabulary, label smoothing included;
* pooling a single id is the ordinary loss, value and gradient (a class of one id is
  that id);
* summed over a tree, it is minus the score the copy grammar gives the same tree in
  search (two independent paths: the loss's class logits, the grammar's step by step);
* the ids pooled for a parsing vocabulary are its word pieces, and a vocabulary with no
  word pieces in its trees (translation, `slot` leaves) is refused with the field named.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import EOS_ID, PAD_ID, TrainingConfig
from transformer_tf.data.bpe import BpeOptions, train_bpe
from transformer_tf.data.linearise import tree_symbols
from transformer_tf.decoding.constraints import CopyBracketGrammar
from transformer_tf.training.losses import token_loss_sums
from transformer_tf.training.word_loss import pooled_ids


def test_pooled_loss_by_hand():
    # V = 5, ids 3 and 4 pooled: classes (0, 1, 2, {3, 4}). Logits (0, 0, log 2, 0, log 3):
    # p = (1, 1, 2, 1, 3) / 8, so p({3, 4}) = 4/8.
    logits = np.array([[[0.0, 0.0, math.log(2.0), 0.0, math.log(3.0)]] * 2], np.float32)
    labels = np.array([[4, 2]])
    pooled = np.array([False, False, False, True, True])
    # eps = 0: -log(4/8) - log(2/8).
    sums = token_loss_sums(labels, logits, 0.0, pad_id=-1, pooled=pooled)
    assert float(sums.nll_sum) == pytest.approx(math.log(2.0) + math.log(4.0), rel=1e-6)
    # eps = 0.3 over C = 4 classes: 0.7 on the label's class, 0.1 on each other one.
    log_p = np.log(np.array([1, 1, 2, 4]) / 8.0)  # classes 0, 1, 2, pooled
    expected = -(0.7 * log_p[3] + 0.1 * log_p[:3].sum()) - (0.7 * log_p[2] + 0.1 * (
        log_p[0] + log_p[1] + log_p[3]))
    sums = token_loss_sums(labels, logits, 0.3, pad_id=-1, pooled=pooled)
    assert float(sums.loss_sum) == pytest.approx(expected, rel=1e-6)
    # The argmax class: pooled (4/8) for both rows; right for the first label only.
    assert float(sums.correct_count) == 1.0 and float(sums.token_count) == 2.0


def test_pooling_one_id_is_the_ordinary_loss():
    rng = np.random.default_rng(0)
    logits = tf.constant(rng.normal(0, 2, (2, 6, 11)), tf.float32)
    labels = tf.constant(rng.integers(0, 11, (2, 6)), tf.int32)  # some PAD (0) among them
    pooled = np.zeros(11, bool)
    pooled[7] = True

    def loss_and_gradient(**kwargs):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            sums = token_loss_sums(labels, logits, 0.1, **kwargs)
        return sums, tape.gradient(sums.loss_sum, logits)

    (plain, plain_grad), (one, one_grad) = loss_and_gradient(), loss_and_gradient(pooled=pooled)
    for field in plain._fields:
        assert float(getattr(one, field)) == pytest.approx(float(getattr(plain, field)), rel=1e-5)
    np.testing.assert_allclose(one_grad.numpy(), plain_grad.numpy(), atol=1e-6)


def test_pooled_loss_compiles_with_xla():
    """The class layout is fixed at tracing: static shapes, so the train step can be
    XLA-compiled (`--jit-compile`), with the eager result."""
    rng = np.random.default_rng(2)
    logits = tf.constant(rng.normal(0, 2, (2, 5, 9)), tf.float32)
    labels = tf.constant(rng.integers(0, 9, (2, 5)), tf.int32)
    pooled = np.array([False, False, True, False, True, True, False, True, True])
    compiled = tf.function(lambda l, z: token_loss_sums(l, z, 0.1, pooled=pooled),
                           jit_compile=True)(labels, logits)
    eager = token_loss_sums(labels, logits, 0.1, pooled=pooled)
    for field in eager._fields:
        assert float(getattr(compiled, field)) == pytest.approx(float(getattr(eager, field)),
                                                                 rel=1e-5)


# A vocabulary of 20: PAD 0, EOS 3; brackets (A )A (B )B; ids 10..14 begin a word,
# 15..19 continue one.
VOCAB, OPEN_IDS, CLOSE_IDS = 20, [5, 6], [7, 8]
WORD_START = [0] * 10 + [1] * 5 + [0] * 5


def test_word_loss_is_minus_the_score_the_copy_grammar_searches():
    grammar = CopyBracketGrammar(VOCAB, OPEN_IDS, CLOSE_IDS, WORD_START, EOS_ID, PAD_ID)
    source = [10, 15, 11, 12, EOS_ID]  # three words, the first in two pieces
    tree = [5, 10, 15, 6, 11, 8, 12, 7, EOS_ID]  # (A w1 (B w2 )B w3 )A
    logits = tf.constant(np.random.default_rng(1).normal(0, 2, (1, len(tree), VOCAB)),
                         tf.float32)
    state = grammar.initial_state(tf.constant([source]), len(tree))
    searched = 0.0
    for step, token in enumerate(tree):
        scores = grammar.apply(state, step, tf.nn.log_softmax(logits[:, step]))
        searched += float(scores[0, token])
        state = grammar.advance(state, tf.constant([token]))
    assert np.isfinite(searched)
    sums = token_loss_sums(tf.constant([tree]), logits, 0.0, pooled=grammar.word_tokens)
    assert float(sums.nll_sum) == pytest.approx(-searched, rel=1e-5)
    # The ordinary loss scores each word piece as itself: more loss for the same tree.
    assert float(token_loss_sums(tf.constant([tree]), logits, 0.0).nll_sum) > -searched + 1.0


@pytest.fixture(scope="module")
def vocabularies():
    known = ["Ms. Haag plays Elianti .", "Pierre Vinken , 61 years old , will join ."]

    def vocabulary(leaves):
        symbols = tree_symbols(["S", "NP", "VP"], leaves=leaves)
        return train_bpe(known * 20 + [" ".join(symbols)] * 5, BpeOptions(
            vocab_size=300, user_defined_symbols=tuple("\u2581" + s for s in symbols)))

    return {"words": vocabulary("words"), "slot": vocabulary("slot"),
            "translation": train_bpe(known * 20, BpeOptions(vocab_size=300))}


def test_pooled_ids_are_the_word_pieces_of_a_parsing_vocabulary(vocabularies):
    from transformer_tf.data.bpe import python_processor

    processor = python_processor(vocabularies["words"])
    pooled = pooled_ids(TrainingConfig(word_loss="any"), vocabularies["words"], 300)
    pieces = {processor.id_to_piece(i).lstrip("\u2581") for i in np.flatnonzero(pooled)}
    kept = {processor.id_to_piece(i).lstrip("\u2581") for i in np.flatnonzero(~pooled)}
    assert {"(NP", ")NP", "(S", ")VP"} <= kept and not {"(NP", ")NP"} & pieces
    assert {".", ",", "61"} <= pieces and not pooled[PAD_ID] and not pooled[EOS_ID]
    assert len(kept) == 2 * 3 + 2  # 3 bracket pairs, EOS, PAD
    assert pooled_ids(TrainingConfig(), vocabularies["words"], 300) is None


@pytest.mark.parametrize("vocabulary, message", [("slot", "slot"), ("translation", "tree tokens")])
def test_word_loss_any_is_refused_without_word_pieces_to_pool(vocabularies, vocabulary, message):
    with pytest.raises(ValueError, match=f"word_loss 'any'.*data/x.*{message}"):
        pooled_ids(TrainingConfig(word_loss="any"), vocabularies[vocabulary], 300,
                   where="data/x")


def test_word_loss_must_be_known():
    with pytest.raises(ValueError, match="word_loss"):
        TrainingConfig(word_loss="words")


def test_a_run_with_word_loss_any_trains_the_pooled_loss(shared_data_dir, tiny_multi30k,
                                                          tmp_path, monkeypatch):
    """The training driver gives the trainer the parsing vocabulary's word pieces; on
    translation data it refuses, naming the data, before it writes anything."""
    from transformer_tf.data.treebank_to_prepared import prepare_treebank
    from transformer_tf.training import fit

    files = sorted((shared_data_dir / "ptb_wsj_sample").glob("*.mrg"))[:14]
    if not files:
        pytest.skip(f"the WSJ sample is not under {shared_data_dir}")
    treebank = tmp_path / "treebank"
    treebank.mkdir()
    for path in files:
        (treebank / path.name).symlink_to(path)
    prepared = prepare_treebank(treebank, tmp_path / "data", vocab_size=400)
    trainers = []
    build = fit.build_model_and_optimizer
    monkeypatch.setattr(fit, "build_model_and_optimizer",
                        lambda *args, **kwargs: trainers.append(build(*args, **kwargs))
                        or trainers[-1])

    def options(data_dir, model_dir):
        return fit.TrainOptions(data_dir=str(data_dir), model_dir=str(model_dir), preset="tiny",
                                training_overrides={"word_loss": "any"}, max_steps=1,
                                eval_every=1, validation_sentences=0, verbose=0)

    fit.train(options(prepared.directory, tmp_path / "parser"))
    expected = pooled_ids(TrainingConfig(word_loss="any"), prepared.bpe_model_path.read_bytes(),
                          prepared.vocab_size)
    assert expected.sum() > 100  # the word pieces of a 400-piece vocabulary
    np.testing.assert_array_equal(trainers[0].pooled_ids, expected)

    with pytest.raises(ValueError, match=f"word_loss 'any'.*{tiny_multi30k.directory}"):
        fit.train(options(tiny_multi30k.directory, tmp_path / "translator"))
    assert len(trainers) == 1 and not (tmp_path / "translator").exists()
