"""Greedy and beam search against brute force and a plain-Python reference on toy models.

The toy model's next-token distribution is a pseudo-random function of the sentence and of
the whole history of tokens fed so far, and that history lives in the cache (written at
index `step`, like the decoder's self-attention cache). So the search only gets the right
distributions if it passes the right step index and reorders the cache by the chosen beams.

What is compared, honestly:
  * brute force: every output sequence (ending in EOS, or cut at the sentence's maximum
    length) is enumerated and ranked by log P / lp(length). Beam search keeps the beam_size
    best extensions per step, so it is guaranteed exact when the beam holds every extension
    at every step but the last: beam_size >= V * (V - 1) ** (L - 2) (at the last step all
    kept extensions finish and only the n_best <= beam_size best of them matter). Those
    tests use such beams and compare full n-best lists, ids and scores.
  * with small beams, beam search is a heuristic: it is compared with a straightforward
    Python implementation of the same rules (lists and sorting, no early stopping, no
    batching), and its hypotheses are checked to be real sequences scored correctly and
    never better than the brute-force optimum.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID
from transformer_tf.decoding import beam_and_greedy
from transformer_tf.decoding.beam_and_greedy import (
    beam_search, greedy_search, length_penalty, tile_beams)

TABLE_SIZE = 1009


class ToyModel:
    """A step function whose distribution depends on the full history kept in its cache.

    cache = {"history": int32 [B', L] tokens fed at each position,
             "sentence": [int32 [B'] sentence seed, (float32 [B'] EOS logit bias,)]}
    """

    def __init__(self, vocab_size=5, max_decode_length=6, seed=0, scale=2.0, dtype=tf.float32,
                 return_log_probs=False):
        rng = np.random.default_rng(seed)
        self.vocab_size = vocab_size
        self.max_decode_length = max_decode_length
        self.table = rng.normal(0.0, scale, [TABLE_SIZE, vocab_size]).astype(np.float32)
        self.weights = rng.integers(1, 1000, size=[max_decode_length]).astype(np.int32)
        self.dtype = dtype
        self.return_log_probs = return_log_probs
        self.calls = tf.Variable(0, dtype=tf.int64, trainable=False)

    def initial_cache(self, seeds, eos_bias=None):
        batch = len(seeds)
        eos_bias = np.zeros([batch]) if eos_bias is None else np.asarray(eos_bias)
        return {
            "history": tf.zeros([batch, self.max_decode_length], tf.int32),
            "sentence": [tf.constant(seeds, tf.int32), (tf.constant(eos_bias, tf.float32),)],
        }

    def step(self, ids, step, cache):
        self.calls.assign_add(1)
        positions = tf.range(self.max_decode_length)[None, :]
        history = tf.where(positions == step, ids[:, None], cache["history"])
        seeds, (eos_bias,) = cache["sentence"]
        weighted = tf.where(positions <= step, (history + 1) * self.weights[None, :], 0)
        h = (seeds * 7919 + step * 13 + tf.reduce_sum(weighted, axis=1)) % TABLE_SIZE
        logits = tf.gather(tf.constant(self.table), h)
        is_eos = tf.range(self.vocab_size)[None, :] == EOS_ID
        logits = tf.where(is_eos, logits + eos_bias[:, None], logits)
        if self.return_log_probs:
            logits = tf.nn.log_softmax(logits)
        new_cache = {"history": history, "sentence": [seeds, (eos_bias,)]}
        return tf.cast(logits, self.dtype), new_cache

    def log_probs(self, seed, eos_bias, tokens):
        """float64 [V]: log p(. | tokens generated so far) for one sentence, in numpy."""
        fed = [BOS_ID] + list(tokens)
        t = len(tokens)
        h = (seed * 7919 + t * 13 + sum((fed[j] + 1) * int(self.weights[j]) for j in range(t + 1)))
        logits = self.table[h % TABLE_SIZE].astype(np.float64)
        logits[EOS_ID] += eos_bias
        top = logits.max()
        return logits - top - math.log(np.exp(logits - top).sum())


def lp(length, alpha, rule="gnmt"):
    """The documented divisors, by hand: GNMT's ((5 + n) / 6) ** alpha, or n ("average")."""
    return float(length) if rule == "average" else ((5.0 + length) / 6.0) ** alpha


