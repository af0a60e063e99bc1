"""TensorBoard images of attention: the heat maps of one fixed dev sentence pair, so that
a user sees the heads sharpen as training goes on (written with each validation)."""
from __future__ import annotations

import logging

import tensorflow as tf

from transformer_tf.visualization.figures import heatmap_pngs
from transformer_tf.visualization.maps import sentence_maps
from transformer_tf.visualization.plots import check_matplotlib

logger = logging.getLogger(__name__)


def attention_heatmap_images(network, tokenizer, source: str, reference: str) -> dict:
    """kind -> uint8 images [layers, height, width, 4]: per layer, the heat maps of all
    heads for `source` with `reference` teacher forced (words, pieces merged). Empty, with
    the reason in the log, when matplotlib is missing, the model family has no attention
    weights or a sentence is empty."""
    try:
        check_matplotlib()
        maps = sentence_maps(network, tokenizer, source, reference)
    except (ImportError, NotImplementedError, ValueError) as error:
        logger.info("no attention images in TensorBoard: %s", error)
        return {}
    return {kind: tf.stack([tf.io.decode_png(png, channels=4) for png in pngs]).numpy()
            for kind, pngs in heatmap_pngs(maps).items()}
