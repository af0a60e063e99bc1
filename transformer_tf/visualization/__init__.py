"""transformer_tf.visualization: what the attention heads look at (the paper's Figures 3-5).

Modules:
  maps    attention weights of one sentence pair through the model contract
          (`Seq2SeqModel.attention_weights`), with the BPE pieces as labels
  words   BPE pieces merged back into words, and the weights with them
  plots   the figures (matplotlib, the optional `viz` extra, imported only when drawing):
          lines between two copies of a sentence, per-head heat maps, alignment matrices

Sits beside `models` in the import order (it reads models through their contract and
tokenizes with `data`), below `training` (TensorBoard images) and `inference` (the
command line).
"""
