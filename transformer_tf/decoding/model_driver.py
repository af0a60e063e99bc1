"""Searching a sequence-to-sequence model: the glue between a model's decoding methods and
the model-independent greedy and beam searches of `transformer_tf.decoding.beam_and_greedy`.

A model searched here provides (see `transformer_tf.models.contract.Seq2SeqModel`):

    encode(source_ids, training=False) -> encoded           any nested structure
    init_cache(encoded, max_length)    -> DecoderState
    decode_step(ids [B], step, state)  -> (logits [B, V], DecoderState)
    target_vocab_size, max_target_length                    ints

and declares in its `DecoderState` which tensors a beam search must reorder after every
step (`per_beam`) and which it leaves alone (`per_sentence`, one row per sentence, and
`constants`). Nothing here knows a model's cache layout or key names.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID, DecodingConfig
from transformer_tf.decoding.beam_and_greedy import (
    SearchResult,
    beam_search,
    greedy_search,
)


class DecoderState(NamedTuple):
    """A model's decoding state, split by how a beam search must treat each part.

    Attributes:
      per_sentence: nested tensors [batch, ...] fixed for the whole search (encoder
        keys/values, source masks), never tiled nor reordered: `decode_step` gets them
        with one row per sentence (A rows) and `ids` and `per_beam` with one row per beam
        (A * K rows; rows b * K ... b * K + K - 1 are sentence b's beams, K = their ratio,
        1 outside a beam search), and lets a sentence's beams share its row (attend to
        its encoder keys as K query positions: they are read once, not K times).
      per_beam: nested tensors [batch, ...] that `decode_step` updates (self-attention
        caches, input buffers): tiled, then gathered by the surviving beams every step.
      constants: nested tensors without a batch dimension (weights rearranged once per
        search); neither tiled nor reordered.
      per_beam_grows: True when `decode_step` returns `per_beam` tensors longer than it got
        (a growing cache): the searches then let their shapes change between steps
        (graph mode only; XLA needs fixed shapes).
    """

    per_sentence: Any
    per_beam: Any
    constants: Any = ()
    per_beam_grows: bool = False


def forbidden_token_bias(vocab_size: int, token_ids: Sequence[int]) -> tf.Tensor:
    """float32 [vocab_size]: -1e9 at `token_ids`, 0 elsewhere (added to every step's logits)."""
    bias = tf.zeros([vocab_size], tf.float32)
    ids = tf.constant(list(token_ids), tf.int32)[:, None]
    return tf.tensor_scatter_nd_update(bias, ids, tf.fill([len(token_ids)], -1e9))


def source_lengths(source_ids) -> tf.Tensor:
    """int32 [batch]: real tokens per row of PAD_ID-padded `source_ids` (EOS included)."""
    return tf.reduce_sum(tf.cast(tf.not_equal(source_ids, PAD_ID), tf.int32), axis=1)


def search_model(model, source_ids, decoding: DecodingConfig, n_best: int = 1,
                 forbidden_ids: Sequence[int] = (PAD_ID, BOS_ID),
                 constraint=None, encoded=None) -> SearchResult:
    """Translate padded source ids: beam search (greedy when decoding.beam_size == 1).

    Args:
      model: a model of the sequence-to-sequence contract.
      source_ids: int [batch, source_length], tokens + EOS, PAD_ID-padded.
      decoding: beam size, alpha and max_extra_length (output length limit: source length
        + max_extra_length tokens, EOS included, and never more than the model's
        max_target_length).
      n_best: hypotheses returned per sentence, 1 <= n_best <= beam_size (the caller's
        to check: `DecodingConfig.check_n_best`).
      forbidden_ids: ids the search never emits (PAD and BOS always belong there).
      constraint: None, or what the outputs must obey (e.g.
        `decoding.constraints.BracketGrammar`), see `search_with_lengths`.
      encoded: `model.encode(source_ids)` when the caller has it (None: encoded here).

    Returns:
      `SearchResult`: ids [batch, n_best, L], scores [batch, n_best], lengths, num_steps.
      The search never emits PAD, BOS or any of `forbidden_ids`.
    """
    source_ids = tf.cast(source_ids, tf.int32)
    max_lengths = tf.minimum(source_lengths(source_ids) + decoding.max_extra_length,
                             model.max_target_length)
    # A growing decoder state where the model has one: a step then costs its own length,
    # not the longest output allowed (source length + max_extra_length).
    return search_with_lengths(
        model, source_ids, beam_size=decoding.beam_size, alpha=decoding.alpha, n_best=n_best,
        max_lengths=max_lengths, cache_length=None,
        forbidden_ids=sorted({PAD_ID, BOS_ID, *forbidden_ids}), constraint=constraint,
        stopping=decoding.stopping, encoded=encoded, length_penalty=decoding.length_penalty)


def search_with_lengths(model, source_ids, *, beam_size: int, alpha: float, n_best: int,
                        max_lengths, cache_length, max_decode_length: int | None = None,
                        forbidden_ids: Sequence[int] = (PAD_ID, BOS_ID),
                        constraint=None, stopping: str = "exact",
                        encoded=None, length_penalty: str = "gnmt") -> SearchResult:
    """The search with explicit length limits, for callers that need control over them
    (benchmarks fix the output length: EOS in `forbidden_ids`, static lengths for XLA).

    Args:
      model: a model of the sequence-to-sequence contract.
      source_ids: int32 [batch, source_length].
      beam_size, alpha, n_best: as in `DecodingConfig` (beam_size 1: greedy).
      max_lengths: int32 [batch] or scalar, tokens allowed per sentence (EOS included).
      cache_length: the decoder cache's size in positions (>= max(max_lengths)); None: a
        state that grows step by step, where the model has one (graph mode, not XLA).
      max_decode_length: static output size, or None (derived from max_lengths).
      forbidden_ids: ids that can never be produced (their logits get -1e9).
      constraint: None, or an object with `initial_state(source_ids, max_lengths)`,
        `advance(state, ids)` and `apply(state, step, scores)` (the step's scores float32
        [rows, V] with what is not allowed at -inf; e.g.
        `decoding.constraints.BracketGrammar`). Its state (tensors with a leading row
        dimension) rides in the beams' cache, so it is reordered with them.
      stopping: the beam search's stopping rule (`decoding.beam_and_greedy.STOPPING_RULES`).
      encoded: `model.encode(source_ids)` when the caller has it (None: encoded here).
      length_penalty: the rule of the finished scores (`DecodingConfig.length_penalty`).
    """
    batch_size = tf.shape(source_ids)[0]
    if encoded is None:
        encoded = model.encode(source_ids, training=False)
    state = model.init_cache(encoded, cache_length)
    constants = state.constants
    # A growing state means graph mode, where the beam search can also drop done sentences
    # from the batch; the per-sentence tensors then travel with the search. Greedy search
    # is then a compacting beam search of one beam with alpha 0 (the same outputs and
    # scores, log P). Either way they keep one row per sentence (DecoderState).
    compact = state.per_beam_grows
    closed_over = state.per_sentence
    forbidden = forbidden_token_bias(model.target_vocab_size, forbidden_ids)  # once

    def model_step(ids, step, per_beam, per_sentence=closed_over):
        logits, new_state = model.decode_step(
            ids, step, DecoderState(per_sentence, per_beam, constants, state.per_beam_grows))
        return tf.cast(logits, tf.float32) + forbidden, new_state.per_beam

    if constraint is None:
        step_fn, initial = model_step, state.per_beam
    else:
        def step_fn(ids, step, carried, *per_sentence):
            per_beam, rules = carried
            rules = constraint.advance(rules, ids)  # ids: the previous step's tokens
            scores, per_beam = model_step(ids, step, per_beam, *per_sentence)
            return constraint.apply(rules, step, scores), (per_beam, rules)

        limits = tf.broadcast_to(tf.cast(max_lengths, tf.int32), [batch_size])
        initial = (state.per_beam, constraint.initial_state(source_ids, limits))

    common = dict(max_decode_length=max_decode_length, eos_id=EOS_ID, bos_id=BOS_ID,
                  pad_id=PAD_ID, cache_grows=state.per_beam_grows)
    if beam_size == 1 and not compact:
        return greedy_search(step_fn, initial, batch_size, max_lengths, **common)
    return beam_search(step_fn, initial, batch_size, beam_size, max_lengths,
                       alpha=alpha if beam_size > 1 else 0.0, n_best=n_best, stopping=stopping,
                       length_penalty_rule=length_penalty if beam_size > 1 else "gnmt",
                       sentence_cache=state.per_sentence if compact else None,
                       compact=compact, **common)


XLA_LENGTH_BUCKET = 8  # source positions: compiled searches are for multiples of this
# Rows encoded together within a length-sorted chunk: each group is padded only to its own
# longest source. On a chunk of 64 Multi30k test sentences groups of 32 save most of what
# groups of 16 save over the whole chunk, and every group is one more encoder in the traced
# graph (export time), so 32.
ENCODE_ROWS = 32


def encode_by_length(model, source_ids, rows: int, max_rows: int):
    """`model.encode(source_ids)` computed `rows` rows at a time, each group of rows cut to
    its own longest source, the outputs padded back to all S positions.

    The encoders of the contract treat rows independently and are blind to padding, so
    on real positions this is the encoding of the whole batch; padded positions hold
    zeros (source_valid False). Useful on rows sorted by length, where the groups are of
    similar lengths.

    Args:
      model: a model of the sequence-to-sequence contract, whose `encode` returns a nest
        of tensors [batch, source_length, ...].
      source_ids: int32 [B, S], PAD_ID-padded, B <= max_rows.
      rows: rows per group (a Python int >= 1).
      max_rows: a static bound on B (Python int): the number of groups traced.
    """
    positions = tf.shape(source_ids)[1]
    lengths = source_lengths(source_ids)
    groups = []
    for start in range(0, max_rows, rows):
        width = tf.maximum(tf.reduce_max(lengths[start:start + rows]), 1)  # 1 when empty
        group = source_ids[start:start + rows, :width]
        count = tf.shape(group)[0]
        # A group past the last row is empty. It is encoded as one all-PAD row, dropped
        # after: oneDNN's fused convolution + bias (TF_ENABLE_ONEDNN_OPTS=1) fails on a
        # batch of 0 rows (InvalidArgumentError), which ConvS2S' encoder would hit.
        group = tf.pad(group, [[0, tf.maximum(1 - count, 0)], [0, 0]], constant_values=PAD_ID)
        encoded = model.encode(group, training=False)
        groups.append(tf.nest.map_structure(
            lambda t, width=width, count=count: tf.pad(
                t[:count], [[0, 0], [0, positions - width]] + [[0, 0]] * (t.shape.rank - 2)),
            encoded))
    return tf.nest.map_structure(lambda *parts: tf.concat(parts, axis=0), *groups)


def _filled_and_sorted(source_ids, rows):
    """`source_ids` int32 [B, S] with lone-EOS rows appended up to `rows` rows (>= B; such a
    row ends at the first step of any search), their lengths, and the stable order that
    sorts them by length: (filled [rows, S], lengths [rows], order [rows]). The caller's
    rows come back with `tf.math.invert_permutation(order)[:B]`."""
    # A request of no rows can be of width 0: one PAD column leaves room for the EOS.
    source_ids = tf.pad(source_ids, [[0, 0], [0, tf.maximum(1 - tf.shape(source_ids)[1], 0)]])
    filler = rows - tf.shape(source_ids)[0]
    eos_rows = tf.pad(tf.fill([filler, 1], EOS_ID), [[0, 0], [0, tf.shape(source_ids)[1] - 1]])
    filled = tf.concat([source_ids, eos_rows], axis=0)
    lengths = source_lengths(filled)
    return filled, lengths, tf.argsort(lengths, stable=True)


def search_in_lanes(search, source_ids, lanes: int) -> SearchResult:
    """`search(source_ids)` computed as `lanes` independent searches of parts of the batch,
    which TensorFlow can run at the same time (one per core); results in the caller's order.

    The rows are sorted by source length and dealt out in turn (row i of the sorted batch
    to lane i mod lanes), so every lane gets sentences of every length and the lanes end
    at about the same time. The batch is first filled up to a multiple of `lanes` with
    lone-EOS rows (they end at the first step), so every lane has rows. Rows are
    independent, so the ids are those of `search` on the whole batch (scores up to the
    float rounding of other batch shapes).

    The lanes are separate loops in the graph with no data between them: they run in
    parallel only when the inter-op thread pool has `lanes` threads or more. In a graph,
    `search` is traced once and called once per lane (TensorFlow inlines the calls when it
    runs the graph, so the loops are the same as with one trace per lane; tracing, and a
    SavedModel, hold the search once instead of `lanes` times). On a CPU,
    intra-op 1 and inter-op = lanes (= cores) serves a large request fastest: one thread
    per loop instead of every small matrix product split over all cores
    (bench/README.md, "Lanes").

    Args:
      search: source_ids int32 [b, S] -> `SearchResult` with ids [b, n_best, L_b]
        (rows searched independently).
      source_ids: int32 [B, S], PAD_ID-padded.
      lanes: a Python int >= 1; 1 calls `search` once on the whole batch.

    Returns:
      `SearchResult` for the B rows; ids padded with PAD_ID to the longest lane's width;
      num_steps summed over the lanes.
    """
    if lanes < 1:
        raise ValueError(f"lanes must be >= 1, got {lanes}")
    if lanes == 1:
        return search(source_ids)
    source_ids = tf.cast(source_ids, tf.int32)
    batch_size = tf.shape(source_ids)[0]
    rows_per_lane = tf.maximum((batch_size + lanes - 1) // lanes, 1)
    padded, _, order = _filled_and_sorted(source_ids, rows_per_lane * lanes)
    if tf.inside_function():
        search = tf.function(search, autograph=False)  # every lane's input: [rows, S]
    results = [search(tf.gather(padded, order[lane::lanes])) for lane in range(lanes)]
    width = tf.reduce_max(tf.stack([tf.shape(result.ids)[2] for result in results]))
    ids = [tf.pad(result.ids, [[0, 0], [0, 0], [0, width - tf.shape(result.ids)[2]]],
                  constant_values=PAD_ID) for result in results]
    restore = tf.math.invert_permutation(order)[:batch_size]

    def merge(parts):  # lanes x [B'/lanes, ...] -> [B, ...] in the caller's order
        dealt = tf.stack(parts, axis=1)  # row i of lane k is sorted row i * lanes + k
        return tf.gather(tf.reshape(dealt, tf.concat([[-1], tf.shape(dealt)[2:]], 0)),
                         restore)

    return SearchResult(merge(ids), merge([result.scores for result in results]),
                        merge([result.lengths for result in results]),
                        tf.add_n([result.num_steps for result in results]))


def _next_power_of_two(n) -> tf.Tensor:
    """int32 scalar: the smallest power of two >= max(n, 1)."""
    powers = tf.constant([2 ** i for i in range(31)], tf.int32)
    n = tf.reshape(tf.maximum(tf.cast(n, tf.int32), 1), [1])
    return powers[tf.searchsorted(powers, n, side="left")[0]]


def xla_chunk_search(model, decoding: DecodingConfig, n_best: int = 1,
                     forbidden_ids: Sequence[int] = (PAD_ID, BOS_ID), constraint=None):
    """The XLA-compiled search of one chunk, ids int32 [rows, bucket] -> `SearchResult`
    (outputs of bucket + max_extra_length positions, at most the model's), for
    `search_model_by_length(..., jit_compile=this)`. XLA compiles a function once per input
    shape: callers that share one (the lanes of a request, `search_in_lanes`) compile each
    shape once between them, where a function each would compile every shape again (a
    2-lane export would take about twice as long to compile its warm-up shapes)."""
    forbidden_ids = sorted({PAD_ID, BOS_ID, *forbidden_ids})

    @tf.function(jit_compile=True, autograph=False)
    def compiled_search(ids):  # ids [chunk, bucket]: the shapes XLA compiles for
        width = tf.minimum(tf.shape(ids)[1] + decoding.max_extra_length,
                           model.max_target_length)
        return search_with_lengths(
            model, ids, beam_size=decoding.beam_size, alpha=decoding.alpha, n_best=n_best,
            max_lengths=tf.minimum(source_lengths(ids) + decoding.max_extra_length,
                                   model.max_target_length),
            cache_length=width, max_decode_length=width, forbidden_ids=forbidden_ids,
            constraint=constraint, stopping=decoding.stopping,
            length_penalty=decoding.length_penalty)

    return compiled_search


def search_model_by_length(model, source_ids, decoding: DecodingConfig, n_best: int = 1,
                           forbidden_ids: Sequence[int] = (PAD_ID, BOS_ID),
                           jit_compile=False, constraint=None,
                           encode_rows: int = ENCODE_ROWS) -> SearchResult:
    """`search_model` on the batch sorted by source length and cut into chunks of
    `decoding.chunk_size` rows, searched one after the other; results in the caller's row
    order.

    A search runs every row of its batch until the batch's last sentence ends, and pads
    every source to the batch's longest: in a batch of mixed lengths most of that work is
    wasted. Chunks of similar lengths stop early and pad little. Rows are independent, so
    the ids are those of `search_model` (scores up to float rounding of other batch shapes).

    A chunk has `decoding.chunk_size` rows, or for a smaller batch the power of two that
    holds it; the last chunk is filled with lone-EOS rows. With `jit_compile`, each chunk's search
    is compiled by XLA. Its shapes come from a small fixed set, so each is compiled once:
    those chunk sizes, the source padded up to a multiple of XLA_LENGTH_BUCKET positions
    (at most the model's), outputs of that + max_extra_length positions (at most the
    model's). The first request of each shape pays its compilation (seconds).

    Args:
      model, source_ids, decoding, n_best, forbidden_ids, constraint: as in
        `search_model`; decoding.chunk_size >= 1 is the rows per chunk.
      jit_compile: compile each chunk's search with XLA (see above): True, or the
        function `xla_chunk_search` returns for the same settings, to share its
        compilations with other calls.
      encode_rows: without XLA, a chunk's rows are encoded this many at a time, each
        group padded only to its own longest source (`encode_by_length`).

    Returns:
      `SearchResult` as `search_model`'s; ids are padded to the longest output length any
      row of the whole batch may reach; num_steps is the sum over the chunks.
    """
    chunk_size = decoding.chunk_size
    if chunk_size < 1:
        raise ValueError(f"a search by length needs decoding.chunk_size >= 1, got {chunk_size}")
    source_ids = tf.cast(source_ids, tf.int32)
    batch_size = tf.shape(source_ids)[0]
    # Small batches get small chunks: the power of two that holds them, up to chunk_size.
    chunk = tf.minimum(chunk_size, _next_power_of_two(batch_size))
    num_chunks = tf.maximum((batch_size + chunk - 1) // chunk, 1)  # one even for no rows
    # Fill the last chunk with lone-EOS rows (cheap: they end at the first step).
    padded, lengths, order = _filled_and_sorted(source_ids, num_chunks * chunk)
    chunks = tf.reshape(tf.gather(padded, order), [num_chunks, chunk, -1])
    chunk_lengths = tf.reshape(tf.gather(lengths, order), [num_chunks, chunk])
    max_output = tf.maximum(tf.reduce_max(tf.minimum(
        lengths + decoding.max_extra_length, model.max_target_length)), 1)

    forbidden_ids = sorted({PAD_ID, BOS_ID, *forbidden_ids})
    compiled_search = jit_compile if callable(jit_compile) else (
        xla_chunk_search(model, decoding, n_best, forbidden_ids, constraint)
        if jit_compile else None)

    def search_chunk(inputs):
        ids, row_lengths = inputs
        width = tf.maximum(tf.reduce_max(row_lengths), 1)
        if compiled_search is not None:
            width = tf.minimum(-(-width // XLA_LENGTH_BUCKET) * XLA_LENGTH_BUCKET,
                               model.max_source_length)
            ids = tf.pad(ids, [[0, 0], [0, tf.maximum(width - tf.shape(ids)[1], 0)]])
            result = compiled_search(ids[:, :width])
        else:
            ids = ids[:, :width]
            encoded = (encode_by_length(model, ids, encode_rows, chunk_size)
                       if encode_rows < chunk_size else None)
            result = search_model(model, ids, decoding, n_best=n_best,
                                  forbidden_ids=forbidden_ids, constraint=constraint,
                                  encoded=encoded)
        # Every row's output fits in max_output; a bucket's may be wider, or narrower.
        room = tf.maximum(max_output - tf.shape(result.ids)[2], 0)
        ids = tf.pad(result.ids, [[0, 0], [0, 0], [0, room]],
                     constant_values=PAD_ID)[:, :, :max_output]
        return SearchResult(ids, result.scores, result.lengths, result.num_steps)

    spec = SearchResult(tf.TensorSpec([None, n_best, None], tf.int32),
                        tf.TensorSpec([None, n_best], tf.float32),
                        tf.TensorSpec([None, n_best], tf.int32),
                        tf.TensorSpec([], tf.int32))
    results = tf.map_fn(search_chunk, (chunks, chunk_lengths), fn_output_signature=spec,
                        parallel_iterations=1)
    restore = tf.math.invert_permutation(order)[:batch_size]

    def unsort(t):
        return tf.gather(tf.reshape(t, tf.concat([[-1], tf.shape(t)[2:]], 0)), restore)

    return SearchResult(unsort(results.ids), unsort(results.scores), unsort(results.lengths),
                        tf.reduce_sum(results.num_steps))