def brute_force(model, seed, eos_bias, max_len, alpha, rule="gnmt"):
    """All output sequences of one sentence, best first, as (tokens, score, log P)."""
    out = []

    def expand(tokens, log_prob):
        log_probs = model.log_probs(seed, eos_bias, tokens)
        for token in range(model.vocab_size):
            seq, total = tokens + (token,), log_prob + log_probs[token]
            if token == EOS_ID or len(seq) == max_len:
                out.append((seq, total / lp(len(seq), alpha, rule), total))
            else:
                expand(seq, total)

    expand((), 0.0)
    return sorted(out, key=lambda hyp: -hyp[1])


def reference_beam(model, seed, eos_bias, max_len, beam_size, alpha, n_best, stop_after=None):
    """The documented rules, written plainly: (tokens, score) for the n best, best first.
    `stop_after`: stop once that many hypotheses have finished (the "k_finished" rule)."""
    alive, finished = [((), 0.0)], []
    for t in range(max_len):
        candidates = []
        for tokens, log_prob in alive:
            log_probs = model.log_probs(seed, eos_bias, tokens)
            candidates += [(tokens + (w,), log_prob + log_probs[w]) for w in range(model.vocab_size)]
        candidates = sorted(candidates, key=lambda c: -c[1])[:beam_size]
        alive = []
        for tokens, log_prob in candidates:
            if log_prob == -np.inf:
                continue
            if tokens[-1] == EOS_ID or t + 1 == max_len:
                finished.append((tokens, log_prob / lp(t + 1, alpha)))
            else:
                alive.append((tokens, log_prob))
        if not alive or (stop_after is not None and len(finished) >= stop_after):
            break
    return sorted(finished, key=lambda f: -f[1])[:n_best]


def reference_greedy(model, seed, eos_bias, max_len):
    tokens, total = (), 0.0
    while len(tokens) < max_len and (not tokens or tokens[-1] != EOS_ID):
        log_probs = model.log_probs(seed, eos_bias, tokens)
        token = int(np.argmax(log_probs))
        tokens, total = tokens + (token,), total + log_probs[token]
    return tokens, total


def required_beam(vocab_size, max_len):
    """Smallest beam for which the beam holds every extension at every step but the last."""
    return 1 if max_len < 2 else vocab_size * (vocab_size - 1) ** (max_len - 2)


def run_beam(model, seeds, max_lengths, beam_size, alpha=0.6, n_best=1, eos_bias=None, **kw):
    result = beam_search(model.step, model.initial_cache(seeds, eos_bias), len(seeds), beam_size,
                         tf.constant(max_lengths, tf.int32), alpha=alpha, n_best=n_best,
                         max_decode_length=model.max_decode_length, **kw)
    return tf.nest.map_structure(lambda x: x.numpy(), result)


def run_greedy(model, seeds, max_lengths, eos_bias=None):
    result = greedy_search(model.step, model.initial_cache(seeds, eos_bias), len(seeds),
                           tf.constant(max_lengths, tf.int32),
                           max_decode_length=model.max_decode_length)
    return tf.nest.map_structure(lambda x: x.numpy(), result)


def check_hypotheses(result, b, expected, max_decode_length):
    """result sentence b equals `expected` [(tokens, score), ...] (invalid slots after)."""
    ids, scores, lengths = result.ids[b], result.scores[b], result.lengths[b]
    for i in range(len(scores)):
        if i < len(expected):
            tokens, score = expected[i][0], expected[i][1]
            assert lengths[i] == len(tokens), (b, i)
            assert list(ids[i, :len(tokens)]) == list(tokens), (b, i)
            assert np.all(ids[i, len(tokens):] == PAD_ID)
            np.testing.assert_allclose(scores[i], score, rtol=1e-5, atol=1e-5)
        else:
            assert scores[i] == -np.inf and lengths[i] == 0 and np.all(ids[i] == PAD_ID)
    assert ids.shape[-1] == max_decode_length


