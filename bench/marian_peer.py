"""The Hugging Face decoding peer's model: a random-weight Marian model of our shape, built
locally.

`build_marian(torch, shape)` makes a `transformers.MarianMTModel` from a `MarianConfig`
matching `common.Shape` (post-norm, ReLU, sinusoidal positions, embeddings scaled by
sqrt(d_model), one embedding matrix for source, target and the pre-softmax projection),
with random weights; nothing is downloaded. Marian appends its pad token to the
vocabulary (the decoder starts from it), so the HF model has vocab_size + 1 rows.
(The CTranslate2 peer runs our own model instead: bench/workers/ct2_model.py.)
"""
from __future__ import annotations

import common
from transformers import MarianConfig, MarianMTModel

from transformer_tf.config import EOS_ID


def marian_config(shape: common.Shape):
    pad = shape.vocab_size  # Marian's pad (= decoder start) is the extra last id
    return MarianConfig(
        vocab_size=shape.vocab_size + 1, decoder_vocab_size=shape.vocab_size + 1,
        d_model=shape.d_model, encoder_layers=shape.num_layers,
        decoder_layers=shape.num_layers, encoder_attention_heads=shape.num_heads,
        decoder_attention_heads=shape.num_heads, encoder_ffn_dim=shape.d_ff,
        decoder_ffn_dim=shape.d_ff, activation_function="relu", dropout=0.1,
        max_position_embeddings=256, scale_embedding=True, pad_token_id=pad,
        decoder_start_token_id=pad, eos_token_id=EOS_ID, bos_token_id=None,
        forced_eos_token_id=None, share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True)


def build_marian(torch, shape: common.Shape, seed: int = 0):
    torch.manual_seed(seed)
    model = MarianMTModel(marian_config(shape))
    model.eval()
    return model

