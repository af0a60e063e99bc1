"""The bracket grammar of constrained decoding (`decoding.constraints.BracketGrammar`):

* the complete outputs it allows are exactly the well-formed linearised trees, found by
  brute force over every token sequence and judged by the tree reader
  (`linearise.delinearise`: no repair needed, one slot per word);
* greedy search under it equals a step-by-step reference that reruns the model on the
  whole prefix (no cache) and takes the best token the Python rules allow;
* beam search and the chunked (and XLA) searches return only well-formed trees;
* the vocabulary builder counts the words of real treebank sentences as they are written.

The same for `CopyBracketGrammar` ("words" leaves): its complete outputs are exactly the
well-formed trees whose leaves are the source pieces in order, no bracket inside a word
(brute force), and every beam hypothesis of a random model is one.
"""
from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID, DecodingConfig, ModelConfig
from transformer_tf.data.linearise import delinearise
from transformer_tf.decoding.constraints import BracketGrammar, CopyBracketGrammar
from transformer_tf.decoding.model_driver import search_model, search_model_by_length
from transformer_tf.models.transformer import Transformer

VOCAB = 40
SLOT = 4
LABELS = ["A", "B", "C"]
OPEN_IDS = [5, 6, 7]
CLOSE_IDS = [8, 9, 10]
WORD_START = [0] * 11 + [1] * 15 + [0] * 14  # ids 11..25 begin a word, 26..39 continue one
TOKEN_TEXT = {SLOT: "XX", **{i: "(" + l for i, l in zip(OPEN_IDS, LABELS)},
              **{i: ")" + l for i, l in zip(CLOSE_IDS, LABELS)}}


def _grammar(max_depth=64, labels=3):
    return BracketGrammar(VOCAB, SLOT, OPEN_IDS[:labels], CLOSE_IDS[:labels], WORD_START,
                          EOS_ID, max_depth=max_depth)


def _well_formed(tokens, num_words) -> bool:
    """The independent judge: the tree reader needs no repair for these tokens."""
    words = " ".join(f"w{i}" for i in range(num_words))
    _, counts = delinearise([TOKEN_TEXT[t] for t in tokens], words.split(), leaves="slot")
    return counts.total == 0


def _python_allowed(prefix, num_words, max_length, labels=3):
    """Tokens the rules allow after `prefix`, by replaying it on a plain stack."""
    alphabet = [SLOT] + OPEN_IDS[:labels] + CLOSE_IDS[:labels]
    return {t for t in alphabet + [EOS_ID]
            if (t == EOS_ID and _well_formed(prefix, num_words))
            or (t != EOS_ID and _completable(prefix + [t], num_words,
                                             max_length - len(prefix) - 2, labels))}


@functools.lru_cache(maxsize=None)
def _completable_cached(prefix, num_words, room, labels):
    if _well_formed(list(prefix), num_words):
        return True
    if room <= 0:
        return False
    alphabet = [SLOT] + OPEN_IDS[:labels] + CLOSE_IDS[:labels]
    return any(_valid_prefix(list(prefix) + [t], num_words)
               and _completable_cached(prefix + (t,), num_words, room - 1, labels)
               for t in alphabet)


def _valid_prefix(tokens, num_words) -> bool:
    stack, words = [], 0
    for t in tokens:
        if t == SLOT:
            words += 1
            if words > num_words:
                return False
            if stack:
                stack[-1][1] = True
        elif t in OPEN_IDS:
            stack.append([OPEN_IDS.index(t), False])
        elif not stack or stack[-1][0] != CLOSE_IDS.index(t) or not stack[-1][1]:
            return False
        else:
            stack.pop()
            if stack:
                stack[-1][1] = True
    return True


def _completable(tokens, num_words, room, labels):
    """Can `tokens` (a valid prefix) become a well-formed tree with at most `room` more
    tokens (EOS not counted)?"""
    return _valid_prefix(tokens, num_words) and _completable_cached(
        tuple(tokens), num_words, room, labels)


