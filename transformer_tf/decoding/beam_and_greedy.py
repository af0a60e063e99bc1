"""Greedy and beam search over a step function, in plain TensorFlow (no Keras, no model).

The model side provides a step function

    step_fn(ids, step, cache) -> (scores, new_cache)

  ids:    int32 [B'], the token chosen at the previous position (`bos_id` at step 0).
  step:   int32 scalar, the 0-based position being predicted (the decoder writes its
          self-attention cache at index `step`).
  cache:  any nested structure (dicts, lists, tuples) of tensors whose leading dimension
          is B'. B' = batch for greedy search and batch * beam_size for beam search
          (row b * beam_size + k is beam k of sentence b).
  scores: float [B', V] logits or log-probabilities (any float dtype); the search applies
          log_softmax itself, in float32, so both work and mixed precision is harmless.
  new_cache must have the structure, dtypes and shapes of `cache`.

Beam search gathers every cache tensor by the chosen beams after each step. Tensors that
are the same for all beams of a sentence and never change (encoder outputs, the source
padding mask) need not go through the cache: let `step_fn` close over them, one row per
sentence (rows b * beam_size ... b * beam_size + beam_size - 1 of `ids` are sentence b's
beams, so the step can attend to a sentence's row with all its beams at once) or tiled
with `tile_beams(x, beam_size)`; or, for a compacting beam search, give them as
`sentence_cache` (below).

Both searches run as one `tf.while_loop` (outputs are allocated at `max_decode_length`), so
they trace into a `tf.function` and a SavedModel without Python work per step, and, with
fixed shapes (no growing cache, no compaction), into XLA (`jit_compile=True`).

Length conventions (shared by both searches):

  * `max_lengths[b]` is the largest number of tokens sentence b may produce, EOS included
    (the caller computes it, e.g. input length + max_extra_length). It is clipped to
    [1, max_decode_length], so at least one token is always produced.
  * A hypothesis ends when it produces `eos_id` (the EOS is part of its ids and counts in
    its length) or when it reaches `max_lengths[b]` tokens without EOS (it is then cut there
    and returned without EOS).
  * Returned ids exclude BOS and are padded with `pad_id` after `lengths`.

Beam search, precisely (this is what the tests check against brute force and a plain
Python reference):

  At each step every alive hypothesis is extended by every token of the vocabulary and
  the `beam_size` best extensions by summed log-probability are kept (one top-k over the
  flattened beam x vocabulary, ties to the lower index; `top_k.top_k_by_groups`). Kept
  extensions ending in EOS, and at the sentence's last allowed position all kept
  extensions, become finished with score
  log P / lp(length) (`length` counts the EOS), by the `length_penalty` rule:
  lp(n) = ((5 + n) / 6) ** alpha ("gnmt", GNMT's) or lp(n) = n ("average": the mean
  log-probability per token, ConvS2S's and fairseq's); the others stay alive. The `n_best` best finished hypotheses are kept. A sentence is done
  when it reaches its maximum length, when it has no alive hypothesis left, or earlier by
  the `stopping` rule:

    "exact": when its n_best-th finished score is at least the best score any alive
      hypothesis could still reach, max(alive log P) / lp(max_lengths[b]). Under both
      rules lp is positive and never decreases with n (for "gnmt" since alpha >= 0), and
      log P <= 0 only decreases as a hypothesis grows, so an alive hypothesis finishing
      at any length n <= max_lengths[b] scores at most log P / lp(n) <= log P /
      lp(max_lengths[b]): the bound never changes the result, up to exact ties
      (tensor2tensor's rule);
    "k_finished": once beam_size of its hypotheses have finished (fairseq's and
      CTranslate2's rule). Faster, since the exact bound divides by the penalty of the
      longest output allowed and so keeps searching long after the best output ended; a
      longer hypothesis that would have scored better can be missed;
    "never": only the two conditions above (for tests).

  Done sentences are frozen; the loop stops when every sentence is done.

  A finished hypothesis uses its beam slot for the step it finishes in (the beam refills
  from the remaining alive hypotheses at the next step). That choice makes beam_size=1
  exactly greedy search: the single slot either continues with the arg-max token or
  finishes with EOS. (tensor2tensor and tensorflow/models instead keep beam_size alive
  hypotheses from the 2 * beam_size best, which searches slightly wider when several
  hypotheses finish at once, but then beam_size=1 is not greedy.)

Work for done sentences is still computed (shapes are fixed, so rows cannot be dropped),
but their outputs no longer change and they do not keep the loop running. Except in a
compacting beam search (`compact=True`, graph mode only, as the batch size changes from
step to step): there a done sentence's result is written out and its rows leave the
batch, so every later step runs on the sentences still searching only. Its per-sentence
tensors (`sentence_cache`, one row per sentence still searching, passed as a fourth
argument, `step_fn(ids, step, cache, sentence_cache)`) are gathered only when sentences
leave. The results are the same.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import numpy as np
import tensorflow as tf

from transformer_tf.config import (
    BOS_ID,
    EOS_ID,
    LENGTH_PENALTIES,
    PAD_ID,
    STOPPING_RULES,
    check_n_best,
)
from transformer_tf.decoding.top_k import top_k_by_groups

StepFn = Callable[[tf.Tensor, tf.Tensor, Any], "tuple[tf.Tensor, Any]"]

_NEG_INF = float("-inf")


class SearchResult(NamedTuple):
    """What a search returns.

    Attributes:
      ids: int32 [batch, n_best, max_decode_length], best first; no BOS; EOS included where
        produced; `pad_id` after `lengths`. Rows of invalid hypotheses (fewer than n_best
        exist) are all `pad_id`.
      scores: float32 [batch, n_best], descending. Beam search: log P / lp(length);
        greedy search: log P. Invalid hypotheses score -inf.
      lengths: int32 [batch, n_best], tokens produced (EOS included); 0 when invalid.
      num_steps: int32 scalar, how many times the step function ran.
    """

    ids: tf.Tensor
    scores: tf.Tensor
    lengths: tf.Tensor
    num_steps: tf.Tensor


class _Finished(NamedTuple):
    """The n best finished hypotheses of each sentence (N = n_best, L = max_decode_length)."""

    seq: tf.Tensor  # int32 [rows, N, L]
    score: tf.Tensor  # float32 [rows, N]: log P / lp(length), -inf if none
    length: tf.Tensor  # int32 [rows, N]: EOS included


class _BeamState(NamedTuple):
    """What the beam search loop carries from one step to the next: A sentences still in
    the batch (A = B unless compacting), K beams, B sentences in all."""

    step: tf.Tensor  # int32 scalar: the position being predicted
    done: tf.Tensor  # bool [A]: the sentence's result can no longer change
    num_finished: tf.Tensor  # int32 [A]: hypotheses finished so far (kept or not)
    rows: tf.Tensor  # int32 [A]: each sentence's row in the batch
    max_lengths: tf.Tensor  # int32 [A]
    ids: tf.Tensor  # int32 [A * K]: each beam's last token (the next step's input)
    alive_log_prob: tf.Tensor  # float32 [A, K]: log P of alive hypotheses, -inf if none
    alive_seq: tf.Tensor  # int32 [A, K, L]: alive hypotheses' tokens
    finished: _Finished  # [A, ...]
    cache: Any  # the step function's cache, rows [A * K, ...]
    sentence_cache: Any  # per-sentence tensors, rows [A, ...] (compacting search)
    results: _Finished  # [B, ...]: sentences that left the batch (compacting search)


def length_penalty(lengths, alpha, rule: str = "gnmt") -> tf.Tensor:
    """The divisor lp(lengths) of a finished hypothesis's log P, float32, shape of
    `lengths`: ((5 + lengths) / 6) ** alpha for rule "gnmt", lengths for "average"
    (alpha unused). Both are >= 1 for lengths >= 1 and never decrease with the length."""
    if rule not in LENGTH_PENALTIES:
        raise ValueError(f"length penalty rule must be one of {LENGTH_PENALTIES}, got {rule!r}")
    if rule == "average":
        return tf.cast(lengths, tf.float32)
    lengths = tf.cast(lengths, tf.float32)
    return tf.pow((5.0 + lengths) / 6.0, tf.cast(alpha, tf.float32))


def _static_or_dynamic_shape(x: tf.Tensor) -> list:
    static = x.shape.as_list()
    dynamic = tf.shape(x)
    return [dim if dim is not None else dynamic[i] for i, dim in enumerate(static)]


def tile_beams(x: tf.Tensor, beam_size: int) -> tf.Tensor:
    """[B, ...] -> [B * beam_size, ...], row b * beam_size + k a copy of row b."""
    x = tf.convert_to_tensor(x)
    shape = _static_or_dynamic_shape(x)
    tiled = tf.tile(tf.expand_dims(x, 1), [1, beam_size] + [1] * (len(shape) - 1))
    batch = shape[0] * beam_size
    return tf.reshape(tiled, [batch] + shape[1:])


def _reorder_cache(cache, flat_indices: tf.Tensor):
    """Gathers every cache tensor's rows [B * K, ...] by `flat_indices` [B * K]."""
    return tf.nest.map_structure(lambda x: tf.gather(x, flat_indices, axis=0), cache)


