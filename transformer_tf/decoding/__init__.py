"""transformer_tf.decoding: greedy and beam search (no Keras inside).

Modules:
  beam_and_greedy  greedy_search / beam_search over a step function, with their exact rules
  model_driver     search_model: drives a sequence-to-sequence model's encode and
                   decode_step through those searches, and DecoderState, the cache
                   contract a model declares for the search
"""
