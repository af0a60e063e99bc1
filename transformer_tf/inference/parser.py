"""Sentences in, bracketed trees out: a `Translator` over a parsing model (words ->
linearised tree) and the repair / de-linearisation of `transformer_tf.data.linearise`,
written with TensorFlow ops so that the exported SavedModel does it all in the graph.

`Parser.parse(text)`: text tf.string [N] (whitespace-separated words) ->
  {"tree": tf.string [N] (TOP-rooted bracketed tree with the input words in place, "" for
   an empty sentence), "linearised": the raw model output, "score": float32 [N],
   "repairs": int32 [N, len(REPAIR_KINDS)] (per sentence, in REPAIR_KINDS order)}.

The in-graph reading follows the same rules as `linearise.delinearise` (tests check that
both give the same trees and counts on random ill-formed sequences), for the leaf
convention of the model's vocabulary (`data.treebank_to_prepared.leaves_of_vocabulary`).
"""
from __future__ import annotations

import tensorflow as tf

from transformer_tf.data.linearise import (
    CLOSE,
    DEFAULT_LEAVES,
    LEAVES,
    OPEN,
    PLACEHOLDER_TAG,
    PUNCTUATION_TAGS,
    REPAIR_KINDS,
    WORD_ESCAPES,
    WORD_SLOT,
    RepairCounts,
    check_leaves,
    sentence_words,
    tree_from_output,
)
from transformer_tf.data.treebank_reader import ROOT_LABEL
from transformer_tf.data.treebank_to_prepared import leaves_of_vocabulary
from transformer_tf.inference.batch import (
    batch_rows,
    exported_max_source_tokens,
    translate_lines,
    warn_long_sources,
)
from transformer_tf.inference.loading import load_saved_model, read_bpe_model, read_export_info
from transformer_tf.inference.translator import Translator

_KIND = {kind: index for index, kind in enumerate(REPAIR_KINDS)}


def _escape_words(words: tf.Tensor) -> tf.Tensor:
    for raw, escaped in WORD_ESCAPES.items():
        words = tf.where(tf.equal(words, raw), escaped, words)
    return words


def _output_tags(words: tf.Tensor) -> tf.Tensor:
    tags = tf.fill(tf.shape(words), PLACEHOLDER_TAG)
    for word, tag in PUNCTUATION_TAGS.items():
        tags = tf.where(tf.equal(words, word), tag, tags)
    return tags


