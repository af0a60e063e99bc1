"""The decoding peers' model: a random-weight Marian model of our shape, built locally.

`build_marian(torch, shape)` makes a `transformers.MarianMTModel` from a `MarianConfig`
matching `common.Shape` (post-norm, ReLU, sinusoidal positions, embeddings scaled by
sqrt(d_model), one embedding matrix for source, target and the pre-softmax projection),
with random weights; nothing is downloaded. Marian appends its pad token to the
vocabulary (the decoder starts from it), so the HF model has vocab_size + 1 rows; the
CTranslate2 conversion drops that row again (it starts from a zero embedding instead).

`convert_to_ctranslate2(model, out_dir)` converts that in-memory model with
CTranslate2's own Marian loader (`ctranslate2.converters.TransformersConverter`), given
a made-up vocabulary (`"<unk>", "<s>", "</s>", "t4", ...`) in place of a tokenizer.
"""
from __future__ import annotations

import os
import tempfile

import common
from transformers import MarianConfig, MarianMTModel

from transformer_tf.config import BOS_ID, EOS_ID, NUM_SPECIAL_IDS, PAD_ID, UNK_ID

EOS_TOKEN, UNK_TOKEN, PAD_TOKEN = "</s>", "<unk>", "<pad>"


def vocabulary(shape: common.Shape) -> list[str]:
    """Token strings by id: our special ids (transformer_tf.config), then made-up pieces,
    then Marian's pad."""
    specials = {PAD_ID: "<blank>", UNK_ID: UNK_TOKEN, BOS_ID: "<s>", EOS_ID: EOS_TOKEN}
    tokens = [specials[i] for i in range(NUM_SPECIAL_IDS)]
    tokens += [f"t{i}" for i in range(NUM_SPECIAL_IDS, shape.vocab_size)]
    return tokens + [PAD_TOKEN]


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


class _MadeUpTokenizer:
    """What CTranslate2's Marian loader reads from a tokenizer: the vocabulary and specials."""

    def __init__(self, tokens):
        self._vocab = {token: i for i, token in enumerate(tokens)}
        self.eos_token, self.unk_token, self.pad_token = EOS_TOKEN, UNK_TOKEN, PAD_TOKEN

    def get_vocab(self):
        return dict(self._vocab)


def convert_to_ctranslate2(model, shape: common.Shape, out_dir: str) -> str:
    """Converts the in-memory Marian `model` to a CTranslate2 model directory (float32)."""
    # Imported on use: only the ctranslate2 peer needs CTranslate2; the hf peer runs without.
    from ctranslate2.converters import TransformersConverter

    tokens = vocabulary(shape)

    class InMemoryConverter(TransformersConverter):
        def load_model(self, model_class, model_name_or_path, **kwargs):
            return model

        def load_tokenizer(self, tokenizer_class, model_name_or_path, **kwargs):
            return _MadeUpTokenizer(tokens)

    with tempfile.TemporaryDirectory() as config_dir:
        model.config.save_pretrained(config_dir)  # config.json only: AutoConfig reads it
        converter = InMemoryConverter(config_dir)
        converter.convert(os.fspath(out_dir), quantization="float32", force=True)
    return os.fspath(out_dir)
