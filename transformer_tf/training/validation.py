"""Validation BLEU and example translations during training (greedy decoding of a dev subset)."""
from __future__ import annotations

import logging

import keras
import tensorflow as tf

from transformer_tf.config import DecodingConfig
from transformer_tf.evaluation import corpus_bleu

logger = logging.getLogger(__name__)


class ValidationTranslations(keras.callbacks.Callback):
    """After each validation run, decodes `sources` greedily and writes to TensorBoard:
    `bleu` (cased sacreBLEU against `references`) and `examples` (a markdown table of the
    first `num_examples` source / reference / hypothesis triples) in the validation run.

    Args:
      tokenizer: the shared BpeTokenizer.
      sources, references: the dev subset (lists of str, same length).
      monitor: the run's TrainingMonitor (it owns the validation writer).
      batch_size: sentences per decoding batch.
      num_examples: example translations shown as text.
      max_extra_length: output limit = input length + this.
    """

    def __init__(self, tokenizer, sources, references, monitor, batch_size: int = 64,
                 num_examples: int = 5, max_extra_length: int = 50):
        super().__init__()
        if len(sources) != len(references):
            raise ValueError(f"{len(sources)} dev sources but {len(references)} references")
        self.tokenizer = tokenizer
        self.sources, self.references = list(sources), list(references)
        self.monitor = monitor
        self.batch_size = batch_size
        self.num_examples = num_examples
        self.decoding = DecodingConfig(beam_size=1, max_extra_length=max_extra_length)
        self._translator = None
        self.history: list[tuple[int, float]] = []

    def translate(self) -> list[str]:
        from transformer_tf.export.translator import Translator
        if self._translator is None:
            self._translator = Translator(self.model, self.tokenizer, self.decoding)
        hypotheses = []
        for start in range(0, len(self.sources), self.batch_size):
            batch = tf.constant(self.sources[start:start + self.batch_size])
            out = self._translator.translate(batch)["translation"].numpy()
            hypotheses += [t.decode("utf-8", errors="replace") for t in out]
        return hypotheses

    def on_epoch_end(self, epoch, logs=None):
        if not self.sources:
            return
        hypotheses = self.translate()
        bleu = float(corpus_bleu(hypotheses, self.references))
        step = int(self.model.optimizer.iterations.numpy())
        self.history.append((step, bleu))
        if logs is not None:
            logs["val_bleu"] = bleu
        rows = ["| source | reference | hypothesis |", "| --- | --- | --- |"] + [
            f"| {s} | {r} | {h} |" for s, r, h in
            zip(self.sources, self.references, hypotheses)][: self.num_examples]
        self.monitor.write_validation({"bleu": bleu}, {"examples": "\n".join(rows)})
        logger.info("step %d: validation BLEU %.2f on %d sentences", step, bleu,
                    len(self.sources))