def assert_well_separated(ranked, count, gap=1e-5):
    """Guards the chosen seeds: no near-ties in the compared prefix (ids would be ambiguous)."""
    scores = [hyp[1] for hyp in ranked[:count + 1]]
    assert all(a - b > gap for a, b in zip(scores, scores[1:])), "pick another seed"


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.5])
def test_beam_equals_brute_force_n_best_when_beam_holds_everything(alpha):
    vocab, max_lengths, seeds = 5, [3, 1, 2, 3], [11, 12, 13, 14]
    beam = required_beam(vocab, max(max_lengths))  # 20
    model = ToyModel(vocab_size=vocab, max_decode_length=4, seed=1)
    result = run_beam(model, seeds, max_lengths, beam, alpha=alpha, n_best=beam)
    for b, (seed, max_len) in enumerate(zip(seeds, max_lengths)):
        expected = brute_force(model, seed, 0.0, max_len, alpha)
        assert_well_separated(expected, beam)
        check_hypotheses(result, b, expected[:beam], 4)
    # Sentence 1 (max length 1) has only 5 hypotheses: the remaining n-best slots are invalid.
    assert np.sum(np.isfinite(result.scores[1])) == vocab


def test_beam_equals_brute_force_longer_outputs():
    vocab, max_lengths, seeds = 4, [4, 3], [5, 6]
    beam = required_beam(vocab, 4)  # 36
    model = ToyModel(vocab_size=vocab, max_decode_length=5, seed=2, scale=1.0)
    for n_best in (1, 5):
        result = run_beam(model, seeds, max_lengths, beam, alpha=0.6, n_best=n_best)
        for b, (seed, max_len) in enumerate(zip(seeds, max_lengths)):
            expected = brute_force(model, seed, 0.0, max_len, 0.6)
            assert_well_separated(expected, n_best)
            check_hypotheses(result, b, expected[:n_best], 5)


@pytest.mark.parametrize("alpha", [0.6, 2.0])
@pytest.mark.parametrize("beam_size,n_best", [(1, 1), (2, 2), (3, 1), (4, 3)])
def test_small_beams_follow_the_reference_rules(beam_size, n_best, alpha):
    vocab, max_lengths, seeds = 6, [5, 3, 6, 1, 4], [1, 2, 3, 4, 5]
    eos_bias = [0.0, 1.0, -1.0, 0.0, 2.0]
    model = ToyModel(vocab_size=vocab, max_decode_length=6, seed=3)
    result = run_beam(model, seeds, max_lengths, beam_size, alpha=alpha, n_best=n_best,
                      eos_bias=eos_bias)
    for b in range(len(seeds)):
        expected = reference_beam(model, seeds[b], eos_bias[b], max_lengths[b], beam_size, alpha,
                                  n_best)
        check_hypotheses(result, b, expected, 6)
        # Whatever the beam, its hypotheses are real sequences, correctly scored, never
        # better than the optimum.
        exhaustive = {hyp[0]: hyp[1] for hyp in
                      brute_force(model, seeds[b], eos_bias[b], max_lengths[b], alpha)}
        for i in range(n_best):
            tokens = tuple(result.ids[b, i, :result.lengths[b, i]])
            np.testing.assert_allclose(result.scores[b, i], exhaustive[tokens], rtol=1e-5)
        assert result.scores[b, 0] <= max(exhaustive.values()) + 1e-5


def test_greedy_matches_python_greedy_with_different_max_lengths():
    max_lengths, seeds, eos_bias = [6, 2, 4, 1, 5], [7, 8, 9, 10, 11], [0, 0, -1, 0, 1.5]
    model = ToyModel(vocab_size=6, max_decode_length=6, seed=4)
    result = run_greedy(model, seeds, max_lengths, eos_bias)
    assert result.ids.shape == (5, 1, 6) and result.scores.shape == (5, 1)
    for b in range(5):
        tokens, total = reference_greedy(model, seeds[b], eos_bias[b], max_lengths[b])
        check_hypotheses(result, b, [(tokens, total)], 6)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_size_one_is_greedy(alpha):
    max_lengths, seeds, eos_bias = [6, 3, 5, 1, 6, 2], [1, 2, 3, 4, 5, 6], [0, 1, -2, 0, 0.5, 0]
    model = ToyModel(vocab_size=6, max_decode_length=6, seed=5)
    greedy = run_greedy(model, seeds, max_lengths, eos_bias)
    beam = run_beam(model, seeds, max_lengths, 1, alpha=alpha, eos_bias=eos_bias)
    np.testing.assert_array_equal(beam.ids, greedy.ids)
    np.testing.assert_array_equal(beam.lengths, greedy.lengths)
    penalty = lp(greedy.lengths.astype(np.float64), alpha)
    if alpha == 0.0:
        np.testing.assert_array_equal(beam.scores, greedy.scores)
    else:
        np.testing.assert_allclose(beam.scores, greedy.scores / penalty, rtol=1e-6)
    assert beam.num_steps == greedy.num_steps


