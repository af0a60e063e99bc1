"""Searching a batch sorted by length in chunks (`search_model_by_length`), or in lanes
searched side by side (`search_in_lanes`), gives every row what searching it alone gives,
in the caller's order, whatever the chunk size and the number of lanes."""
from __future__ import annotations

import functools

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import EOS_ID, PAD_ID, DecodingConfig, ModelConfig
from transformer_tf.presets import get_preset
from transformer_tf.decoding.model_driver import (
    search_in_lanes, search_model, search_model_by_length)
from transformer_tf.models.convs2s import ConvS2S
from transformer_tf.models.transformer import Transformer

LENGTHS = [7, 2, 12, 1, 5, 9, 3, 12, 4]  # tokens + EOS per row; 1 = a lone EOS


def _sources(seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ids = np.full([len(LENGTHS), max(LENGTHS)], PAD_ID, np.int32)
    for row, length in enumerate(LENGTHS):
        ids[row, :length - 1] = rng.integers(4, 40, length - 1)
        ids[row, length - 1] = EOS_ID
    return ids


@functools.lru_cache(maxsize=None)  # one model per size, shared: decoding changes nothing
def _transformer(max_position=64, source_cursor=False):
    tf.keras.utils.set_random_seed(11)
    model = Transformer(ModelConfig(vocab_size=40, num_layers=2, d_model=24, d_ff=48,
                                    num_heads=4, max_position=max_position, dropout=0.0,
                                    source_cursor=source_cursor))
    model.build()
    # Make EOS likely enough that the rows end at different steps.
    bias = model.source_embedding.embeddings
    bias.assign(bias.numpy() + np.eye(1, 40, EOS_ID).T * 0.5)
    return model


def _traced(search):
    """`search` (ids -> SearchResult) as one tf.function for any batch and length: traced
    once, where an eager call runs every step of its loops op by op in Python (about three
    times slower). Served searches always run traced; the eager path keeps one witness
    (test_each_row_gets_what_it_gets_alone with chunks of 4, greedy). Traced without
    AutoGraph, as the library traces its own searches (AutoGraph would convert the
    search code again in every worker process); a user's own tf.function, AutoGraph on,
    keeps one witness (test_chunks_in_a_tf_function_with_unknown_batch_and_length)."""
    return tf.function(search, input_signature=[tf.TensorSpec([None, None], tf.int32)],
                       autograph=False)


@functools.lru_cache(maxsize=None)  # the reference is shared by the tests that need it
def _row_by_row(model, seed, decoding, n_best):
    """Each row of _sources(seed) searched alone (the independent expectation), by one
    traced plain search (no chunks, no lanes) called once per row."""
    alone_search = _traced(lambda ids: search_model(model, ids, decoding, n_best=n_best))
    rows = []
    for row in _sources(seed):
        alone = row[:max(int((row != PAD_ID).sum()), 1)][None]
        rows.append(alone_search(tf.constant(alone)))
    return rows


def _assert_same_as_alone(result, alone_rows):
    for row, alone in enumerate(alone_rows):
        length = alone.ids.shape[2]
        np.testing.assert_array_equal(result.ids[row, :, :length], alone.ids[0])
        assert not np.any(result.ids[row, :, length:].numpy() != PAD_ID)
        np.testing.assert_array_equal(result.lengths[row], alone.lengths[0])
        np.testing.assert_allclose(result.scores[row], alone.scores[0], rtol=1e-5, atol=1e-5)


# Chunks of 4 cut the 9 rows into sorted chunks with a filled last one (both searches);
# 64 takes the whole batch as one chunk of 16 (one search each; the beam search drops
# sentences from its batch as they end), its rows encoded 4 at a time, each group padded
# to its own longest source.
@pytest.mark.parametrize("beam_size,n_best,chunk_size,stopping", [
    (1, 1, 4, "exact"), (3, 2, 4, "exact"), (1, 1, 64, "exact"), (3, 1, 64, "k_finished")])
def test_each_row_gets_what_it_gets_alone(beam_size, n_best, chunk_size, stopping):
    model = _transformer()
    sources = _sources()
    decoding = DecodingConfig(beam_size=beam_size, alpha=0.6, max_extra_length=6,
                              stopping=stopping)
    def search(ids):
        return search_model_by_length(model, ids, decoding.replace(chunk_size=chunk_size),
                                      n_best=n_best, encode_rows=4)

    eager = (beam_size, chunk_size) == (1, 4)  # the witness that eager calls work too
    result = (search if eager else _traced(search))(tf.constant(sources))
    assert result.ids.shape[:2] == (len(LENGTHS), n_best)
    assert result.ids.shape[2] == max(LENGTHS) + 6  # the longest any row may reach
    _assert_same_as_alone(result, _row_by_row(model, 0, decoding, n_best))
    lengths = result.lengths.numpy()[:, 0]
    assert len(set(lengths.tolist())) > 2  # the rows really ended at different steps


@pytest.mark.parametrize("chunk_size,xla", [(64, False), (4, True)])
def test_a_source_cursor_model_gets_what_it_gets_alone(chunk_size, xla):
    """The cursor is per-beam state: reordered with the beams, dropped with finished
    sentences (one compacting chunk, its rows encoded in groups padded to their own
    length), and carried with fixed shapes under XLA (chunks of 4, padded buckets)."""
    model = _transformer(source_cursor=True)
    sources = _sources()
    decoding = DecodingConfig(beam_size=3, alpha=0.6, max_extra_length=6,
                              chunk_size=chunk_size)
    search = tf.function(
        lambda ids: search_model_by_length(model, ids, decoding, n_best=2,
                                           encode_rows=4, jit_compile=xla),
        input_signature=[tf.TensorSpec([None, None], tf.int32)], autograph=False)
    result = search(tf.constant(sources))
    _assert_same_as_alone(result, _row_by_row(model, 0, decoding, 2))
    copied = [np.isin(ids[ids > EOS_ID], source[source > EOS_ID]).sum()
              for ids, source in zip(result.ids.numpy()[:, 0], sources)]
    assert sum(copied) > 3  # outputs hold source tokens: the cursor moved


def test_chunks_in_a_tf_function_with_unknown_batch_and_length():
    """As a user would wrap it: a tf.function with AutoGraph on (the library's own are
    traced without it)."""
    model = _transformer()
    decoding = DecodingConfig(beam_size=2, alpha=0.6, max_extra_length=4)
    search = tf.function(  # rows encoded 2 at a time: groups that are empty, too
        lambda ids: search_model_by_length(model, ids, decoding.replace(chunk_size=4),
                                           encode_rows=2),
        input_signature=[tf.TensorSpec([None, None], tf.int32)])
    sources = _sources(seed=3)
    whole = _traced(lambda ids: search_model(model, ids, decoding))(tf.constant(sources))
    chunked = search(tf.constant(sources))
    np.testing.assert_array_equal(chunked.ids, whole.ids)
    np.testing.assert_allclose(chunked.scores, whole.scores, rtol=1e-5, atol=1e-5)
    one = search(tf.constant(sources[3:4, :1]))  # a lone EOS, batch of one
    assert one.ids.shape[0] == 1
    empty = search(tf.zeros([0, 3], tf.int32))  # a request with no rows
    assert empty.ids.shape[0] == 0 and empty.scores.shape == (0, 1)


# Chunks of 3 rows encoded 2 + 1: the convolutions see zeros past each row's end however
# far its group is padded. Chunks of up to 64 rows encoded 4 at a time: the 9 rows fill a
# chunk of 16, so the groups past it are empty (oneDNN's convolution fails on 0 rows).
@pytest.mark.parametrize("chunk_size,encode_rows", [(3, 2), (64, 4)])
def test_a_second_family_is_chunked_the_same_way(chunk_size, encode_rows):
    tf.keras.utils.set_random_seed(5)
    model = ConvS2S(get_preset("convs2s_tiny").model.replace(vocab_size=40, max_position=64))
    model.build()
    sources = _sources(seed=1)
    decoding = DecodingConfig(beam_size=2, alpha=0.6, max_extra_length=5)
    result = _traced(lambda ids: search_model_by_length(
        model, ids, decoding.replace(chunk_size=chunk_size), encode_rows=encode_rows))(
            tf.constant(sources))
    _assert_same_as_alone(result, _row_by_row(model, 1, decoding, 1))


def test_chunk_size_must_be_positive():
    with pytest.raises(ValueError, match="chunk_size"):
        search_model_by_length(None, tf.zeros([1, 1], tf.int32), DecodingConfig(chunk_size=0))


# 9 rows in 2 lanes (one filler row), 3 lanes (none) and 4 lanes (three filler rows);
# each lane searched whole (chunk 0), in chunks of 2, or as one chunk.
@pytest.mark.parametrize("lanes,chunk_size,beam_size,n_best", [
    (2, 0, 3, 2), (3, 2, 3, 1), (4, 64, 1, 1), (2, 64, 3, 2)])
def test_lanes_give_each_row_what_it_gets_alone(lanes, chunk_size, beam_size, n_best):
    model = _transformer()
    decoding = DecodingConfig(beam_size=beam_size, alpha=0.6, max_extra_length=6)

    def search(ids):
        if chunk_size:
            return search_model_by_length(model, ids, decoding.replace(chunk_size=chunk_size),
                                          n_best=n_best)
        return search_model(model, ids, decoding, n_best=n_best)

    result = _traced(lambda ids: search_in_lanes(search, ids, lanes))(tf.constant(_sources()))
    assert result.ids.shape[:2] == (len(LENGTHS), n_best)
    _assert_same_as_alone(result, _row_by_row(model, 0, decoding, n_best))


def test_lanes_in_a_tf_function_take_any_batch():
    """Unknown batch and length: fewer rows than lanes (the other lanes get filler rows)
    and no rows at all; num_steps adds up the lanes' steps."""
    model = _transformer()
    decoding = DecodingConfig(beam_size=2, alpha=0.6, max_extra_length=4)
    one_search = functools.partial(search_model_by_length, model,
                                   decoding=decoding.replace(chunk_size=4))
    search = tf.function(lambda ids: search_in_lanes(one_search, ids, 3),
                         input_signature=[tf.TensorSpec([None, None], tf.int32)],
                         autograph=False)
    sources = _sources(seed=3)
    plain = _traced(lambda ids: search_model(model, ids, decoding))
    np.testing.assert_array_equal(search(tf.constant(sources)).ids,
                                  plain(tf.constant(sources)).ids)
    two = search(tf.constant(sources[:2]))
    np.testing.assert_array_equal(two.ids, plain(tf.constant(sources[:2])).ids)
    # Each lane runs at least its first step: 2 rows and a filler row, 3 lanes.
    assert two.num_steps.numpy() >= 3
    empty = search(tf.zeros([0, 3], tf.int32))
    assert empty.ids.shape[0] == 0 and empty.scores.shape == (0, 1)


def test_the_lanes_trace_the_search_once(monkeypatch):
    """In a graph the lanes call one traced search: the model's decoding step is traced
    once for 3 lanes, not once per lane."""
    model = _transformer()
    traced = []
    step = model.decode_step
    monkeypatch.setattr(model, "decode_step", lambda *a, **k: traced.append(1) or step(*a, **k))
    decoding = DecodingConfig(beam_size=2, alpha=0.6, max_extra_length=4, chunk_size=4)
    search = functools.partial(search_model_by_length, model, decoding=decoding)
    tf.function(lambda ids: search_in_lanes(search, ids, 3), autograph=False,
                input_signature=[tf.TensorSpec([None, None], tf.int32)]).get_concrete_function()
    assert len(traced) == 1


def test_lanes_must_be_positive():
    with pytest.raises(ValueError, match="lanes"):
        search_in_lanes(None, tf.zeros([1, 1], tf.int32), 0)
    from transformer_tf.config import ConfigError
    with pytest.raises(ConfigError, match="lanes"):
        DecodingConfig(lanes=0)


@functools.lru_cache(maxsize=None)
def _tiny_tokenizer():
    import itertools

    from transformer_tf.data.bpe import BpeOptions, make_tokenizer, train_bpe

    words = ["a", "dog", "runs", "in", "the", "park", "two", "men", "sit"]
    corpus = [" ".join(w) for w in itertools.islice(itertools.permutations(words, 4), 400)]
    return make_tokenizer(train_bpe(corpus, BpeOptions(vocab_size=300)))


# Plain chunks, and XLA-compiled chunks in two lanes (XLA alone and lanes alone are each
# checked against the plain search above). The translator's own `translate` is the
# function an export stores as serving_default; exported chunked, laned and XLA variants
# are served in tests/export/test_fuzz_variants.py.
@pytest.mark.parametrize("xla,lanes", [(False, 1), (True, 2)])
def test_a_translator_with_chunks_serves_the_same_text(xla, lanes):
    """Text in, text out: `translate` with chunk_size 3 (XLA-compiled in two lanes, or
    neither) answers a batch of mixed lengths (blank and over-long rows included) as the
    plain search does."""
    from transformer_tf.inference.translator import Translator

    tokenizer = _tiny_tokenizer()
    tf.keras.utils.set_random_seed(2)
    model = Transformer(ModelConfig(vocab_size=tokenizer.vocab_size, num_layers=1, d_model=16,
                                    d_ff=32, num_heads=2, max_position=24, dropout=0.0))
    model.build()
    text = tf.constant(["a dog", "", "two men sit in the park " * 5, "runs", "the park",
                        "  ", "a dog runs in the park", "men"])
    plain = Translator(model, tokenizer,
                       DecodingConfig(beam_size=2, max_extra_length=5, chunk_size=0))
    chunked = Translator(model, tokenizer,
                         DecodingConfig(beam_size=2, max_extra_length=5, chunk_size=3,
                                        xla=xla, lanes=lanes))
    expected = plain.translate(text)
    got = chunked.translate(text)
    assert got["translation"].numpy().tolist() == expected["translation"].numpy().tolist()
    np.testing.assert_allclose(got["score"], expected["score"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lanes", [1, 3])
def test_the_lanes_share_one_compiled_search(lanes):
    """XLA compiles per function and shape: lanes that each had a function of their own
    compiled every warm-up shape once per lane (1.9x the load time for 2 lanes)."""
    from transformer_tf.inference.translator import Translator

    model = _transformer()
    translator = Translator(model, _tiny_tokenizer(), DecodingConfig(beam_size=2, max_extra_length=4,
                                                        chunk_size=4, xla=True, lanes=lanes))
    graph = translator.translate_ids.get_concrete_function().graph
    compiled = [f.signature.name for f in graph.as_graph_def().library.function
                if f.attr["_XlaMustCompile"].b]
    assert len(compiled) == 1, compiled


def test_xla_compiled_chunks_find_the_same_hypotheses():
    """Chunks of 4 rows, sources padded to 8 or 16 positions (the buckets of LENGTHS, up
    to 12), each bucket's search compiled once by XLA. (Greedy search under XLA is checked
    against the graph in tests/models/test_fast_paths.py and
    tests/decoding/test_beam_and_greedy.py; the chunking around it does not depend on the
    beam.)"""
    beam_size, n_best = 3, 2
    model = _transformer()
    sources = _sources(seed=4)
    decoding = DecodingConfig(beam_size=beam_size, alpha=0.6, max_extra_length=6)
    search = tf.function(
        lambda ids: search_model_by_length(model, ids, decoding.replace(chunk_size=4),
                                           n_best=n_best, jit_compile=True),
        input_signature=[tf.TensorSpec([None, None], tf.int32)], autograph=False)
    result = search(tf.constant(sources))
    assert result.ids.shape[2] == max(LENGTHS) + 6
    _assert_same_as_alone(result, _row_by_row(model, 4, decoding, n_best))



def test_xla_buckets_never_pass_the_models_positions():
    model = _transformer(max_position=12)  # the 12-token rows would round up to 16
    sources = _sources(seed=4)
    decoding = DecodingConfig(beam_size=2, alpha=0.6, max_extra_length=6)
    result = tf.function(lambda ids: search_model_by_length(
        model, ids, decoding.replace(chunk_size=4), jit_compile=True),
        autograph=False)(tf.constant(sources))
    assert result.ids.shape[2] == 12  # outputs capped at the model's positions too
    _assert_same_as_alone(result, _row_by_row(model, 4, decoding, 1))
