"""Text in, text out: tokenizer + model + search in one tf.Module (served as a SavedModel).

Robustness rules, for arbitrary input in a batch (no row can fail or poison the others):
  * empty or whitespace-only sentences give "" with score 0 (they are still run through
    the model as a lone EOS, to keep the batch rectangular, but their output is replaced);
  * invalid UTF-8 bytes become U+FFFD before tokenization (see BpeTokenizer.tokenize);
    characters unknown to the vocabulary become byte pieces or UNK;
  * sources longer than the model's positions are TRUNCATED to max_position - 1 BPE
    tokens (+ EOS); scripts/translate.py (`batch_translate.translate_lines`) warns about
    them on stderr with their line numbers.
Outputs are limited to input length + max_extra_length tokens (paper: 50), and never
beyond max_position. The search never emits PAD or BOS.
"""
from __future__ import annotations

import tensorflow as tf

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID, DecodingConfig
from transformer_tf.decoding import beam_search, greedy_search, tile_beams

_STATIC_LAYER_KEYS = ("cross_key", "cross_value")


def split_cache(cache):
    """(static, dynamic) parts of a Transformer decoding cache.

    The static part (encoder keys/values, source mask) is the same for every beam of a
    sentence, so the search need not reorder it: it is tiled once and closed over.
    """
    static = {"source_valid": cache["source_valid"],
              "layers": [{k: layer[k] for k in _STATIC_LAYER_KEYS} for layer in cache["layers"]]}
    dynamic = [{k: v for k, v in layer.items() if k not in _STATIC_LAYER_KEYS}
               for layer in cache["layers"]]
    return static, dynamic


def merge_cache(static, dynamic):
    return {"source_valid": static["source_valid"],
            "layers": [{**s, **d} for s, d in zip(static["layers"], dynamic)]}


def _forbidden_token_bias(vocab_size: int, token_ids) -> tf.Tensor:
    """float32 [vocab_size]: -1e9 at `token_ids`, 0 elsewhere (added to every step's logits)."""
    bias = tf.zeros([vocab_size], tf.float32)
    ids = tf.constant(token_ids, tf.int32)[:, None]
    return tf.tensor_scatter_nd_update(bias, ids, tf.fill([len(token_ids)], -1e9))


def search_model(model, source_ids, decoding: DecodingConfig, n_best: int = 1,
                 fixed_length: int | None = None):
    """Beam (or greedy, beam_size 1) search over a Transformer for padded source ids.

    Args:
      model: a Transformer (with encode / init_cache / decode_step).
      source_ids: int32 [batch, source_length], tokens + EOS, PAD_ID-padded.
      decoding: beam size, alpha, max_extra_length.
      n_best: hypotheses returned per sentence (<= beam_size).
      fixed_length: None (translation: up to source length + max_extra_length tokens,
        ending at EOS), or an exact output length with EOS forbidden and static shapes
        (for benchmarks, XLA included).

    Returns:
      transformer_tf.decoding.SearchResult: ids [batch, n_best, L], scores, lengths.
    """
    source_ids = tf.cast(source_ids, tf.int32)
    batch_size = tf.shape(source_ids)[0]
    forbidden_ids = [PAD_ID, BOS_ID]
    if fixed_length is None:
        source_lengths = tf.reduce_sum(tf.cast(source_ids != PAD_ID, tf.int32), axis=1)
        max_lengths = tf.minimum(source_lengths + decoding.max_extra_length,
                                 model.config.max_position)
        cache_length = tf.maximum(tf.reduce_max(max_lengths), 1)
        static_length = None  # the search sizes its outputs from max_lengths
    else:
        max_lengths = cache_length = static_length = fixed_length
        forbidden_ids.append(EOS_ID)
    encoder_output, source_valid = model.encode(source_ids, training=False)
    cache = model.init_cache(encoder_output, source_valid, cache_length)
    static, dynamic = split_cache(cache)
    beam = decoding.beam_size
    if beam > 1:
        static = tf.nest.map_structure(lambda t: tile_beams(t, beam), static)
    # Built once, outside the search loop.
    forbidden = _forbidden_token_bias(model.config.resolved_target_vocab_size, forbidden_ids)
    weights = model.decoding_weights()

    def step_fn(ids, step, dynamic_cache):
        logits, new_cache = model.decode_step(
            ids, step, merge_cache(static, dynamic_cache), weights=weights)
        return logits + forbidden, split_cache(new_cache)[1]

    common = dict(max_decode_length=static_length, eos_id=EOS_ID, bos_id=BOS_ID, pad_id=PAD_ID)
    if beam == 1:
        return greedy_search(step_fn, dynamic, batch_size, max_lengths, **common)
    return beam_search(step_fn, dynamic, batch_size, beam, max_lengths, alpha=decoding.alpha,
                       n_best=n_best, **common)


class Translator(tf.Module):
    """Raw text to raw text with a trained model; the unit that is exported.

    Args:
      model: a trained Transformer.
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
        if not 1 <= self.n_best <= decoding.beam_size:
            raise ValueError(f"n_best must be in [1, beam_size={decoding.beam_size}], "
                             f"got {self.n_best}")
        self.max_source_tokens = model.config.max_position - 1  # room for EOS

    def encode_text(self, text):
        """tf.string [N] -> (source_ids int32 [N, S] with EOS, PAD-padded; truncated bool [N];
        empty bool [N] for sentences that are empty once surrounding whitespace is stripped)."""
        text = tf.strings.strip(text)
        tokens = self.tokenizer.tokenize(text)
        lengths = tokens.row_lengths()
        truncated = lengths > self.max_source_tokens
        tokens = tokens[:, : self.max_source_tokens]
        eos = tf.fill([tokens.nrows(), 1], tf.constant(EOS_ID, tf.int32))
        with_eos = tf.concat([tf.cast(tokens, tf.int32), eos], axis=1)
        empty = tf.logical_or(tf.equal(text, ""), tf.equal(lengths, 0))
        return with_eos.to_tensor(default_value=PAD_ID), truncated, empty

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