def test_hypotheses_are_cut_at_their_max_length_when_eos_is_impossible():
    max_lengths, seeds = [4, 1, 2], [1, 2, 3]
    eos_bias = [-np.inf] * 3
    model = ToyModel(vocab_size=5, max_decode_length=5, seed=6)
    for result in (run_greedy(model, seeds, max_lengths, eos_bias),
                   run_beam(model, seeds, max_lengths, 3, n_best=2, eos_bias=eos_bias)):
        assert np.all(result.lengths == np.array(max_lengths)[:, None])
        assert not np.any(result.ids == EOS_ID)
        for b, max_len in enumerate(max_lengths):
            assert np.all(result.ids[b, :, max_len:] == PAD_ID)
        assert result.num_steps == max(max_lengths)
    expected = brute_force(model, 1, -np.inf, 4, 0.6)[0]
    assert tuple(result.ids[0, 0, :4]) == expected[0]


def test_early_stopping_stops_the_loop_and_does_not_change_the_result():
    # EOS is very likely: every sentence's first finished hypothesis beats all alive ones.
    model = ToyModel(vocab_size=6, max_decode_length=30, seed=7)
    seeds, max_lengths, eos_bias = [1, 2, 3], [30, 25, 30], [6.0, 6.0, 6.0]
    model.calls.assign(0)
    early = run_beam(model, seeds, max_lengths, 4, eos_bias=eos_bias)
    calls = int(model.calls.numpy())
    assert calls == early.num_steps <= 3
    late = run_beam(model, seeds, max_lengths, 4, eos_bias=eos_bias, stopping="never")
    assert late.num_steps > 10
    np.testing.assert_array_equal(early.ids, late.ids)
    np.testing.assert_array_equal(early.scores, late.scores)


@pytest.mark.parametrize("beam_size,n_best", [(2, 1), (4, 3)])
def test_k_finished_stops_once_beam_size_hypotheses_finished(beam_size, n_best):
    vocab, max_lengths, seeds = 6, [6, 3, 6, 1, 6], [1, 2, 3, 4, 5]
    eos_bias = [1.0, 1.0, -1.0, 0.0, 2.0]
    model = ToyModel(vocab_size=vocab, max_decode_length=6, seed=3)
    result = run_beam(model, seeds, max_lengths, beam_size, n_best=n_best, eos_bias=eos_bias,
                      stopping="k_finished")
    for b in range(len(seeds)):
        expected = reference_beam(model, seeds[b], eos_bias[b], max_lengths[b], beam_size, 0.6,
                                  n_best, stop_after=beam_size)
        check_hypotheses(result, b, expected, 6)


class StepTableModel:
    """p(token | step) from a table: no history, no cache; checks the step index."""

    def __init__(self, probs):
        self.log_table = np.log(np.asarray(probs, np.float64))
        self.vocab_size = self.log_table.shape[1]

    def step(self, ids, step, cache):
        row = tf.gather(tf.constant(self.log_table, tf.float32), step)
        return tf.tile(row[None, :], [tf.shape(ids)[0], 1]), cache

    def log_probs(self, seed, eos_bias, tokens):
        return self.log_table[len(tokens)]


