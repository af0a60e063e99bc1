"""Constraints on what a search may emit, applied to every step's scores (`apply`: a mask,
and for `CopyBracketGrammar` the score of the copied word).

Two grammars of linearised trees (constituency parsing, `data.linearise`), one per leaf
convention. Both keep every output a well-formed bracketed sequence: labelled opening
brackets and the closing bracket that matches the innermost open one, in any nesting, no
empty constituent, every source word in place.

`BracketGrammar` ("slot" leaves): exactly one word slot per source word. A hypothesis may

  * emit a word slot while source words are left;
  * open a bracket while source words are left (a constituent must hold a word), its
    depth stays below `max_depth`, and the tokens still allowed leave room to finish
    (every remaining slot, every closing bracket and EOS);
  * close the innermost open bracket, with its own label, once a slot was emitted
    inside it (no empty constituents);
  * end (EOS) when every word has its slot and every bracket is closed.

Every other token (ordinary subword pieces, PAD, BOS, unpaired brackets) is never emitted.
Some token is always allowed (a slot while words are left; then the innermost bracket's
closing, which holds a word; then EOS). A row whose length limit is below its word count
+ 1 (e.g. capped by the model's maximum) emits slots until the limit cuts it off; the tree
reader repairs that output.

`CopyBracketGrammar` ("words" leaves): the tokens between the brackets are the source's
own pieces, copied in order, so the output is the source with brackets around. A
hypothesis may copy the next source piece while there is one; open or close a bracket
(under the same conditions as above) only between words, never inside one (before a
piece that continues a word); end once every piece is copied and every bracket closed.
Both vocabularies are one (the shared subword model), so a piece's id is the same on both
sides. What the model decides is where words and brackets go, not which word comes: the
grammar gives the copied piece that starts a word the probability of any word starting
there (the log-sum-exp of the scores of every token that is not a bracket or EOS), and a
piece that continues a word is the only token allowed. Without that, a model that cannot
yet predict the next word's exact piece prefers any bracket over it and nests brackets
until the depth limit.

The state is a dict of tensors with leading dimension = rows, so a search can carry it in
its per-beam cache and reorder it with the beams:

  words_left  int32 [B]     source words without a slot yet
  depth       int32 [B]     open brackets
  max_length  int32 [B]     the row's output length limit, EOS included
  open_label  int32 [B, D]  label index of the bracket open at each depth (1..D-1)
  open_words  int32 [B, D]  words_left when that bracket was opened
  (CopyBracketGrammar also)
  source      int32 [B, S]  the source ids
  position    int32 [B]     index in `source` of the next piece to copy
  pieces      int32 [B]     the row's source pieces (EOS and padding not counted)

How the words are counted: `word_start[id]` is 1 for a source piece that begins a word
(sentencepiece's "▁" pieces, word-piece pieces without "##"); the number of words of a
source row is the number of such ids in it.
"""
from __future__ import annotations

from typing import Sequence

import tensorflow as tf

_NEG_INF = float("-inf")


