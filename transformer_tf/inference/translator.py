"""Text in, text out: tokenizer + model + search in one tf.Module (served as a SavedModel).

Any model of the sequence-to-sequence contract (transformer_tf.models.contract) works.

Robustness rules, for arbitrary input in a batch (no row can fail or poison the others):
  * empty or whitespace-only sentences give "" with score 0 (they are still run through
    the model as a lone EOS, to keep the batch rectangular, but their output is replaced);
  * invalid UTF-8 bytes become U+FFFD before tokenization (see BpeTokenizer.tokenize);
    characters unknown to the vocabulary become byte pieces or UNK;
  * sources longer than the model's max_source_length are TRUNCATED to that - 1 BPE
    tokens (+ EOS); scripts/translate.py (`inference.batch.translate_lines`) warns about
    them on stderr with their line numbers.
Outputs are limited to input length + max_extra_length tokens (paper: 50), and never
beyond the model's max_target_length. The search never emits PAD or BOS.
"""
from __future__ import annotations

import tensorflow as tf

from transformer_tf.config import DecodingConfig
from transformer_tf.data.source_text import encode_sources
from transformer_tf.decoding.model_search import search_model
from transformer_tf.decoding.search import check_n_best


class Translator(tf.Module):
    """Raw text to raw text with a trained model; the unit that is exported.

    Args:
      model: a trained model of the sequence-to-sequence contract.
      tokenizer: the shared BpeTokenizer (its model proto travels with this module).
      decoding: beam size, length penalty alpha and max extra length.
      n_best: hypotheses kept per sentence by `translate_nbest`.
    """

    def __init__(self, model, tokenizer, decoding: DecodingConfig = DecodingConfig(),
                 n_best: int | None = None, name: str | None = "translator"):
        super().__init__(name=name)
        self.model = model
        self.tokenizer = tokenizer
        self.decoding = decoding
        self.n_best = n_best or decoding.beam_size
        check_n_best(self.n_best, decoding.beam_size)
        self.max_source_tokens = model.max_source_length - 1  # room for EOS

    def encode_text(self, text):
        """tf.string [N] -> (source_ids int32 [N, S] with EOS, PAD-padded; truncated bool [N];
        empty bool [N]); see transformer_tf.data.source_text."""
        return encode_sources(self.tokenizer, text, self.max_source_tokens)

    def _search(self, source_ids, n_best):
        return search_model(self.model, source_ids, self.decoding, n_best=n_best)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def translate(self, text):
        """Best translation per sentence.

        Returns:
          {"translation": tf.string [N], "score": float32 [N]} (score: with beam search,
          the log-probability divided by the GNMT length penalty; with beam_size 1
          (greedy), the plain log-probability; 0 for empty input).
        """
        source_ids, _, empty = self.encode_text(text)
        result = self._search(source_ids, n_best=1)
        translation = self.tokenizer.detokenize(result.ids[:, 0, :])
        return {"translation": tf.where(empty, tf.constant(""), translation),
                "score": tf.where(empty, 0.0, result.scores[:, 0])}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def translate_nbest(self, text):
        """The n_best hypotheses per sentence, best first.

        Returns:
          {"translations": tf.string [N, n_best], "scores": float32 [N, n_best]}; missing
          hypotheses are "" with score -inf.
        """
        source_ids, _, empty = self.encode_text(text)
        result = self._search(source_ids, n_best=self.n_best)
        batch = tf.shape(result.ids)[0]
        flat_ids = tf.reshape(result.ids, [batch * self.n_best, -1])
        texts = tf.reshape(self.tokenizer.detokenize(flat_ids), [batch, self.n_best])
        return {"translations": tf.where(empty[:, None], tf.constant(""), texts),
                "scores": tf.where(empty[:, None], 0.0, result.scores)}

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")])
    def translate_ids(self, source_ids):
        """Token ids in, token ids out (for servers without the tf-text ops).

        Args:
          source_ids: int32 [N, S]: BPE ids + EOS, PAD_ID (0) padded.

        Returns:
          {"ids": int32 [N, L] (EOS included, PAD after), "length": int32 [N],
           "score": float32 [N]}.
        """
        result = self._search(source_ids, n_best=1)
        return {"ids": result.ids[:, 0, :], "length": result.lengths[:, 0],
                "score": result.scores[:, 0]}
