"""Translating many lines: length-sorted batches through a SavedModel or a checkpoint."""
from __future__ import annotations

import dataclasses
import logging
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the sentencepiece ops SavedModels need)

from transformer_tf.config import DecodingConfig
from transformer_tf.data.bpe import python_processor
from transformer_tf.data.source_text import is_blank
from transformer_tf.inference import loading
from transformer_tf.inference.translator import Translator
from transformer_tf.runtime.progress import counting

logger = logging.getLogger(__name__)

# text tf.string [N] -> (translations [N, n] list of str, scores [N, n] float)
BatchFn = Callable[[list], "tuple[list[list[str]], np.ndarray]"]


@dataclasses.dataclass
class LoadedTranslator:
    """A ready-to-call translator and what it needs to warn about long inputs."""

    translate_batch: BatchFn
    bpe_model_proto: bytes
    max_source_tokens: int
    n_best: int
    # What the batch function's methods belong to: bound tf.functions only hold their
    # instance weakly, so the Translator (or loaded SavedModel) must be kept alive here.
    owner: object = None
    max_batch_rows: int = 0  # the most rows a call accepts (an export's limit); 0: any


def _decode(strings) -> list[str]:
    return [s.decode("utf-8", errors="replace") for s in strings]


def _batch_fn(translate, translate_nbest, n_best: int) -> BatchFn:
    """A BatchFn over a Translator's methods or a SavedModel's signatures (same outputs)."""
    def translate_batch(lines):
        text = tf.constant(lines, tf.string)
        if n_best == 1:
            out = translate(text)
            return [[t] for t in _decode(out["translation"].numpy())], out["score"].numpy()[:, None]
        out = translate_nbest(text)
        texts = [_decode(row)[:n_best] for row in out["translations"].numpy()]
        return texts, out["scores"].numpy()[:, :n_best]
    return translate_batch


def from_translator(translator, n_best: int = 1) -> LoadedTranslator:
    """A LoadedTranslator over an in-memory `Translator`."""
    return LoadedTranslator(_batch_fn(translator.translate, translator.translate_nbest, n_best),
                            translator.tokenizer.model_proto, translator.max_source_tokens,
                            n_best, owner=translator)


def load_translator(model: str | None = None, model_dir: str | None = None,
                    checkpoint: str | None = None, decoding: DecodingConfig | None = None,
                    n_best: int = 1,
                    ensemble: Sequence[str] | None = None) -> LoadedTranslator:
    """From a SavedModel directory (`model`), a training run (`model_dir`) or training
    runs decoded together (`ensemble`: `loading.load_ensemble`), searching with
    `decoding` (None: the source's own, `loading.source_decoding`) for `n_best`
    hypotheses per sentence (1 <= n_best <= decoding.beam_size, the caller's to check:
    `DecodingConfig.check_n_best`).

    A SavedModel's own signatures are used when `decoding` is the one it was exported
    with; otherwise the model is rebuilt from its variables with `decoding`.
    """
    loading.check_one_source(model, model_dir, ensemble)
    if model_dir is not None or ensemble is not None:
        net, tokenizer, run, _ = (
            loading.load_trained(model_dir, checkpoint, decoding) if model_dir is not None
            else loading.load_ensemble(ensemble, decoding))
        return from_translator(Translator(net, tokenizer, run.decoding, n_best=n_best), n_best)
    info = loading.read_export_info(model)
    exported = DecodingConfig.from_config(info["decoding"])
    decoding = decoding or exported
    # The ids-only variant has no text signatures: the model is rebuilt around its weights.
    if decoding != exported or n_best > info.get("n_best", 1) or info.get("variant") == "ids":
        return from_translator(
            loading.translator_from_saved_model(model, decoding, n_best=n_best), n_best)
    loaded = loading.load_saved_model(model)
    proto = loading.read_bpe_model(model)
    max_source_tokens = exported_max_source_tokens(info)
    serving, nbest = loaded.signatures["serving_default"], loaded.signatures["translate_nbest"]
    return LoadedTranslator(_batch_fn(lambda text: serving(text=text),
                                      lambda text: nbest(text=text), n_best),
                            proto, max_source_tokens, n_best, owner=loaded,
                            max_batch_rows=info.get("max_batch_rows", 0))