class _BracketRules:
    """What both grammars share: bracket labels, the word count of a source row, the
    bracket part of the state and of the mask."""

    def __init__(self, vocab_size: int, open_ids: Sequence[int], close_ids: Sequence[int],
                 word_start: Sequence[int], eos_id: int, max_depth: int,
                 other_ids: Sequence[int] = ()):
        if len(open_ids) != len(close_ids) or not open_ids:
            raise ValueError(f"need as many opening as closing brackets (at least one), got "
                             f"{len(open_ids)} and {len(close_ids)}")
        ids = [*other_ids, eos_id, *open_ids, *close_ids]
        if len(set(ids)) != len(ids) or not all(0 <= i < vocab_size for i in ids):
            raise ValueError("the slot (if any), EOS and bracket ids must be distinct ids of "
                             "the vocabulary")
        self.vocab_size = int(vocab_size)
        self.eos_id = int(eos_id)
        self.max_depth = int(max_depth)
        # Label index per token: 1..num_labels for openings, -1..-num_labels for closings.
        label_of = [0] * self.vocab_size
        for index, (opening, closing) in enumerate(zip(open_ids, close_ids), start=1):
            label_of[opening], label_of[closing] = index, -index
        self._label_of = tf.constant(label_of, tf.int32)  # [V]
        self._token_ids = tf.range(self.vocab_size)[None, :]  # [1, V]
        self._word_start = tf.constant([1 if w else 0 for w in word_start], tf.int32)

    def _is_word_start(self, ids) -> tf.Tensor:
        """int32, the shape of `ids`: 1 for ids that begin a word (0 outside the table)."""
        ids = tf.cast(ids, tf.int32)
        inside = (ids >= 0) & (ids < tf.shape(self._word_start)[0])
        return tf.where(inside, tf.gather(self._word_start, tf.where(inside, ids, 0)), 0)

    def count_words(self, source_ids) -> tf.Tensor:
        """int32 [B]: words per row of source ids [B, S] (ids outside the table count 0)."""
        return tf.reduce_sum(self._is_word_start(source_ids), axis=1)

    def _initial_brackets(self, words, max_lengths) -> dict:
        batch = tf.shape(words)[0]
        zeros = tf.zeros([batch, self.max_depth], tf.int32)
        return {"words_left": words, "depth": tf.zeros([batch], tf.int32),
                "max_length": tf.broadcast_to(tf.cast(max_lengths, tf.int32), [batch]),
                "open_label": zeros, "open_words": zeros}

    def _advance_brackets(self, state: dict, tokens, words_used) -> dict:
        """The bracket fields after `tokens` [B]; `words_used` int32 [B]: words the tokens
        began (1 or 0)."""
        label = tf.gather(self._label_of, tf.cast(tokens, tf.int32))  # [B]
        depth = state["depth"]
        is_open, is_close = label > 0, (label < 0) & (depth > 0)
        new_depth = depth + tf.cast(is_open, tf.int32) - tf.cast(is_close, tf.int32)
        at_new = tf.equal(tf.range(self.max_depth)[None, :], new_depth[:, None])  # [B, D]
        write = at_new & is_open[:, None]
        return {
            "words_left": state["words_left"] - words_used,
            "depth": new_depth,
            "max_length": state["max_length"],
            "open_label": tf.where(write, label[:, None], state["open_label"]),
            "open_words": tf.where(write, state["words_left"][:, None], state["open_words"]),
        }

    def _bracket_allowed(self, state: dict, step, tokens_left, between_words) -> tf.Tensor:
        """bool [B, V]: the brackets and EOS allowed now. `tokens_left` int32 [B]: leaf
        tokens still to write; `between_words` bool [B]: no word is half written."""
        words_left, depth = state["words_left"], state["depth"]
        top = tf.equal(tf.range(self.max_depth)[None, :], depth[:, None])  # [B, D]
        top_label = tf.reduce_sum(tf.where(top, state["open_label"], 0), axis=1)  # [B]
        top_words = tf.reduce_sum(tf.where(top, state["open_words"], 0), axis=1)
        # Tokens left after the one chosen now, and what finishing then needs at least.
        room_after = state["max_length"] - tf.cast(step, tf.int32) - 1
        can_open = (between_words & (words_left > 0) & (depth < self.max_depth - 1)
                    & (room_after >= tokens_left + depth + 2))
        can_close = between_words & (depth > 0) & (words_left < top_words)
        can_end = tf.equal(tokens_left, 0) & tf.equal(depth, 0)
        label = self._label_of[None, :]  # [1, V]
        return (((label > 0) & can_open[:, None])
                | ((label < 0) & can_close[:, None] & tf.equal(-label, top_label[:, None]))
                | (tf.equal(self._token_ids, self.eos_id) & can_end[:, None]))


class BracketGrammar(_BracketRules):
    """Well-formed bracketed outputs, one slot per source word ("slot" leaves; see the
    module doc).

    Args:
      vocab_size: V, size of the target vocabulary (the scores' last dimension).
      slot_id: the word-slot token (e.g. "XX").
      open_ids, close_ids: paired bracket tokens: close_ids[i] closes open_ids[i].
      word_start: 0/1 per source id, [source vocabulary]: ids that begin a word.
      eos_id: the end token.
      max_depth: brackets open at once, at most max_depth - 1.
    """

    def __init__(self, vocab_size: int, slot_id: int, open_ids: Sequence[int],
                 close_ids: Sequence[int], word_start: Sequence[int], eos_id: int,
                 max_depth: int = 64):
        super().__init__(vocab_size, open_ids, close_ids, word_start, eos_id, max_depth,
                         other_ids=[slot_id])
        self.slot_id = int(slot_id)

    def initial_state(self, source_ids, max_lengths) -> dict:
        """The state before the first token, rows [B] of source ids [B, S]; `max_lengths`
        int32 [B] or scalar, tokens allowed per row (EOS included)."""
        return self._initial_brackets(self.count_words(source_ids), max_lengths)

    def advance(self, state: dict, tokens) -> dict:
        """The state after each row emitted `tokens` int32 [B] (tokens that are not slots
        or brackets, e.g. BOS before the first step, change nothing)."""
        return self._advance_brackets(
            state, tokens, tf.cast(tf.equal(tokens, self.slot_id), tf.int32))

    def mask(self, state: dict, step) -> tf.Tensor:
        """float32 [B, V]: 0 where the next token (at 0-based position `step`) is allowed,
        -inf elsewhere."""
        words_left = state["words_left"]
        always = tf.fill(tf.shape(words_left), True)
        allowed = (self._bracket_allowed(state, step, words_left, always)
                   | (tf.equal(self._token_ids, self.slot_id) & (words_left > 0)[:, None]))
        return tf.where(allowed, 0.0, _NEG_INF)

    def apply(self, state: dict, step, scores) -> tf.Tensor:
        """The step's scores float32 [B, V] (logits or log-probabilities) with every
        token the grammar does not allow at -inf."""
        return tf.cast(scores, tf.float32) + self.mask(state, step)


