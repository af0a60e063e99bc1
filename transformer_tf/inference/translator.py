"""The modules that are exported: ids in, ids out (`IdsTranslator`, core TF ops only) and
text in, text out (`Translator`: the tokenizer added, tensorflow-text ops inside).

Any model of the sequence-to-sequence contract (transformer_tf.models.contract) works.

Robustness rules, for arbitrary input in a batch (no row can fail or poison the others),
the same for text and for ids (transformer_tf.data.source_text states them):
  * blank rows (only Unicode whitespace, control or format characters; for ids: no id
    before the first EOS) give "" / no ids with score 0 (they are still run through the
    model as a lone EOS, to keep the batch rectangular, but their output is replaced);
  * invalid UTF-8 bytes become U+FFFD; characters unknown to the vocabulary become byte
    pieces or UNK; ids outside the vocabulary become UNK;
  * sources longer than the model's max_source_length are TRUNCATED to that - 1 BPE
    tokens (+ EOS); scripts/translate.py (`inference.batch.translate_lines`) warns about
    them on stderr with their line numbers.
Outputs are limited to input length + max_extra_length tokens (paper: 50), and never
beyond the model's max_target_length. The search never emits PAD, BOS or a piece that
holds a line break (`bpe.line_break_piece_ids`), so every output stays on one line.
With `max_batch_rows` (exports: DEFAULT_MAX_BATCH_ROWS), a request of more rows fails as a
whole with an InvalidArgument error naming the limit, instead of running out of memory.

The signatures are traced without AutoGraph (`autograph=False`): the search's loops and
branches are TF ops already (`tf.while_loop`, `tf.cond`), so converting its code would
change no op, and cost each process about 10 s at its first trace.
"""
from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from transformer_tf.config import PAD_ID, DecodingConfig
from transformer_tf.data.bpe import line_break_piece_ids
from transformer_tf.data.source_text import clean_source_ids, encode_sources
from transformer_tf.data.tree_grammar import output_constraint
from transformer_tf.decoding.model_driver import (
    search_in_lanes,
    search_model,
    search_model_by_length,
    xla_chunk_search,
)
from transformer_tf.inference.forced_decoding import forced_scores


