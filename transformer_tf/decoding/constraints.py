"""Constraints on what a search may emit, applied as a mask on every step's scores.

`BracketGrammar` keeps every output a well-formed bracketed sequence with exactly one word
slot per source word (the linearised trees of constituency parsing): slots, labelled
opening brackets and the closing bracket that matches the innermost open one, in any
nesting. A hypothesis may

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

The state is a dict of tensors with leading dimension = rows, so a search can carry it in
its per-beam cache and reorder it with the beams:

  words_left  int32 [B]     source words without a slot yet
  depth       int32 [B]     open brackets
  max_length  int32 [B]     the row's output length limit, EOS included
  open_label  int32 [B, D]  label index of the bracket open at each depth (1..D-1)
  open_words  int32 [B, D]  words_left when that bracket was opened

How the words are counted: `word_start[id]` is 1 for a source piece that begins a word
(sentencepiece's "▁" pieces, word-piece pieces without "##"); the number of words of a
source row is the number of such ids in it.
"""
from __future__ import annotations

from typing import Sequence

import tensorflow as tf

_NEG_INF = float("-inf")


class BracketGrammar:
    """Well-formed bracketed outputs, one slot per source word (see the module doc).

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
        if len(open_ids) != len(close_ids) or not open_ids:
            raise ValueError(f"need as many opening as closing brackets (at least one), got "
                             f"{len(open_ids)} and {len(close_ids)}")
        ids = [slot_id, eos_id, *open_ids, *close_ids]
        if len(set(ids)) != len(ids) or not all(0 <= i < vocab_size for i in ids):
            raise ValueError("slot, EOS and bracket ids must be distinct ids of the vocabulary")
        self.vocab_size = int(vocab_size)
        self.slot_id, self.eos_id = int(slot_id), int(eos_id)
        self.max_depth = int(max_depth)
        # Label index per token: 1..num_labels for openings, -1..-num_labels for closings.
        label_of = [0] * self.vocab_size
        for index, (opening, closing) in enumerate(zip(open_ids, close_ids), start=1):
            label_of[opening], label_of[closing] = index, -index
        self._label_of = tf.constant(label_of, tf.int32)  # [V]
        self._token_ids = tf.range(self.vocab_size)[None, :]  # [1, V]
        self._word_start = tf.constant([1 if w else 0 for w in word_start], tf.int32)

    def count_words(self, source_ids) -> tf.Tensor:
        """int32 [B]: words per row of source ids [B, S] (ids outside the table count 0)."""
        source_ids = tf.cast(source_ids, tf.int32)
        size = tf.shape(self._word_start)[0]
        inside = (source_ids >= 0) & (source_ids < size)
        starts = tf.gather(self._word_start, tf.where(inside, source_ids, 0))
        return tf.reduce_sum(tf.where(inside, starts, 0), axis=1)

    def initial_state(self, source_ids, max_lengths) -> dict:
        """The state before the first token, rows [B] of source ids [B, S]; `max_lengths`
        int32 [B] or scalar, tokens allowed per row (EOS included)."""
        words = self.count_words(source_ids)
        batch = tf.shape(words)[0]
        zeros = tf.zeros([batch, self.max_depth], tf.int32)
        return {"words_left": words, "depth": tf.zeros([batch], tf.int32),
                "max_length": tf.broadcast_to(tf.cast(max_lengths, tf.int32), [batch]),
                "open_label": zeros, "open_words": zeros}

    def advance(self, state: dict, tokens) -> dict:
        """The state after each row emitted `tokens` int32 [B] (tokens that are not slots
        or brackets, e.g. BOS before the first step, change nothing)."""
        label = tf.gather(self._label_of, tf.cast(tokens, tf.int32))  # [B]
        depth = state["depth"]
        is_slot = tf.equal(tokens, self.slot_id)
        is_open, is_close = label > 0, (label < 0) & (depth > 0)
        new_depth = depth + tf.cast(is_open, tf.int32) - tf.cast(is_close, tf.int32)
        at_new = tf.equal(tf.range(self.max_depth)[None, :], new_depth[:, None])  # [B, D]
        write = at_new & is_open[:, None]
        return {
            "words_left": state["words_left"] - tf.cast(is_slot, tf.int32),
            "depth": new_depth,
            "max_length": state["max_length"],
            "open_label": tf.where(write, label[:, None], state["open_label"]),
            "open_words": tf.where(write, state["words_left"][:, None], state["open_words"]),
        }

    def mask(self, state: dict, step) -> tf.Tensor:
        """float32 [B, V]: 0 where the next token (at 0-based position `step`) is allowed,
        -inf elsewhere."""
        words_left, depth = state["words_left"], state["depth"]
        top = tf.equal(tf.range(self.max_depth)[None, :], depth[:, None])  # [B, D]
        top_label = tf.reduce_sum(tf.where(top, state["open_label"], 0), axis=1)  # [B]
        top_words = tf.reduce_sum(tf.where(top, state["open_words"], 0), axis=1)
        # Tokens left after the one chosen now, and what finishing then needs at least.
        room_after = state["max_length"] - tf.cast(step, tf.int32) - 1
        can_slot = words_left > 0
        can_open = ((words_left > 0) & (depth < self.max_depth - 1)
                    & (room_after >= words_left + depth + 2))
        can_close = (depth > 0) & (words_left < top_words)
        can_end = tf.equal(words_left, 0) & tf.equal(depth, 0)

        label = self._label_of[None, :]  # [1, V]
        allowed = ((tf.equal(self._token_ids, self.slot_id) & can_slot[:, None])
                   | ((label > 0) & can_open[:, None])
                   | ((label < 0) & can_close[:, None] & tf.equal(-label, top_label[:, None]))
                   | (tf.equal(self._token_ids, self.eos_id) & can_end[:, None]))
        return tf.where(allowed, 0.0, _NEG_INF)

