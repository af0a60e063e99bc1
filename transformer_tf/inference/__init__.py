"""transformer_tf.inference: text in, text out over any model of the sequence-to-sequence
contract.

Modules:
  translator  Translator, the tf.Module that tokenizes, searches and detokenizes (exported)
  loading     loading a trained run (model directory) or an exported SavedModel
  batch       translating many lines in length-sorted batches (scripts/translate.py)
"""