class IdsTranslator(tf.Module):
    """Token ids to token ids with a trained model; holds no tokenizer, so its SavedModel
    loads on servers with core TF ops only.

    Args:
      model: a trained model of the sequence-to-sequence contract.
      decoding: beam size, length penalty alpha and max extra length.
      n_best: hypotheses kept per sentence by the n-best signatures, at most
        `decoding.beam_size` (None: that many; checked by whoever builds `decoding`).
      forbidden_ids: ids the search never emits besides PAD and BOS (the tokenizer's
        line-break pieces; `Translator` fills them in).
      constraint: what outputs must obey (`decoding.grammar`'s constraint, built by
        `Translator` from the vocabulary), or None.
      max_batch_rows: the most rows a call accepts (more: InvalidArgumentError); 0: any.
    """

    def __init__(self, model, decoding: DecodingConfig = DecodingConfig(),
                 n_best: int | None = None, forbidden_ids: Sequence[int] = (),
                 name: str | None = "translator", constraint=None, max_batch_rows: int = 0):
        super().__init__(name=name)
        self.max_batch_rows = int(max_batch_rows)
        self.model = model
        self.decoding = decoding
        self.n_best = n_best or decoding.beam_size
        self.max_source_tokens = model.max_source_length - 1  # room for EOS
        self.forbidden_ids = tuple(int(i) for i in forbidden_ids)
        self.constraint = constraint
        # The tf.Variables behind the Keras variables, tracked here so that a SavedModel
        # of this module restores them in TF1-style loaders too (TF Serving's C++ loader,
        # `saved_model_cli run`). Without them such loaders restore only copies that Keras 3
        # makes of its variables, while the signatures read the originals, never
        # initialised ("Could not find variable ..."). Keras' own `model.export` does the
        # same; the weights are stored twice in the export's variables/.
        self.core_variables = [getattr(v, "value", v) for v in model.variables]
        # Weights the search would otherwise re-arrange at every call, laid out once
        # (a snapshot: `rundir.checkpoints.load_weights` refreshes it), tracked here
        # so that an export holds them.
        self.inference_variables = model.keep_inference_weights()

    def _search(self, source_ids, n_best):
        # One compiled function for every lane: each shape is compiled once, not per lane.
        compiled = (xla_chunk_search(self.model, self.decoding, n_best, self.forbidden_ids,
                                     self.constraint)
                    if self.decoding.xla and self.decoding.chunk_size else False)

        def search(ids):
            if self.decoding.chunk_size:
                return search_model_by_length(self.model, ids, self.decoding, n_best=n_best,
                                              forbidden_ids=self.forbidden_ids,
                                              jit_compile=compiled,
                                              constraint=self.constraint)
            return search_model(self.model, ids, self.decoding, n_best=n_best,
                                forbidden_ids=self.forbidden_ids, constraint=self.constraint)

        return search_in_lanes(search, source_ids, self.decoding.lanes)

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def _best_hypotheses(self, source_ids):
        """The search's best hypothesis of each row of cleaned `source_ids` (int32 [N, S]):
        (ids int32 [N, L], lengths int32 [N], scores float32 [N]). A function of its own,
        so that every signature serving the best hypothesis calls one traced search: an
        export traces and stores the search once for them all, not once per signature."""
        result = self._search(source_ids, n_best=1)
        return result.ids[:, 0, :], result.lengths[:, 0], result.scores[:, 0]

    def check_rows(self, batch) -> None:
        """In a signature: fail the call with tf.errors.InvalidArgumentError when `batch`
        (any tensor, rows first) has more than max_batch_rows rows (0: no check)."""
        if self.max_batch_rows:
            tf.debugging.assert_less_equal(
                tf.shape(batch)[0], self.max_batch_rows,
                message=f"max_batch_rows={self.max_batch_rows}: the request has more rows "
                        f"than this model accepts; send at most {self.max_batch_rows} rows "
                        "per request")

    def clean_ids(self, source_ids):
        """int [N, S], any values -> (source_ids int32 [N, <= max_source_tokens + 1],
        truncated bool [N], empty bool [N]); see transformer_tf.data.source_text."""
        return clean_source_ids(source_ids, self.model.source_vocab_size, self.max_source_tokens)

    @tf.function(autograph=False,
                 input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")])
    def translate_ids(self, source_ids):
        """Token ids in, token ids out (the client tokenizes with the exported bpe.model).

        Args:
          source_ids: int32 [N, S]: BPE ids, optionally ending with EOS (3), PAD_ID (0)
            padded. Read up to the first EOS; out-of-vocabulary ids count as UNK; at most
            max_source_tokens ids are used.

        Returns:
          {"ids": int32 [N, L] (EOS included, PAD after), "length": int32 [N] (EOS
           included; 0 for a row with no id), "score": float32 [N] (0 for such a row)}.
        """
        self.check_rows(source_ids)
        source_ids, _, empty = self.clean_ids(source_ids)
        ids, lengths, scores = self._best_hypotheses(source_ids)
        return {"ids": tf.where(empty[:, None], PAD_ID, ids),
                "length": tf.where(empty, 0, lengths),
                "score": tf.where(empty, 0.0, scores)}

    def check_pairs(self, source, target) -> None:
        """In a signature: the row limit of `check_rows`, and as many targets as sources
        (else tf.errors.InvalidArgumentError)."""
        self.check_rows(source)
        tf.debugging.assert_equal(
            tf.shape(source)[0], tf.shape(target)[0],
            message="score: give one target per source (the two inputs differ in rows)")

    @tf.function(autograph=False,
                 input_signature=[tf.TensorSpec([None, None], tf.int32),
                                  tf.TensorSpec([None, None], tf.int32),
                                  tf.TensorSpec([None], tf.bool)])
    def _score(self, source_ids, target_ids, truncated):
        """The score signatures' outputs for cleaned ids (`inference.forced_decoding`); one
        traced function that both score signatures call, as `_best_hypotheses`."""
        scores = forced_scores(self.model, source_ids, target_ids)
        return {"log_prob": scores.log_prob, "token_scores": scores.token_scores,
                "token_ids": target_ids, "length": scores.lengths, "truncated": truncated}

    @tf.function(autograph=False,
                 input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids"),
                                  tf.TensorSpec([None, None], tf.int32, name="target_ids")])
    def score_ids(self, source_ids, target_ids):
        """Forced decoding of given translations, ids in (both sides cleaned by the source
        rules of `clean_ids`: read up to the first EOS, EOS appended; a target is cut to
        the model's max_target_length - 1 tokens).

        Returns:
          {"log_prob": float32 [N] (natural log, EOS included, no length penalty),
           "token_scores": float32 [N, T] (per scored token; 0 after "length"),
           "token_ids": int32 [N, T] (the tokens scored: the target's, then EOS; PAD after),
           "length": int32 [N], "truncated": bool [N] (the target was cut)}.
        """
        self.check_pairs(source_ids, target_ids)
        source_ids, _, _ = self.clean_ids(source_ids)
        target_ids, truncated, _ = clean_source_ids(
            target_ids, self.model.target_vocab_size, self.model.max_target_length - 1)
        return self._score(source_ids, target_ids, truncated)