def test_length_penalty_lets_a_longer_hypothesis_beat_an_early_eos():
    # EOS first has p=0.5 (score -0.69); [4, 4, 4, 4, EOS] has p=0.45*0.9^4, score
    # -1.22 / lp(5) = -0.44 with alpha 2. After step 0 the alive [4] (log P -0.80) can still
    # reach -0.80 / lp(8) = -0.17, so the search must go on; a bound using the current
    # length instead of the maximum would wrongly stop with [EOS].
    probs = [[0.02, 0.02, 0.01, 0.5, 0.45]]  # PAD, UNK, BOS, EOS, 4
    probs += [[0.003, 0.003, 0.004, 0.09, 0.9]] * 3
    probs += [[0.02, 0.02, 0.02, 0.9, 0.04]] * 4
    model = StepTableModel(probs)
    expected = brute_force(model, 0, 0.0, 8, 2.0)
    assert expected[0][0] == (4, 4, 4, 4, EOS_ID)
    for n_best in (1, 2):
        result = beam_search(model.step, {}, 1, 2, [8], alpha=2.0, n_best=n_best)
        result = tf.nest.map_structure(lambda x: x.numpy(), result)
        check_hypotheses(result, 0, expected[:n_best], 8)
    greedy = greedy_search(model.step, {}, 1, [8])
    assert list(greedy.ids.numpy()[0, 0, :2]) == [EOS_ID, PAD_ID]


@pytest.mark.parametrize("rule,alpha", [("gnmt", 0.6), ("average", 0.6), ("average", 0.0)])
def test_each_length_penalty_rule_finds_the_exhaustive_best(rule, alpha):
    # Every sequence up to length 4 over a 4-token vocabulary, ranked by hand under the
    # rule; the EOS biases give short and long optima. alpha plays no part in "average".
    vocab, max_lengths, seeds, eos_bias = 4, [4, 3, 4], [21, 22, 23], [0.0, 1.5, -1.0]
    beam = required_beam(vocab, 4)  # 36: the beam holds every extension
    model = ToyModel(vocab_size=vocab, max_decode_length=4, seed=8, scale=1.5)
    for n_best in (1, 4):
        result = run_beam(model, seeds, max_lengths, beam, alpha=alpha, n_best=n_best,
                          eos_bias=eos_bias, length_penalty_rule=rule)
        for b, (seed, max_len) in enumerate(zip(seeds, max_lengths)):
            expected = brute_force(model, seed, eos_bias[b], max_len, alpha, rule)
            assert_well_separated(expected, n_best)
            check_hypotheses(result, b, expected[:n_best], 4)


def test_average_rule_prefers_a_longer_output_and_its_early_stop_bound_waits_for_it():
    # [EOS] first: p 0.5, score log 0.5 = -0.69 under both rules. [4, 4, 4, EOS]: log P =
    # log(0.45 * 0.9 * 0.9 * 0.9) = -1.11; "average" -1.11 / 4 = -0.28 beats it, GNMT with
    # alpha 0.6 (-1.11 / 1.5 ** 0.6 = -0.87) does not. After step 0 the alive [4] has
    # log P -0.80: below [EOS]'s -0.69 at its own length, but -0.80 / 8 = -0.10 at the
    # longest length allowed, so the exact rule must search on.
    probs = [[0.02, 0.02, 0.01, 0.5, 0.45]]  # PAD, UNK, BOS, EOS, 4
    probs += [[0.003, 0.003, 0.004, 0.09, 0.9]] * 2
    probs += [[0.02, 0.02, 0.02, 0.9, 0.04]] * 5
    model = StepTableModel(probs)
    long_output = (4, 4, 4, EOS_ID)
    for rule, best in (("average", long_output), ("gnmt", (EOS_ID,))):
        expected = brute_force(model, 0, 0.0, 8, 0.6, rule)
        assert expected[0][0] == best
        for stopping in ("exact", "never"):
            result = beam_search(model.step, {}, 1, 2, [8], alpha=0.6, stopping=stopping,
                                 length_penalty_rule=rule)
            result = tf.nest.map_structure(lambda x: x.numpy(), result)
            check_hypotheses(result, 0, expected[:1], 8)
    np.testing.assert_allclose(brute_force(model, 0, 0.0, 8, 0.6, "average")[0][1],
                               math.log(0.45 * 0.9 ** 3) / 4, rtol=1e-9)