def _one_tree(tokens: tf.Tensor, words: tf.Tensor, convention: str):
    """tokens tf.string [T], words tf.string [W] -> (tree tf.string [], repairs int32 [K]);
    `convention`: the leaf convention of `tokens` ("slot" or "words").

    The output is built as a list of pieces ("(L", "(TAG word)", ")") joined by spaces;
    an opening piece is blanked when its constituent closes empty.
    """
    num_tokens = tf.shape(tokens)[0]
    num_words = tf.shape(words)[0]
    leaves = tf.strings.join(["(", _output_tags(words), " ", words, ")"])
    capacity = 2 * num_tokens + num_words + 2
    # Stack entry 0 is the root; entries hold the label, the output position of the
    # opening piece and the number of children so far.
    stack_labels = tf.fill([num_tokens + 1], ROOT_LABEL)
    stack_positions = tf.zeros([num_tokens + 1], tf.int32)
    stack_children = tf.zeros([num_tokens + 1], tf.int32)
    pieces = tf.fill([capacity], "")
    repairs = tf.zeros([len(REPAIR_KINDS)], tf.int32)

    def count(repairs, kind):
        return tf.tensor_scatter_nd_add(repairs, [[_KIND[kind]]], [1])

    def put(array, index, value):
        return tf.tensor_scatter_nd_update(array, [[index]], [value])

    def add_child(children, depth):
        return put(children, depth, children[depth] + 1)

    def close(state):
        depth, out, word, labels, positions, children, pieces, repairs = state
        empty = tf.equal(children[depth], 0)
        pieces = tf.cond(empty, lambda: put(pieces, positions[depth], ""),
                         lambda: put(pieces, out, CLOSE))
        out = tf.where(empty, out, out + 1)
        repairs = tf.cond(empty, lambda: count(repairs, "empty_constituents"),
                          lambda: repairs)
        depth = depth - 1
        children = tf.cond(empty, lambda: children, lambda: add_child(children, depth))
        return depth, out, word, labels, positions, children, pieces, repairs

    def step(i, state):
        depth, out, word, labels, positions, children, pieces, repairs = state
        token = tokens[i]
        is_open = tf.logical_and(tf.strings.substr(token, 0, 1) == OPEN,
                                 tf.strings.length(token) > 1)
        is_close = tf.logical_and(tf.strings.substr(token, 0, 1) == CLOSE,
                                  tf.strings.length(token) > 1)
        label = tf.strings.substr(token, 1, tf.strings.length(token) - 1)

        def word_slot():
            def place():
                return (depth, out + 1, word + 1, labels, positions,
                        add_child(children, depth), put(pieces, out, leaves[word]), repairs)
            return tf.cond(word < num_words, place,
                           lambda: (depth, out, word, labels, positions, children, pieces,
                                    count(repairs, "extra_word_slots")))

        def opening():
            d = depth + 1
            return (d, out + 1, word, put(labels, d, label), put(positions, d, out),
                    put(children, d, 0), put(pieces, out, tf.strings.join([OPEN, label])),
                    repairs)

        def closing():
            def matched():
                fixed = tf.cond(tf.equal(labels[depth], label), lambda: repairs,
                                lambda: count(repairs, "relabelled_closings"))
                return close((depth, out, word, labels, positions, children, pieces, fixed))
            return tf.cond(depth > 0, matched,
                           lambda: (depth, out, word, labels, positions, children, pieces,
                                    count(repairs, "unmatched_closings")))

        def unknown():
            return (depth, out, word, labels, positions, children, pieces,
                    count(repairs, "unknown_tokens"))

        is_leaf = (tf.equal(token, WORD_SLOT) if convention == "slot"
                   else ~(is_open | is_close))
        return i + 1, tf.case([(is_leaf, word_slot), (is_open, opening),
                               (is_close, closing)], default=unknown, exclusive=False)

    state = (tf.constant(0), tf.constant(0), tf.constant(0), stack_labels, stack_positions,
             stack_children, pieces, repairs)
    _, state = tf.while_loop(lambda i, _: i < num_tokens, step, (tf.constant(0), state))
    depth, out, word, labels, positions, children, pieces, repairs = state
    # Words without a slot go, in order, into the innermost open constituent.
    missing = num_words - word
    pieces = tf.tensor_scatter_nd_update(
        pieces, (out + tf.range(missing))[:, None], leaves[word:])
    children = put(children, depth, children[depth] + missing)
    repairs = tf.tensor_scatter_nd_add(repairs, [[_KIND["missing_word_slots"]]], [missing])
    out = out + missing

    def close_open(depth, out, pieces, children, repairs):
        state = close((depth, out, word, labels, positions, children, pieces,
                       count(repairs, "unclosed_brackets")))
        return state[0], state[1], state[6], state[5], state[7]

    depth, out, pieces, children, repairs = tf.while_loop(
        lambda depth, *_: depth > 0, close_open, (depth, out, pieces, children, repairs))
    kept = tf.boolean_mask(pieces[:out], tf.strings.length(pieces[:out]) > 0)
    body = tf.strings.reduce_join(kept, separator=" ")
    tree = tf.strings.join([OPEN, ROOT_LABEL, " ", body, CLOSE])
    tree = tf.strings.regex_replace(tree, r" \)", ")")
    # A sentence without words has no tree to repair.
    tree = tf.where(tf.equal(num_words, 0), "", tree)
    repairs = tf.where(tf.equal(num_words, 0), tf.zeros_like(repairs), repairs)
    return tree, repairs


def trees_from_outputs(linearised, sentences, leaves: str = DEFAULT_LEAVES):
    """Batch form of `linearise.tree_from_output`, in the graph.

    Args:
      linearised: tf.string [N], model outputs (space-separated tokens).
      sentences: tf.string [N], the input sentences.
      leaves: the leaf convention of the outputs ("slot" or "words").

    Returns:
      (trees tf.string [N], repairs int32 [N, len(REPAIR_KINDS)]).
    """
    return _TREE_READERS[check_leaves(leaves)](linearised, sentences)


