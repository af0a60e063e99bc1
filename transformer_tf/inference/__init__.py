"""transformer_tf.inference: text in, text out over any model of the sequence-to-sequence
contract.

Modules:
  translator  Translator, the tf.Module that tokenizes, searches and detokenizes (exported)
  loading     loading a trained run (model directory) or an exported SavedModel
  batch       translating many lines in length-sorted batches (scripts/translate.py)
  forced_decoding  the log-probability of given translations (one teacher-forced pass)
  pair_scoring     scoring (source, target) lines in batches (scripts/score.py)
  alignment        word alignments from cross-attention; unknown-word replacement
"""