class Translator(IdsTranslator):
    """Raw text to raw text with a trained model; the unit that is exported.

    Args:
      model: a trained model of the sequence-to-sequence contract.
      tokenizer: the shared BpeTokenizer (its model proto travels with this module).
      decoding: beam size, length penalty alpha, max extra length and the output grammar
        (`decoding.grammar`, built from the tokenizer's vocabulary).
      n_best: hypotheses kept per sentence by `translate_nbest`, as for `IdsTranslator`.
    """

    def __init__(self, model, tokenizer, decoding: DecodingConfig = DecodingConfig(),
                 n_best: int | None = None, name: str | None = "translator",
                 max_batch_rows: int = 0):
        super().__init__(model, decoding, n_best,
                         forbidden_ids=line_break_piece_ids(tokenizer.model_proto), name=name,
                         constraint=output_constraint(decoding.grammar, tokenizer.model_proto,
                                                      model.target_vocab_size),
                         max_batch_rows=max_batch_rows)
        self.tokenizer = tokenizer

    def ids_only(self) -> IdsTranslator:
        """The same model and search without the tokenizer (for a core-ops export)."""
        return IdsTranslator(self.model, self.decoding, self.n_best, self.forbidden_ids,
                             constraint=self.constraint, max_batch_rows=self.max_batch_rows)

    def with_max_batch_rows(self, max_batch_rows: int) -> "Translator":
        """This translator if its limit is `max_batch_rows`, else a new one over the same
        model and settings with that limit (a traced signature keeps the limit it was
        traced with, so the limit is never changed in place)."""
        if max_batch_rows == self.max_batch_rows:
            return self
        return Translator(self.model, self.tokenizer, self.decoding, self.n_best,
                          max_batch_rows=max_batch_rows)

    def encode_text(self, text):
        """tf.string [N] -> (source_ids int32 [N, S] with EOS, PAD-padded; truncated bool [N];
        empty bool [N]); see transformer_tf.data.source_text."""
        return encode_sources(self.tokenizer, text, self.max_source_tokens)

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def translate(self, text):
        """Best translation per sentence.

        Returns:
          {"translation": tf.string [N], "score": float32 [N]} (score: with beam search,
          the log-probability divided by the GNMT length penalty; with beam_size 1
          (greedy), the plain log-probability; 0 for blank input).
        """
        self.check_rows(text)
        source_ids, _, empty = self.encode_text(text)
        ids, _, scores = self._best_hypotheses(source_ids)
        translation = self.tokenizer.detokenize(ids)
        return {"translation": tf.where(empty, tf.constant(""), translation),
                "score": tf.where(empty, 0.0, scores)}

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def translate_nbest(self, text):
        """The n_best hypotheses per sentence, best first.

        Returns:
          {"translations": tf.string [N, n_best], "scores": float32 [N, n_best]}; missing
          hypotheses are "" with score -inf; blank input gives "" with score 0.
        """
        self.check_rows(text)
        source_ids, _, empty = self.encode_text(text)
        result = self._search(source_ids, n_best=self.n_best)
        batch = tf.shape(result.ids)[0]
        flat_ids = tf.reshape(result.ids, [batch * self.n_best, -1])
        texts = tf.reshape(self.tokenizer.detokenize(flat_ids), [batch, self.n_best])
        return {"translations": tf.where(empty[:, None], tf.constant(""), texts),
                "scores": tf.where(empty[:, None], 0.0, result.scores)}

    @tf.function(autograph=False,
                 input_signature=[tf.TensorSpec([None], tf.string, name="source"),
                                  tf.TensorSpec([None], tf.string, name="target")])
    def score(self, source, target):
        """Forced decoding: the log-probability of each given translation.

        Args:
          source, target: tf.string [N] each, row n of `target` a translation of row n of
            `source`; tokenized as `translate` does (a target is cut to the model's
            max_target_length - 1 pieces, and "truncated" says so).

        Returns:
          {"log_prob": float32 [N]: log P(target | source), natural log, summed over the
             target's pieces and EOS, no length penalty;
           "token_scores": float32 [N, T]: each piece's log-probability, EOS last, 0 after
             "length" (padded, not ragged: TF Serving returns dense tensors);
           "token_ids": int32 [N, T]: the pieces scored (map them with
             assets.extra/bpe.model), EOS last, PAD (0) after;
           "length": int32 [N]: pieces scored, EOS included;
           "truncated": bool [N]: the target was longer than the model's positions}.
        """
        self.check_pairs(source, target)
        source_ids, _, _ = self.encode_text(source)
        target_ids, truncated, _ = encode_sources(self.tokenizer, target,
                                                  self.model.max_target_length - 1)
        return self._score(source_ids, target_ids, truncated)