def _sources_with_words(counts, rng) -> np.ndarray:
    """Source rows with `counts[i]` words each, 1-3 pieces per word, EOS, PAD-padded."""
    rows = []
    for count in counts:
        row = []
        for _ in range(count):
            row.append(int(rng.integers(11, 26)))
            row += [int(x) for x in rng.integers(26, 40, rng.integers(0, 3))]
        rows.append(row + [EOS_ID])
    width = max(len(r) for r in rows)
    return np.array([r + [PAD_ID] * (width - len(r)) for r in rows], np.int32)


def _all_allowed_outputs(grammar, num_words, max_length, source=None):
    """Every complete output the grammar allows (breadth-first over allowed prefixes;
    each level of prefixes is one batch through the grammar); `source` [1, S] defaults
    to `num_words` one-piece words."""
    if source is None:
        source = np.array([[11] * num_words + [EOS_ID]], np.int32)
    prefixes = [[]]
    complete = set()
    for step in range(max_length):
        if not prefixes:
            break
        batch = len(prefixes)
        state = grammar.initial_state(tf.constant(np.repeat(source, batch, 0)), max_length)
        for position in range(step):  # replay every prefix (the search's own order)
            state = grammar.advance(state, tf.constant([p[position] for p in prefixes]))
        mask = grammar.mask(state, step).numpy()
        following = []
        for prefix, row in zip(prefixes, mask):
            for token in np.flatnonzero(np.isfinite(row)):
                if token == EOS_ID:
                    complete.add(tuple(prefix))
                else:
                    following.append(prefix + [int(token)])
        prefixes = following
    return complete


@pytest.mark.parametrize("num_words,max_length", [(1, 6), (2, 7), (3, 6)])
def test_allowed_outputs_are_exactly_the_well_formed_trees(num_words, max_length):
    grammar = _grammar(labels=2)
    alphabet = [SLOT] + OPEN_IDS[:2] + CLOSE_IDS[:2]
    expected = {seq for n in range(max_length)  # tokens before EOS: at most max_length - 1
                for seq in itertools.product(alphabet, repeat=n)
                if _well_formed(list(seq), num_words)}
    assert expected  # the limits leave room for some trees
    assert _all_allowed_outputs(grammar, num_words, max_length) == expected


def _copy_grammar(max_depth=64, labels=3):
    return CopyBracketGrammar(VOCAB, OPEN_IDS[:labels], CLOSE_IDS[:labels], WORD_START,
                              EOS_ID, PAD_ID, max_depth=max_depth)


def _well_formed_copy(tokens, source_pieces) -> bool:
    """The independent judge for "words" leaves: the pieces between the brackets are the
    source's, in order; no bracket splits a word (a continuation piece follows a piece);
    the tree reader, given the words those pieces spell, needs no repair."""
    if [t for t in tokens if t not in TOKEN_TEXT] != list(source_pieces):
        return False
    text, previous = [], None
    for t in tokens:
        if t in TOKEN_TEXT:
            text.append(TOKEN_TEXT[t])
        elif WORD_START[t]:
            text.append(f"w{t}")
        elif previous is None or previous in TOKEN_TEXT:
            return False
        else:
            text[-1] += f"+{t}"
        previous = t
    words = [w for w in text if not w.startswith(("(", ")"))]
    _, counts = delinearise(text, words, leaves="words")
    return counts.total == 0


@pytest.mark.parametrize("pieces,max_length", [((11,), 6), ((11, 26), 6), ((12, 11), 6),
                                               ((11, 26, 13), 7)])
def test_copy_grammar_allows_exactly_the_trees_over_the_source_pieces(pieces, max_length):
    grammar = _copy_grammar(labels=2)
    alphabet = sorted(set(pieces)) + OPEN_IDS[:2] + CLOSE_IDS[:2]
    expected = {seq for n in range(max_length)
                for seq in itertools.product(alphabet, repeat=n)
                if _well_formed_copy(seq, pieces)}
    assert expected
    source = np.array([list(pieces) + [EOS_ID, PAD_ID]], np.int32)
    assert _all_allowed_outputs(grammar, None, max_length, source) == expected