def exported_max_source_tokens(info: dict) -> int:
    """The most source pieces (EOS aside) an export's model reads, from its export info
    (`loading.read_export_info`)."""
    # Exports written before "max_source_tokens" was recorded were all Transformers.
    return info.get("max_source_tokens", info["model"].get("max_position", 0) - 1)


def warn_long_sources(bpe_model_proto: bytes, max_source_tokens: int, lines: Sequence[str],
                      first_line: int = 1) -> list[int]:
    """Warn, naming its input line number (`first_line` for lines[0]), about each line
    longer than the model's `max_source_tokens` pieces (the model truncates it); returns
    each line's length in pieces."""
    processor = python_processor(bpe_model_proto)
    lengths = [len(processor.encode(line)) for line in lines]
    for number, length in enumerate(lengths, start=first_line):
        if length > max_source_tokens:
            logger.warning("line %d: %d BPE tokens, truncated to the model's %d", number,
                           length, max_source_tokens)
    return lengths


def batch_rows(batch_size: int, max_batch_rows: int) -> int:
    """Rows per call: `batch_size`, capped at a model's `max_batch_rows` (0: no cap)."""
    return min(batch_size, max_batch_rows) if max_batch_rows > 0 else batch_size


def translate_splitting(translate_batch: BatchFn, lines: list) -> tuple[list, np.ndarray]:
    """`translate_batch(lines)`; a batch that does not fit in memory
    (tf.errors.ResourceExhaustedError) is translated as its two halves instead, each split
    again while it does not fit, down to one line (which then raises). Same outputs:
    (per line its hypotheses, scores float [len(lines), n_best])."""
    try:
        return translate_batch(lines)
    except tf.errors.ResourceExhaustedError:
        if len(lines) == 1:
            raise
    half = len(lines) // 2
    logger.warning("a batch of %d sentences did not fit in memory: translating it as %d and "
                   "%d", len(lines), half, len(lines) - half)
    first_texts, first_scores = translate_splitting(translate_batch, lines[:half])
    rest_texts, rest_scores = translate_splitting(translate_batch, lines[half:])
    return list(first_texts) + list(rest_texts), np.concatenate([first_scores, rest_scores])


def translate_lines(translator: LoadedTranslator, lines: Sequence[str], batch_size: int = 64,
                    progress: bool = True, first_line: int = 1
                    ) -> tuple[list[list[str]], np.ndarray]:
    """Translate `lines` in batches of similar length; results in the input order.

    Blank lines (`source_text.is_blank`: empty, or only Unicode whitespace, control and
    format characters) give "" with score 0 without reaching the model. A batch is at most
    the translator's `max_batch_rows` (an export's request limit), whatever `batch_size`;
    one that does not fit in memory is split (`translate_splitting`). Lines longer than
    the model's positions are truncated by the model; each is reported with its line
    number (`first_line` for lines[0]) as a warning.

    Returns:
      (translations: per line a list of n_best strings, scores float [len(lines), n_best]).
    """
    lengths = warn_long_sources(translator.bpe_model_proto, translator.max_source_tokens,
                                lines, first_line)
    outputs: list = [[""] * translator.n_best if is_blank(line) else None for line in lines]
    order = np.array([i for i in np.argsort(lengths, kind="stable") if outputs[i] is None],
                     dtype=np.int64)
    scores = np.zeros((len(lines), translator.n_best), np.float32)
    batch_size = batch_rows(batch_size, translator.max_batch_rows)
    with counting(len(lines), verb="translated", unit="sentences", bar_unit="sent",
                  enabled=progress) as bar:
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            texts, chunk_scores = translate_splitting(translator.translate_batch,
                                                      [lines[i] for i in chunk])
            for row, index in enumerate(chunk):
                outputs[index] = texts[row]
                scores[index] = chunk_scores[row]
            bar.update(len(chunk))
        bar.update(len(lines) - len(order))
    return outputs, scores