def _with_static_shape_of(tensor: tf.Tensor, like: tf.Tensor) -> tf.Tensor:
    """`tensor` with `like`'s static shape (same shape at run time; TF's shape inference
    may have lost sizes on the way, e.g. through a gather by indices from a top-k)."""
    tensor.set_shape(like.shape)
    return tensor


def _resolve_max_lengths(max_lengths, batch_size, max_decode_length):
    """Returns (max_lengths int32 [batch] clipped to [1, L], L int or scalar tensor)."""
    max_lengths = tf.convert_to_tensor(max_lengths, dtype=tf.int32)
    if max_lengths.shape.rank not in (None, 0, 1):
        raise ValueError(f"max_lengths must be a scalar or a vector, got shape {max_lengths.shape}")
    if max_decode_length is None:
        static = tf.get_static_value(max_lengths)
        if static is not None:
            max_decode_length = max(int(np.max(static)), 1)
        else:
            # Dynamic output size: fine in a tf.function, not under XLA.
            max_decode_length = tf.maximum(tf.reduce_max(max_lengths), 1)
    elif isinstance(max_decode_length, (int, np.integer)):
        if max_decode_length < 1:
            raise ValueError(f"max_decode_length must be positive, got {max_decode_length}")
        max_decode_length = int(max_decode_length)
    max_lengths = tf.broadcast_to(max_lengths, tf.reshape(batch_size, [1]))
    max_lengths = tf.clip_by_value(max_lengths, 1, max_decode_length)
    return max_lengths, max_decode_length