def test_copy_grammar_counts_words_and_keeps_brackets_out_of_words():
    grammar = _copy_grammar()
    state = grammar.initial_state(tf.constant([[11, 26, 27, 12, EOS_ID, PAD_ID]]), 20)
    assert state["words_left"].numpy().tolist() == [2]
    state = grammar.advance(state, tf.constant([BOS_ID]))  # BOS changes nothing
    state = grammar.advance(state, tf.constant([OPEN_IDS[0]]))
    state = grammar.advance(state, tf.constant([11]))
    # Inside the word "11 26 27" only its next piece may follow.
    assert set(np.flatnonzero(np.isfinite(grammar.mask(state, 2).numpy()[0]))) == {26}
    state = grammar.advance(state, tf.constant([26]))
    state = grammar.advance(state, tf.constant([27]))
    assert state["words_left"].numpy().tolist() == [1]
    allowed = set(np.flatnonzero(np.isfinite(grammar.mask(state, 4).numpy()[0])))
    assert allowed == {12, *OPEN_IDS, CLOSE_IDS[0]}


def test_copy_grammar_scores_the_copied_piece_as_any_word():
    """Worked case: all 40 logits 0 but one bracket's at 3. Every token but the 6 brackets,
    EOS and PAD can be a word, so "a word here" has log(32) = 3.466 > 3 and greedy copies;
    scored as itself (logit 0) the piece would lose to the bracket. Inside a word, the
    continuation is the only token left."""
    grammar = _copy_grammar()
    state = grammar.initial_state(tf.constant([[11, 26, EOS_ID]]), 20)
    logits = np.zeros([1, VOCAB], np.float32)
    logits[0, OPEN_IDS[0]] = 3.0
    scores = grammar.apply(state, 0, tf.constant(logits)).numpy()[0]
    assert scores[11] == pytest.approx(np.log(32.0))
    assert scores[OPEN_IDS[0]] == 3.0 and int(np.argmax(scores)) == 11
    assert int(np.argmax(logits[0] + grammar.mask(state, 0).numpy()[0])) == OPEN_IDS[0]
    assert np.isneginf(scores[[12, 26, EOS_ID, *CLOSE_IDS]]).all()
    state = grammar.advance(state, tf.constant([11]))
    scores = grammar.apply(state, 1, tf.constant(logits)).numpy()[0]
    assert np.flatnonzero(np.isfinite(scores)).tolist() == [26]


def test_words_are_counted_by_their_first_piece():
    grammar = _grammar()
    sources = _sources_with_words([0, 1, 4, 7], np.random.default_rng(0))
    np.testing.assert_array_equal(grammar.count_words(tf.constant(sources)), [0, 1, 4, 7])


def test_depth_limit_and_length_limit():
    grammar = _grammar(max_depth=3)
    state = grammar.initial_state(tf.constant([[11, 12, EOS_ID]] * 2), [10, 3])
    allowed = np.isfinite(grammar.mask(state, 0).numpy())
    # Row 1 may hold 2 slots + EOS and no bracket; row 0 may open any.
    assert set(np.flatnonzero(allowed[0])) == {SLOT, *OPEN_IDS}
    assert set(np.flatnonzero(allowed[1])) == {SLOT}
    state = grammar.advance(state, tf.constant([OPEN_IDS[0]] * 2))
    state = grammar.advance(state, tf.constant([OPEN_IDS[1]] * 2))
    allowed = np.isfinite(grammar.mask(state, 2).numpy())
    # Depth 2 of at most 2: no further opening; the slot is allowed, closing is not (the
    # innermost constituent has no word yet).
    assert set(np.flatnonzero(allowed[0])) == {SLOT}
    state = grammar.advance(state, tf.constant([SLOT] * 2))
    allowed = np.isfinite(grammar.mask(state, 3).numpy())
    assert set(np.flatnonzero(allowed[0])) == {SLOT, CLOSE_IDS[1]}


@functools.lru_cache(maxsize=None)
def _model():
    tf.keras.utils.set_random_seed(7)
    model = Transformer(ModelConfig(vocab_size=VOCAB, num_layers=2, d_model=24, d_ff=48,
                                    num_heads=4, max_position=64, dropout=0.0))
    model.build()
    return model


def _reference_greedy(model, source_row, num_words, max_length):
    """Greedy under the Python rules, rerunning the model on the whole prefix each step."""
    source = tf.constant(source_row[None])
    encoded, valid = model.encode(source)
    prefix: list[int] = []
    while len(prefix) < max_length:
        target = tf.constant([[BOS_ID] + prefix], tf.int32)
        logits = model.decode(target, encoded, valid)[0, -1].numpy()
        allowed = _python_allowed(prefix, num_words, max_length)
        token = max(allowed, key=lambda t: logits[t])
        prefix.append(int(token))
        if token == EOS_ID:
            break
    return prefix