def test_average_rule_early_stop_saves_steps_without_changing_the_result():
    model = ToyModel(vocab_size=6, max_decode_length=30, seed=7)
    seeds, max_lengths, eos_bias = [1, 2, 3], [30, 25, 30], [6.0, 6.0, 6.0]
    early = run_beam(model, seeds, max_lengths, 4, eos_bias=eos_bias, n_best=2,
                     length_penalty_rule="average")
    late = run_beam(model, seeds, max_lengths, 4, eos_bias=eos_bias, n_best=2,
                    length_penalty_rule="average", stopping="never")
    assert early.num_steps < late.num_steps
    np.testing.assert_array_equal(early.ids, late.ids)
    np.testing.assert_array_equal(early.scores, late.scores)


def test_k_finished_can_stop_before_the_exact_rule_and_miss_a_better_output():
    # The table of the previous test, beam 2: [EOS] finishes at step 0 and [4, EOS] at
    # step 1, so k_finished stops after 2 steps with [EOS] (score -0.69); the exact rule
    # goes on and finds [4, 4, 4, 4, EOS] (-0.44).
    probs = [[0.02, 0.02, 0.01, 0.5, 0.45]]  # PAD, UNK, BOS, EOS, 4
    probs += [[0.003, 0.003, 0.004, 0.09, 0.9]] * 3
    probs += [[0.02, 0.02, 0.02, 0.9, 0.04]] * 4
    model = StepTableModel(probs)
    quick = beam_search(model.step, {}, 1, 2, [8], alpha=2.0, stopping="k_finished")
    exact = beam_search(model.step, {}, 1, 2, [8], alpha=2.0, stopping="exact")
    assert int(quick.num_steps) == 2 < int(exact.num_steps)
    assert list(quick.ids.numpy()[0, 0, :2]) == [EOS_ID, PAD_ID]
    np.testing.assert_allclose(float(quick.scores[0, 0]), np.log(0.5), rtol=1e-6)
    assert list(exact.ids.numpy()[0, 0, :5]) == [4, 4, 4, 4, EOS_ID]


@pytest.mark.parametrize("beam_size", [1, 3])
def test_done_sentences_are_frozen_and_the_batch_runs_until_the_last_is_done(beam_size):
    model = ToyModel(vocab_size=6, max_decode_length=8, seed=8)
    seeds, max_lengths, eos_bias = [2, 4, 3], [8, 8, 7], [6.0, -1.0, 0.0]
    alone = [run_beam(model, [seeds[b]], [max_lengths[b]], beam_size, n_best=beam_size,
                      eos_bias=[eos_bias[b]]) for b in range(3)]
    together = run_beam(model, seeds, max_lengths, beam_size, n_best=beam_size, eos_bias=eos_bias)
    for b in range(3):
        np.testing.assert_array_equal(together.ids[b], alone[b].ids[0])
        np.testing.assert_allclose(together.scores[b], alone[b].scores[0], rtol=1e-6)
    steps = [int(r.num_steps) for r in alone]
    assert steps[0] < steps[2] < steps[1] < 8  # sentence 1 ends before its max length
    assert together.num_steps == max(steps)


@pytest.mark.parametrize("stopping", ["exact", "k_finished"])
@pytest.mark.parametrize("beam_size,n_best", [(1, 1), (3, 2)])
def test_a_compacting_search_drops_done_sentences_and_gives_the_same_results(
        stopping, beam_size, n_best):
    model = ToyModel(vocab_size=6, max_decode_length=8, seed=16)
    seeds, max_lengths = [1, 2, 3, 4, 5, 6], [8, 3, 8, 1, 6, 8]
    eos_bias = [2.0, 0.0, -1.0, 0.0, 1.0, 0.5]
    want = run_beam(model, seeds, max_lengths, beam_size, n_best=n_best, eos_bias=eos_bias,
                    stopping=stopping)
    rows_searched = tf.Variable(0, dtype=tf.int32, trainable=False)

    def step(ids, step, history, sentence):  # the per-sentence part as sentence_cache
        rows_searched.assign_add(tf.shape(ids)[0])
        # One row per sentence still searching, for its beam_size rows of ids.
        sentence = tf.nest.map_structure(lambda t: tf.repeat(t, beam_size, axis=0), sentence)
        logits, cache = model.step(ids, step, {"history": history, "sentence": sentence})
        return logits, cache["history"]

    def compacting(seeds, max_lengths, eos_bias):
        batch = tf.shape(seeds)[0]
        return beam_search(step, tf.zeros([batch, 8], tf.int32), batch, beam_size, max_lengths,
                           n_best=n_best, max_decode_length=8, stopping=stopping,
                           sentence_cache=[seeds, (eos_bias,)], compact=True)

    graph = tf.function(compacting, input_signature=[tf.TensorSpec([None], tf.int32)] * 2
                        + [tf.TensorSpec([None], tf.float32)])
    for search_fn in (compacting, graph):
        rows_searched.assign(0)
        got = search_fn(tf.constant(seeds), tf.constant(max_lengths),
                        tf.constant(eos_bias, tf.float32))
        np.testing.assert_array_equal(got.ids.numpy(), want.ids)
        np.testing.assert_allclose(got.scores.numpy(), want.scores, rtol=1e-6)
        np.testing.assert_array_equal(got.lengths.numpy(), want.lengths)
        assert int(got.num_steps) == int(want.num_steps)
        # Sentence 3 (one token allowed) leaves after the first step, so fewer rows are
        # searched than the whole batch at every step.
        assert int(rows_searched.numpy()) < len(seeds) * beam_size * int(want.num_steps)


