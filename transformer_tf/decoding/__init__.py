"""transformer_tf.decoding: greedy and beam search over a step function (no Keras inside).

See `transformer_tf.decoding.search` for the step-function contract and the exact rules.
"""
from transformer_tf.decoding.search import (
    SearchResult,
    beam_search,
    greedy_search,
    length_penalty,
    tile_beams,
)

__all__ = ["SearchResult", "beam_search", "greedy_search", "length_penalty", "tile_beams"]