def _relaxed(structure):
    """Every tensor's shape with all sizes unknown (its rank kept)."""
    return tf.nest.map_structure(lambda t: tf.TensorShape([None] * t.shape.rank), structure)


def _shape_invariants(loop_vars, cache, cache_grows: bool, compact: bool = False):
    """tf.while_loop's shape_invariants: None (every shape fixed) unless the cache grows,
    then the loop variables' own shapes with the cache's relaxed to unknown sizes; a
    compacting beam search relaxes its active rows' leading dimension too.
    `loop_vars` holds `cache` as one of its (top-level) members."""
    if not (cache_grows or compact):
        return None
    relaxed = _relaxed(cache)
    if isinstance(loop_vars, _BeamState):
        shapes = tf.nest.map_structure(lambda t: t.shape, loop_vars._replace(cache=()))
        if compact:
            active = loop_vars._replace(step=(), cache=(), results=())
            shapes = _relaxed(active)._replace(step=shapes.step, results=shapes.results)
        return shapes._replace(cache=relaxed)
    return tuple(v.shape for v in loop_vars[:-1]) + (relaxed,)


def _log_probs(scores: tf.Tensor) -> tf.Tensor:
    return tf.nn.log_softmax(tf.cast(scores, tf.float32), axis=-1)


def greedy_search(
    step_fn: StepFn,
    initial_cache,
    batch_size,
    max_lengths,
    eos_id: int = EOS_ID,
    bos_id: int = BOS_ID,
    max_decode_length: int | None = None,
    pad_id: int = PAD_ID,
    cache_grows: bool = False,
) -> SearchResult:
    """Greedy decoding: the arg-max token at every position, until EOS or the maximum length.

    Args:
      step_fn: `step_fn(ids [B], step, cache) -> (scores [B, V], cache)`; see the module doc.
      initial_cache: nested structure of tensors with leading dimension `batch_size`.
      batch_size: B, a Python int or an int32 scalar tensor.
      max_lengths: int32 [B] or scalar, tokens allowed per sentence, EOS included; clipped
        to [1, max_decode_length].
      eos_id, bos_id, pad_id: special ids.
      max_decode_length: static size L of the outputs (the length the cache was built for).
        None: the static maximum of `max_lengths` when known, else its dynamic maximum
        (under XLA a value-dependent shape: it compiles, but once per distinct value).
      cache_grows: the step function returns cache tensors of other shapes than it got
        (a growing cache; not under XLA).

    Returns:
      A `SearchResult` with n_best = 1: ids [B, 1, L], scores [B, 1] (summed log-probs,
      EOS included, no length penalty), lengths [B, 1], num_steps.
    """
    max_lengths, max_len = _resolve_max_lengths(max_lengths, batch_size, max_decode_length)
    positions = tf.range(max_len)

    def cond(step, done, *_):
        return tf.logical_and(step < max_len, tf.logical_not(tf.reduce_all(done)))

    def body(step, done, ids, log_prob, seq, lengths, cache):
        scores, cache = step_fn(ids, step, cache)
        # Rank log P(prefix) + log p(token) rather than log p(token): the same arithmetic
        # as beam search, so beam_size=1 reproduces greedy even where rounding ties.
        total = log_prob[:, None] + _log_probs(scores)  # [B, V]
        top_score, top_token = top_k_by_groups(total, 1)
        top_score, token = top_score[:, 0], top_token[:, 0]
        live = tf.logical_not(done)
        write = tf.logical_and(live[:, None], positions[None, :] == step)  # [B, L]
        seq = tf.where(write, token[:, None], seq)
        log_prob = tf.where(live, top_score, log_prob)
        lengths = tf.where(live, step + 1, lengths)
        done = done | (token == eos_id) | (step + 1 >= max_lengths)
        ids = tf.where(live, token, pad_id)
        return step + 1, done, ids, log_prob, seq, lengths, cache

    loop_vars = (
        tf.constant(0, tf.int32),
        tf.zeros([batch_size], tf.bool),
        tf.fill([batch_size], tf.constant(bos_id, tf.int32)),
        tf.zeros([batch_size], tf.float32),
        tf.fill([batch_size, max_len], tf.constant(pad_id, tf.int32)),
        tf.zeros([batch_size], tf.int32),
        initial_cache,
    )
    step, _, _, log_prob, seq, lengths, _ = tf.while_loop(
        cond, body, loop_vars,
        shape_invariants=_shape_invariants(loop_vars, initial_cache, cache_grows))
    return SearchResult(
        ids=seq[:, None, :],
        scores=log_prob[:, None],
        lengths=lengths[:, None],
        num_steps=step,
    )