def test_per_sentence_constants_can_be_closed_over_instead_of_cached():
    model = ToyModel(vocab_size=5, max_decode_length=5, seed=15)
    seeds, max_lengths, beam = [1, 2, 3], [5, 3, 4], 3
    want = run_beam(model, seeds, max_lengths, beam, n_best=2)

    @tf.function(jit_compile=True)
    def search_with_closure(seeds, max_lengths):
        sentence = [tile_beams(seeds, beam), (tile_beams(tf.zeros([3]), beam),)]

        def step(ids, step, history):
            logits, cache = model.step(ids, step, {"history": history, "sentence": sentence})
            return logits, cache["history"]

        return beam_search(step, tf.zeros([3, 5], tf.int32), 3, beam, max_lengths, n_best=2,
                           max_decode_length=5)

    got = search_with_closure(tf.constant(seeds), tf.constant(max_lengths))
    np.testing.assert_array_equal(got.ids.numpy(), want.ids)
    np.testing.assert_allclose(got.scores.numpy(), want.scores, rtol=1e-5)


def test_a_missing_cache_reorder_is_caught(monkeypatch):
    """Sensitivity of the brute-force comparison: skip the gather and it must fail."""
    vocab, max_lengths, seeds = 5, [3, 3], [21, 22]
    model = ToyModel(vocab_size=vocab, max_decode_length=3, seed=9)
    beam = required_beam(vocab, 3)
    monkeypatch.setattr(beam_and_greedy, "_reorder_cache", lambda cache, indices: cache)
    result = run_beam(model, seeds, max_lengths, beam, n_best=3)
    expected = brute_force(model, seeds[0], 0.0, 3, 0.6)
    with pytest.raises(AssertionError):
        check_hypotheses(result, 0, expected[:3], 3)


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16])
def test_low_precision_logits_are_scored_in_float32(dtype):
    seeds, max_lengths = [1, 2], [4, 3]
    full = ToyModel(vocab_size=5, max_decode_length=4, seed=10)
    low = ToyModel(vocab_size=5, max_decode_length=4, seed=10, dtype=dtype)
    a, b = run_beam(full, seeds, max_lengths, 3), run_beam(low, seeds, max_lengths, 3)
    assert b.scores.dtype == np.float32
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_allclose(a.scores, b.scores, atol=0.05)


def test_log_probs_and_logits_give_the_same_search():
    seeds, max_lengths = [1, 2, 3], [5, 2, 4]
    a = run_beam(ToyModel(max_decode_length=5, seed=11), seeds, max_lengths, 3, n_best=2)
    b = run_beam(ToyModel(max_decode_length=5, seed=11, return_log_probs=True), seeds,
                 max_lengths, 3, n_best=2)
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_allclose(a.scores, b.scores, rtol=1e-5)