class CopyBracketGrammar(_BracketRules):
    """Well-formed bracketed outputs whose leaves are the source pieces, copied in order
    ("words" leaves; see the module doc). Source and target share one vocabulary.

    Args:
      vocab_size: V, size of the target vocabulary (the scores' last dimension).
      open_ids, close_ids: paired bracket tokens: close_ids[i] closes open_ids[i].
      word_start: 0/1 per id, [vocabulary]: ids that begin a word.
      eos_id, pad_id: the end and padding tokens (source ids after the words).
      max_depth: brackets open at once, at most max_depth - 1.
    """

    def __init__(self, vocab_size: int, open_ids: Sequence[int], close_ids: Sequence[int],
                 word_start: Sequence[int], eos_id: int, pad_id: int, max_depth: int = 64):
        super().__init__(vocab_size, open_ids, close_ids, word_start, eos_id, max_depth)
        self.pad_id = int(pad_id)
        # Tokens that can be (part of) a word: neither a bracket nor EOS / PAD. Training
        # with `TrainingConfig.word_loss` "any" pools exactly these in its loss.
        self.word_tokens = (tf.equal(self._label_of, 0)
                            & ~tf.equal(tf.range(self.vocab_size), self.eos_id)
                            & ~tf.equal(tf.range(self.vocab_size), self.pad_id))  # bool [V]

    def _next_piece(self, state: dict) -> tuple[tf.Tensor, tf.Tensor]:
        """(int32 [B] the source piece to copy next, bool [B] whether there is one)."""
        source, position = state["source"], state["position"]
        inside = position < tf.shape(source)[1]
        piece = tf.gather(source, tf.minimum(position, tf.shape(source)[1] - 1)[:, None],
                          batch_dims=1)[:, 0]
        piece = tf.where(inside, piece, self.pad_id)
        return piece, ~(tf.equal(piece, self.eos_id) | tf.equal(piece, self.pad_id))

    def initial_state(self, source_ids, max_lengths) -> dict:
        """The state before the first token, rows [B] of source ids [B, S] (each row:
        pieces, then EOS and/or padding); `max_lengths` int32 [B] or scalar, tokens
        allowed per row (EOS included)."""
        source = tf.cast(source_ids, tf.int32)
        state = self._initial_brackets(self.count_words(source), max_lengths)
        is_piece = ~(tf.equal(source, self.eos_id) | tf.equal(source, self.pad_id))
        state.update(source=source, position=tf.zeros_like(state["depth"]),
                     pieces=tf.reduce_sum(tf.cast(is_piece, tf.int32), axis=1))
        return state

    def advance(self, state: dict, tokens) -> dict:
        """The state after each row emitted `tokens` int32 [B] (a token that is not the
        next piece or a bracket, e.g. BOS before the first step, changes nothing)."""
        tokens = tf.cast(tokens, tf.int32)
        piece, has_piece = self._next_piece(state)
        copied = has_piece & tf.equal(tokens, piece)
        new = self._advance_brackets(
            state, tokens, tf.where(copied, self._is_word_start(tokens), 0))
        new.update(source=state["source"], pieces=state["pieces"],
                   position=state["position"] + tf.cast(copied, tf.int32))
        return new

    def mask(self, state: dict, step) -> tf.Tensor:
        """float32 [B, V]: 0 where the next token (at 0-based position `step`) is allowed,
        -inf elsewhere."""
        return self._mask(state, step, *self._next_piece(state))

    def _mask(self, state: dict, step, piece, has_piece) -> tf.Tensor:
        inside_word = has_piece & tf.equal(self._is_word_start(piece), 0)
        allowed = (self._bracket_allowed(state, step, state["pieces"] - state["position"],
                                         ~inside_word)
                   | (tf.equal(self._token_ids, piece[:, None]) & has_piece[:, None]))
        return tf.where(allowed, 0.0, _NEG_INF)

    def apply(self, state: dict, step, scores) -> tf.Tensor:
        """The step's scores float32 [B, V] (logits or log-probabilities): the next
        source piece scored as any word (the log-sum-exp over the word tokens), every
        token the grammar does not allow at -inf."""
        scores = tf.cast(scores, tf.float32)
        piece, has_piece = self._next_piece(state)  # once per step, for both uses
        any_word = tf.reduce_logsumexp(
            tf.where(self.word_tokens[None, :], scores, _NEG_INF), axis=1, keepdims=True)  # [B, 1]
        # Only a real piece: once every piece is copied, `piece` is the source's EOS, which
        # must keep its own score.
        copied = tf.equal(self._token_ids, piece[:, None]) & has_piece[:, None]
        scores = tf.where(copied, any_word, scores)
        return scores + self._mask(state, step, piece, has_piece)