def beam_search(
    step_fn: StepFn,
    initial_cache,
    batch_size,
    beam_size: int,
    max_lengths,
    alpha=0.6,
    eos_id: int = EOS_ID,
    bos_id: int = BOS_ID,
    n_best: int = 1,
    max_decode_length: int | None = None,
    pad_id: int = PAD_ID,
    stopping: str = "exact",
    cache_grows: bool = False,
    sentence_cache=None,
    compact: bool = False,
    length_penalty_rule: str = "gnmt",
) -> SearchResult:
    """Beam search with a length penalty; see the module doc for the exact rules.

    Args:
      step_fn: `step_fn(ids [B*K], step, cache) -> (scores [B*K, V], cache)`; row
        b * K + k is beam k of sentence b. With `sentence_cache`, called as
        `step_fn(ids, step, cache, sentence_cache)`.
      initial_cache: nested structure of tensors with leading dimension `batch_size` (one
        row per sentence); the search tiles it to B * K rows and reorders it after every
        step by the beams the survivors came from.
      batch_size: B, a Python int or an int32 scalar tensor.
      beam_size: K, a Python int >= 1.
      max_lengths: int32 [B] or scalar, tokens allowed per sentence, EOS included; clipped
        to [1, max_decode_length].
      alpha: length-penalty exponent >= 0 (float or float32 scalar tensor); 0 ranks by
        log P alone.
      eos_id, bos_id, pad_id: special ids.
      n_best: hypotheses returned per sentence, 1 <= n_best <= beam_size
        (`config.check_n_best`, here as for every caller; commands check it first to name
        their flag, `cli.flags.search_settings`).
      max_decode_length: static size L of the outputs (the length the cache was built for).
        None: the static maximum of `max_lengths` when known, else its dynamic maximum
        (under XLA a value-dependent shape: it compiles, but once per distinct value).
      stopping: when a sentence stops before its maximum length, one of STOPPING_RULES
        (see the module doc): "exact" (the result of a search to the maximum length, only
        faster), "k_finished" (once beam_size hypotheses have finished) or "never".
      cache_grows: the step function returns cache tensors of other shapes than it got
        (a growing cache; not under XLA).
      sentence_cache: None, or nested tensors with leading dimension `batch_size` that are
        the same for every beam of a sentence and never change; passed to `step_fn` as its
        fourth argument with one row per sentence still in the batch ([A, ...], never
        tiled: beam rows b * K ... b * K + K - 1 belong to its row b), never reordered.
      compact: drop done sentences from the batch (see the module doc; not under XLA).
      length_penalty_rule: lp of the finished scores, one of LENGTH_PENALTIES: "gnmt"
        (((5 + n) / 6) ** alpha) or "average" (n; alpha unused); see `length_penalty`.

    Returns:
      A `SearchResult`: ids [B, n_best, L], scores [B, n_best] (log P / lp(length)),
      lengths [B, n_best], num_steps.
    """
    if not isinstance(beam_size, (int, np.integer)) or beam_size < 1:
        raise ValueError(f"beam_size must be a positive integer, got {beam_size!r}")
    if stopping not in STOPPING_RULES:
        raise ValueError(f"stopping must be one of {STOPPING_RULES}, got {stopping!r}")
    if length_penalty_rule not in LENGTH_PENALTIES:
        raise ValueError(f"length_penalty_rule must be one of {LENGTH_PENALTIES}, got "
                         f"{length_penalty_rule!r}")
    if isinstance(alpha, (int, float)) and alpha < 0:
        raise ValueError(f"alpha must be non-negative (the early-stopping bound needs it), got {alpha}")
    check_n_best(n_best, beam_size)
    k, n = int(beam_size), int(n_best)
    max_lengths, max_len = _resolve_max_lengths(max_lengths, batch_size, max_decode_length)
    alpha = tf.cast(alpha, tf.float32)
    positions = tf.range(max_len)
    penalty = functools.partial(length_penalty, alpha=alpha, rule=length_penalty_rule)
    call_step = step_fn if sentence_cache is not None else (
        lambda ids, step, cache, _: step_fn(ids, step, cache))

    def cond(state: _BeamState):
        searching = (tf.size(state.done) > 0 if compact
                     else tf.logical_not(tf.reduce_all(state.done)))
        return tf.logical_and(state.step < max_len, searching)

    def body(state: _BeamState):
        step, done = state.step, state.done
        rows = tf.shape(done)[0] if compact else batch_size  # A
        scores, cache = call_step(state.ids, step, state.cache, state.sentence_cache)
        log_probs = _log_probs(scores)
        vocab = log_probs.shape[-1] or tf.shape(log_probs)[-1]  # static where known
        log_probs = tf.reshape(log_probs, [rows, k, vocab])
        total = state.alive_log_prob[:, :, None] + log_probs  # [A, K, V]
        top_log_prob, top_index = top_k_by_groups(tf.reshape(total, [rows, k * vocab]), k)
        beam = top_index // vocab  # [A, K], the parent beam of each survivor
        token = top_index % vocab  # [A, K]
        seq = tf.gather(state.alive_seq, beam, batch_dims=1)  # [A, K, L]
        seq = tf.where(positions[None, None, :] == step, token[:, :, None], seq)

        length = step + 1
        at_max = length >= state.max_lengths  # [A]
        finishing = (token == eos_id) | at_max[:, None]  # [A, K]
        candidate_score = tf.where(
            finishing, top_log_prob / penalty(length), _NEG_INF)

        # Merge the new finished candidates into the n best so far (old ones win ties).
        old = state.finished
        merged_score = tf.concat([old.score, candidate_score], axis=1)  # [A, N + K]
        merged_seq = tf.concat([old.seq, seq], axis=1)  # [A, N + K, L]
        merged_len = tf.concat([old.length, tf.fill(tf.shape(candidate_score), length)], axis=1)
        new_score, keep = tf.math.top_k(merged_score, k=n)  # [A, N]
        frozen = done[:, None]
        finished = _Finished(
            seq=tf.where(frozen[:, :, None], old.seq, tf.gather(merged_seq, keep, batch_dims=1)),
            score=tf.where(frozen, old.score, new_score),
            length=tf.where(frozen, old.length, tf.gather(merged_len, keep, batch_dims=1)))

        alive_log_prob = tf.where(finishing | frozen, _NEG_INF, top_log_prob)
        best_alive = tf.reduce_max(alive_log_prob, axis=1)  # [A]
        no_alive = tf.math.is_inf(best_alive)
        newly_finished = finishing & tf.math.is_finite(top_log_prob) & ~frozen
        num_finished = state.num_finished + tf.reduce_sum(tf.cast(newly_finished, tf.int32), 1)
        done = done | at_max | no_alive
        if stopping == "exact":
            max_length_penalty = penalty(state.max_lengths)
            done = done | (finished.score[:, n - 1] >= best_alive / max_length_penalty)
        elif stopping == "k_finished":
            done = done | (num_finished >= k)

        new = state._replace(
            step=step + 1, done=done, num_finished=num_finished, ids=token,
            alive_log_prob=alive_log_prob, alive_seq=seq, finished=finished)
        parents = beam + tf.range(rows)[:, None] * k  # [A, K]: rows of `cache` to keep
        if compact:
            new, parents = _drop_done(new, parents, k)
        parents = tf.reshape(parents, [-1])
        if k == 1 and compact:
            # One beam never changes parent: its cache rows move only when sentences leave
            # (a gather of the whole cache otherwise, every step, for nothing).
            cache = tf.cond(tf.size(parents) < rows,
                            lambda: _reorder_cache(cache, parents), lambda: cache)
        else:
            cache = _reorder_cache(cache, parents)
        if not (cache_grows or compact):  # fixed shapes: the same rows, reordered
            cache = tf.nest.map_structure(_with_static_shape_of, cache, state.cache)
        new = new._replace(ids=tf.reshape(new.ids, [-1]), cache=cache)
        return (new,)

    initial_finished = _Finished(
        seq=tf.fill([batch_size, n, max_len], tf.constant(pad_id, tf.int32)),
        score=tf.fill([batch_size, n], tf.constant(_NEG_INF, tf.float32)),
        length=tf.zeros([batch_size, n], tf.int32))
    initial = _BeamState(
        step=tf.constant(0, tf.int32),
        done=tf.zeros([batch_size], tf.bool),
        num_finished=tf.zeros([batch_size], tf.int32),
        rows=tf.range(batch_size),
        max_lengths=max_lengths,
        ids=tf.fill([batch_size * k], tf.constant(bos_id, tf.int32)),
        # Only beam 0 is alive at the start, so step 0 expands BOS once instead of K times.
        alive_log_prob=tf.tile(tf.constant([[0.0] + [_NEG_INF] * (k - 1)]), [batch_size, 1]),
        alive_seq=tf.fill([batch_size, k, max_len], tf.constant(pad_id, tf.int32)),
        finished=initial_finished,
        cache=tf.nest.map_structure(lambda x: tile_beams(x, k), initial_cache),
        sentence_cache=() if sentence_cache is None else sentence_cache,
        results=initial_finished if compact else (),
    )
    invariants = _shape_invariants(initial, initial.cache, cache_grows, compact)
    (final,) = tf.while_loop(cond, body, (initial,),
                             shape_invariants=None if invariants is None else (invariants,))
    # A compacting search wrote every sentence out as it left; at the length limit all have.
    fin = final.results if compact else final.finished
    valid = tf.math.is_finite(fin.score)
    return SearchResult(
        ids=tf.where(valid[:, :, None], fin.seq, pad_id),
        scores=fin.score,
        lengths=tf.where(valid, fin.length, 0),
        num_steps=final.step,
    )