def test_tf_function_and_xla_match_eager():
    model = ToyModel(vocab_size=6, max_decode_length=6, seed=12)
    seeds, max_lengths, eos_bias = [1, 2, 3, 4], [6, 2, 5, 4], [0.0, 0.0, 1.0, -1.0]
    cache = model.initial_cache(seeds, eos_bias)
    lengths = tf.constant(max_lengths, tf.int32)

    def both(cache, lengths):
        beam = beam_search(model.step, cache, 4, 3, lengths, alpha=0.6, n_best=2,
                           max_decode_length=6)
        greedy = greedy_search(model.step, cache, 4, lengths, max_decode_length=6)
        return beam, greedy

    eager = both(cache, lengths)
    for compiled in (tf.function(both), tf.function(both, jit_compile=True)):
        got = compiled(cache, lengths)
        for x, y in zip(tf.nest.flatten(eager), tf.nest.flatten(got)):
            if x.dtype.is_floating:
                np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-5)
            else:
                np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_dynamic_batch_and_lengths_in_a_tf_function():
    """A serving-style signature: batch and max lengths unknown until run time."""
    model = ToyModel(vocab_size=5, max_decode_length=6, seed=13)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int32)])
    def translate(seeds, max_lengths):
        batch = tf.shape(seeds)[0]
        cache = {"history": tf.zeros([batch, 6], tf.int32),
                 "sentence": [seeds, (tf.zeros([batch], tf.float32),)]}
        return beam_search(model.step, cache, batch, 2, max_lengths, max_decode_length=6)

    for seeds, max_lengths in (([1, 2, 3], [6, 3, 9]), ([4], [2])):
        got = translate(tf.constant(seeds), tf.constant(max_lengths))
        want = run_beam(model, seeds, np.minimum(max_lengths, 6), 2)
        assert got.ids.shape == (len(seeds), 1, 6)
        np.testing.assert_array_equal(got.ids.numpy(), want.ids)


def test_scalar_max_length_and_default_output_size():
    model = ToyModel(vocab_size=5, max_decode_length=4, seed=14)
    cache = model.initial_cache([1, 2])
    result = beam_search(model.step, cache, 2, 2, 4)  # scalar max length, L inferred
    assert result.ids.shape == (2, 1, 4)
    reference = run_beam(model, [1, 2], [4, 4], 2)
    np.testing.assert_array_equal(result.ids.numpy(), reference.ids)
    result = greedy_search(model.step, cache, 2, 3)
    assert result.ids.shape == (2, 1, 3)


def test_stateless_step_with_empty_cache():
    logits = tf.math.log(tf.constant([[0.1, 0.1, 0.1, 0.4, 0.3]]))

    def step(ids, step, cache):
        return tf.tile(logits, [tf.shape(ids)[0], 1]), cache

    result = beam_search(step, {}, 2, 2, [3, 3], alpha=0.0, n_best=2)
    np.testing.assert_array_equal(result.ids.numpy()[0, :, :2], [[3, 0], [4, 3]])
    np.testing.assert_allclose(result.scores.numpy()[0], np.log([0.4, 0.3 * 0.4]), rtol=1e-6)


def test_length_penalty_and_tile_beams():
    np.testing.assert_allclose(length_penalty([1, 7], 0.6).numpy(), [1.0, 2.0 ** 0.6], rtol=1e-6)
    np.testing.assert_array_equal(length_penalty([1, 7], 0.6, "average").numpy(), [1.0, 7.0])
    with pytest.raises(ValueError, match="length penalty rule"):
        length_penalty([1], 0.6, "fairseq")
    x = tf.reshape(tf.range(6), [2, 3])
    tiled = tile_beams(x, 2)
    assert tiled.shape == (4, 3)
    np.testing.assert_array_equal(tiled.numpy(), [[0, 1, 2], [0, 1, 2], [3, 4, 5], [3, 4, 5]])


def test_argument_validation():
    model = ToyModel()
    cache = model.initial_cache([1])
    with pytest.raises(ValueError, match="n_best"):
        beam_search(model.step, cache, 1, 2, [3], n_best=3)
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model.step, cache, 1, 0, [3])
    with pytest.raises(ValueError, match="alpha"):
        beam_search(model.step, cache, 1, 2, [3], alpha=-1.0)
    with pytest.raises(ValueError, match="length_penalty_rule"):
        beam_search(model.step, cache, 1, 2, [3], length_penalty_rule="mean")