def _tree_reader(leaves: str):
    @tf.function(autograph=False,
                 input_signature=[tf.TensorSpec([None], tf.string),
                                  tf.TensorSpec([None], tf.string)])
    def read(linearised, sentences):
        tokens = tf.strings.split(linearised)
        words = _escape_words(tf.strings.split(sentences))

        def one(i):
            return _one_tree(tokens[i], words[i], leaves)

        return tf.map_fn(one, tf.range(tf.shape(linearised)[0]),
                         fn_output_signature=(tf.TensorSpec([], tf.string),
                                              tf.TensorSpec([len(REPAIR_KINDS)], tf.int32)))
    return read


_TREE_READERS = {leaves: _tree_reader(leaves) for leaves in LEAVES}


class Parser(tf.Module):
    """A parsing model's Translator plus the in-graph tree reading; the unit exported.
    The leaf convention is its vocabulary's."""

    def __init__(self, translator: Translator, name: str | None = "parser"):
        super().__init__(name=name)
        self.translator = translator
        self.leaves = leaves_of_vocabulary(translator.tokenizer.model_proto)

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def parse(self, text):
        """See the module docstring."""
        self.translator.check_rows(text)
        words = _escape_words(tf.strings.split(text))
        normalised = tf.strings.reduce_join(words, axis=1, separator=" ")
        out = self.translator.translate(normalised)
        trees, repairs = trees_from_outputs(out["translation"], normalised, self.leaves)
        return {"tree": trees, "linearised": out["translation"], "score": out["score"],
                "repairs": repairs}


def parse_lines(translator, lines, batch_size: int = 32, progress: bool = True,
                first_line: int = 1):
    """Parse sentences with a `LoadedTranslator` of a parsing model (inference.batch), in
    Python: model outputs read back by `linearise.tree_from_output`. `first_line`: the
    input line number of lines[0] (from 1), for warnings naming a line.

    Returns:
      (trees: list of bracketed tree strings, "" for empty lines; linearised outputs;
       per-sentence RepairCounts; their total as RepairCounts).
    """
    leaves = leaves_of_vocabulary(translator.bpe_model_proto)
    inputs = [" ".join(sentence_words(line)) for line in lines]
    outputs, _ = translate_lines(translator, inputs, batch_size, progress=progress,
                                 first_line=first_line)
    trees, per_sentence, total = [], [], RepairCounts()
    for line, row in zip(inputs, outputs):
        tree, counts = tree_from_output(row[0], line, leaves)
        trees.append(tree)
        per_sentence.append(counts)
        total.add(counts)
    return trees, [row[0] for row in outputs], per_sentence, total


class ExportedParser:
    """An exported parser's serving_default (repairs in the graph), loaded once;
    `parse(lines)` sends them in batches of similar length, of at most `batch_size` rows
    (and at most the export's max_batch_rows)."""

    def __init__(self, saved_model_dir, batch_size: int = 32):
        info = read_export_info(saved_model_dir)
        self.batch_size = batch_rows(batch_size, info.get("max_batch_rows", 0))
        self._bpe_model_proto = read_bpe_model(saved_model_dir)
        self._max_source_tokens = exported_max_source_tokens(info)
        self._loaded = load_saved_model(saved_model_dir)  # holds what the signature uses
        self._serving = self._loaded.signatures["serving_default"]

    def parse(self, lines, first_line: int = 1) -> tuple[list, RepairCounts]:
        """(trees: a bracketed tree string per line, "" for an empty one; total
        RepairCounts). A line longer than the model's positions is truncated by it, with
        a warning naming its input line number (`first_line` for lines[0])."""
        lengths = warn_long_sources(self._bpe_model_proto, self._max_source_tokens,
                                    [" ".join(sentence_words(line)) for line in lines],
                                    first_line)
        order = sorted(range(len(lines)), key=lengths.__getitem__)  # batches of like length
        trees: list = [""] * len(lines)
        total = RepairCounts()
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            out = self._serving(text=tf.constant([lines[i] for i in chunk]))
            for row, index in enumerate(chunk):
                trees[index] = out["tree"][row].numpy().decode("utf-8")
                counts = RepairCounts(**dict(zip(REPAIR_KINDS,
                                                 (int(x) for x in out["repairs"][row]))))
                counts.repaired_sentences = int(counts.total > 0)
                total.add(counts)
        return trees, total
