"""transformer_tf.decoding: greedy and beam search (no Keras inside).

Modules:
  search        greedy_search / beam_search over a step function, with their exact rules
  model_search  search_model: the same searches over any sequence-to-sequence model, and
                DecoderState, the cache contract a model declares for the search
"""
