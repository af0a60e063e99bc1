"""Attention of a sentence from a trained model (a run's model directory or an exported
SavedModel), for the attention command (`transformer_tf.cli.attention`).

The extraction and the figures are in `transformer_tf.visualization` (training's
TensorBoard images use them too); this module loads the model and ties them together.
"""
from __future__ import annotations

from transformer_tf.config import DecodingConfig
from transformer_tf.inference import loading
from transformer_tf.visualization.figures import write_figures
from transformer_tf.visualization.maps import AttentionMaps, sentence_maps


def load_model(model_dir=None, saved_model=None, checkpoint=None,
               decoding: DecodingConfig | None = None):
    """(model, tokenizer, decoding config) from exactly one of a model directory (the
    checkpoint the run is used with, `loading.default_checkpoint`: its recorded dev-set
    choice, else its averaged checkpoint, else the newest; or `checkpoint`) or a SavedModel
    written by transformer_tf (the model rebuilt from its variables); the decoding config
    is `decoding`, or when None the source's own (`loading.source_decoding`)."""
    if (model_dir is None) == (saved_model is None):
        raise ValueError("give exactly one of a model directory or a SavedModel directory")
    if model_dir is not None:
        model, tokenizer, run, _ = loading.load_trained(model_dir, checkpoint, decoding)
        return model, tokenizer, run.decoding
    model, tokenizer, info = loading.model_from_saved_model(saved_model)
    return model, tokenizer, decoding or DecodingConfig.from_config(info["decoding"])


def attention_figures(model, tokenizer, decoding: DecodingConfig, text: str, out_dir,
                      target: str | None = None, **figure_options) -> tuple[AttentionMaps, list]:
    """(maps, written paths): the attention of `text` with `target` (or the model's own
    beam-search translation) drawn by `visualization.figures.write_figures` with
    `figure_options` (kind, layer, heads, word, merge_words, dpi, overwrite)."""
    maps = sentence_maps(model, tokenizer, text, target, decoding)
    return maps, write_figures(maps, out_dir, **figure_options)