def _drop_done(state: _BeamState, parents: tf.Tensor, k: int):
    """A compacting search's end of step: done sentences' results are written to
    `state.results` and their rows leave every per-sentence tensor. Returns the new state
    and `parents` [A', K] (the cache rows to keep, in the new order)."""
    leaving = tf.where(state.done)[:, 0]
    staying = tf.where(~state.done)[:, 0]
    written = tf.gather(state.rows, leaving)[:, None]
    results = _Finished(*(tf.tensor_scatter_nd_update(out, written, tf.gather(mine, leaving))
                          for out, mine in zip(state.results, state.finished)))

    def keep(t):
        return tf.gather(t, staying)

    sentence_cache = state.sentence_cache
    if tf.nest.flatten(sentence_cache):  # the big tensors: gathered only when rows leave
        sentence_cache = tf.cond(
            tf.size(leaving) > 0,
            lambda: tf.nest.map_structure(keep, sentence_cache),
            lambda: sentence_cache)
    state = state._replace(
        done=keep(state.done), num_finished=keep(state.num_finished), rows=keep(state.rows),
        max_lengths=keep(state.max_lengths), ids=keep(state.ids),
        alive_log_prob=keep(state.alive_log_prob), alive_seq=keep(state.alive_seq),
        finished=_Finished(*(keep(t) for t in state.finished)),
        sentence_cache=sentence_cache, results=results)
    return state, keep(parents)