def test_greedy_search_equals_the_prefix_by_prefix_reference():
    model = _model()
    sources = _sources_with_words([2, 3, 1], np.random.default_rng(1))
    decoding = DecodingConfig(beam_size=1, max_extra_length=2)
    result = search_model(model, tf.constant(sources), decoding, constraint=_grammar())
    for row, count in enumerate([2, 3, 1]):
        max_length = int((sources[row] != PAD_ID).sum()) + 2
        expected = _reference_greedy(model, sources[row], count, max_length)
        got = result.ids[row, 0, :result.lengths[row, 0]].numpy().tolist()
        assert got == expected
        assert got[-1] == EOS_ID and _well_formed(got[:-1], count)


# The chunked search runs the plain one on each chunk: (False, False) adds nothing.
@pytest.mark.parametrize("chunked,xla", [(True, False), (True, True)])
def test_every_beam_hypothesis_is_a_well_formed_tree(chunked, xla):
    model = _model()
    counts = [3, 1, 5, 2, 0, 4]
    sources = tf.constant(_sources_with_words(counts, np.random.default_rng(2)))
    decoding = DecodingConfig(beam_size=3, alpha=0.3, max_extra_length=6)
    grammar = _grammar()
    if chunked:
        result = search_model_by_length(model, sources, decoding.replace(chunk_size=4),
                                        n_best=3, jit_compile=xla, constraint=grammar)
    else:
        result = search_model(model, sources, decoding, n_best=3, constraint=grammar)
    unconstrained = search_model(model, sources, decoding, n_best=3)
    for row, count in enumerate(counts):
        lengths = result.lengths[row].numpy()
        # A sentence without words has one output (EOS); the others have 3 trees.
        assert (lengths > 0).sum() == (1 if count == 0 else 3), row
        for k in np.flatnonzero(lengths):
            ids = result.ids[row, k, :lengths[k]].numpy().tolist()
            assert ids[-1] == EOS_ID and _well_formed(ids[:-1], count), (row, k, ids)
    # Without the grammar the random model's outputs are not trees: the test can fail.
    free = [result_ids[:n].tolist() for result_ids, n in
            zip(unconstrained.ids[:, 0].numpy(), unconstrained.lengths[:, 0].numpy())]
    assert not all(set(ids) <= set(TOKEN_TEXT) | {EOS_ID} and ids[-1] == EOS_ID
                   and _well_formed(ids[:-1], c) for ids, c in zip(free, counts))


@pytest.mark.parametrize("path", ["compacting", "xla_chunks"])
def test_every_copy_grammar_hypothesis_is_the_source_in_brackets(path):
    """The compacting graph search that sentences leave when done (the grammar's state,
    source ids included, travels with them), and XLA-compiled chunks (a fixed batch)."""
    model = _model()
    counts = [3, 1, 5, 2, 0, 4]
    sources = _sources_with_words(counts, np.random.default_rng(4))
    decoding = DecodingConfig(beam_size=3, alpha=0.3, max_extra_length=6)
    grammar = _copy_grammar()

    def search(ids):
        if path == "xla_chunks":
            return search_model_by_length(model, ids, decoding.replace(chunk_size=4),
                                          n_best=3, jit_compile=True, constraint=grammar)
        return search_model(model, ids, decoding, n_best=3, constraint=grammar)

    if path == "compacting":
        search = tf.function(search, input_signature=[tf.TensorSpec([None, None], tf.int32)],
                             autograph=False)
    result = search(tf.constant(sources))
    for row, count in enumerate(counts):
        pieces = [int(t) for t in sources[row] if t not in (EOS_ID, PAD_ID)]
        lengths = result.lengths[row].numpy()
        assert (lengths > 0).sum() == (1 if count == 0 else 3), row
        for k in np.flatnonzero(lengths):
            ids = result.ids[row, k, :lengths[k]].numpy().tolist()
            assert ids[-1] == EOS_ID and _well_formed_copy(ids[:-1], pieces), (row, k, ids)
