"""The model and the search the decoding benchmarks time. The model: `decode_model`, the
same random weights in every process that builds it (bench/workers/decode_tf.py decodes it,
bench/workers/ct2_model.py converts it for the CTranslate2 peer). The search: the library's
own search over the model
(`search_with_lengths`, what `search_model` runs in production), with EOS forbidden so
that every sentence produces exactly `length` tokens. Without XLA it is the served graph
path (`search_model`'s: decoder caches that grow by one position per step, finished
sentences dropped from the batch); under XLA the caches have a static size of `length`
positions, so that the search compiles once."""
from __future__ import annotations

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID
from transformer_tf.decoding.model_driver import search_with_lengths


def fixed_length_search(model, source_ids, beam_size: int, alpha: float, length: int,
                        static_cache: bool = False):
    """SearchResult of exactly `length` tokens per sentence (n_best 1); `static_cache`:
    fixed-size decoder caches (for XLA) instead of the served path's growing ones."""
    return search_with_lengths(
        model, source_ids, beam_size=beam_size, alpha=alpha, n_best=1, max_lengths=length,
        cache_length=length if static_cache else None, max_decode_length=length,
        forbidden_ids=(PAD_ID, BOS_ID, EOS_ID))


def decode_model(shape):
    """The random-weight `Transformer` of `shape` (a `common.Shape`) the decoding
    benchmarks decode: the training benchmark's config of that shape
    (`train_tf.model_config_for`), Keras seeded with 0 first so that every process builds
    the same weights, built in the global dtype policy. Import TensorFlow before calling
    it (train_tf prepares a training process's environment when it loads first)."""
    import keras

    from train_tf import model_config_for
    from transformer_tf.models.transformer import Transformer

    keras.utils.set_random_seed(0)
    model = Transformer(model_config_for(shape))
    model.build()
    return model
