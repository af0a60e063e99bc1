"""Validation BLEU and example translations during training (greedy decoding of a dev subset)."""
from __future__ import annotations

import logging

import keras
import tensorflow as tf

from transformer_tf.config import DecodingConfig
from transformer_tf.data.source_text import encode_sources
from transformer_tf.decoding.model_driver import search_model
from transformer_tf.evaluation import corpus_bleu
from transformer_tf.training.attention_images import attention_heatmap_images

logger = logging.getLogger(__name__)


class ValidationTranslations(keras.callbacks.Callback):
    """After each validation run, decodes `sources` greedily, puts their BLEU in the logs
    as `val_bleu` (for the callbacks after it: `keep_best.KeepBest`) and writes to TensorBoard:
    `bleu` (cased sacreBLEU against `references`) and `examples` (a markdown table of the
    first `num_examples` source / reference / hypothesis triples) in the validation run,
    and with `attention_images` the images `attention/<kind>` of the first pair (one per
    layer: the heat maps of its heads, see `training.attention_images`).

    Args:
      network: the model being trained (a Seq2SeqModel; `trainer.network`).
      tokenizer: the shared BpeTokenizer.
      sources, references: the dev subset (lists of str, same length).
      monitor: the run's TrainingMonitor (it owns the validation writer).
      batch_size: sentences per decoding batch.
      num_examples: example translations shown as text.
      max_extra_length: output limit = input length + this.
      attention_images: write the attention heat maps (needs matplotlib; skipped without).
    """

    def __init__(self, network, tokenizer, sources, references, monitor, batch_size: int = 64,
                 num_examples: int = 5, max_extra_length: int = 50,
                 attention_images: bool = True):
        super().__init__()
        if len(sources) != len(references):
            raise ValueError(f"{len(sources)} dev sources but {len(references)} references")
        self.network = network
        self.tokenizer = tokenizer
        self.sources, self.references = list(sources), list(references)
        self.monitor = monitor
        self.batch_size = batch_size
        self.num_examples = num_examples
        self.decoding = DecodingConfig(beam_size=1, max_extra_length=max_extra_length)
        self.show_attention = attention_images
        self.history: list[tuple[int, float]] = []
        self._translate_batch = tf.function(self._translate_text, reduce_retracing=True,
                                            autograph=False)

    def _translate_text(self, text):
        source_ids, _, empty = encode_sources(
            self.tokenizer, text, self.network.max_source_length - 1)
        result = search_model(self.network, source_ids, self.decoding)
        return tf.where(empty, "", self.tokenizer.detokenize(result.ids[:, 0, :]))

    def translate(self) -> list[str]:
        hypotheses = []
        for start in range(0, len(self.sources), self.batch_size):
            out = self._translate_batch(tf.constant(self.sources[start:start + self.batch_size]))
            hypotheses += [t.decode("utf-8", errors="replace") for t in out.numpy()]
        return hypotheses

    def score(self, hypotheses: list[str]) -> float:
        """Cased sacreBLEU of `hypotheses` against the references."""
        return float(corpus_bleu(hypotheses, self.references))

    def on_epoch_end(self, epoch, logs=None):
        if not self.sources:
            return
        hypotheses = self.translate()
        bleu = self.score(hypotheses)
        step = int(self.model.optimizer.iterations.numpy())
        self.history.append((step, bleu))
        if logs is not None:
            logs["val_bleu"] = bleu
        rows = ["| source | reference | hypothesis |", "| --- | --- | --- |"] + [
            f"| {s} | {r} | {h} |" for s, r, h in
            zip(self.sources, self.references, hypotheses)][: self.num_examples]
        images = {}
        if self.show_attention:
            images = {f"attention/{kind}": value for kind, value in attention_heatmap_images(
                self.network, self.tokenizer, self.sources[0], self.references[0]).items()}
            self.show_attention = bool(images)  # nothing to show: do not try again
        self.monitor.write_validation({"bleu": bleu}, {"examples": "\n".join(rows)}, images)
        logger.info("step %d: validation BLEU %.2f on %d sentences", step, bleu,
                    len(self.sources))
