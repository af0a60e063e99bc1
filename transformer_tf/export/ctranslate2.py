"""CTranslate2 export: a trained Transformer as a CTranslate2 model (a second CPU serving
target, and an exact yardstick for our own serving path).

The model is written through ctranslate2's specification API (`ctranslate2.specs`), weight
by weight, so nothing depends on a converter for another toolkit. What is mapped, and how:

  ours                                     CTranslate2 spec
  ---------------------------------------  -------------------------------------------------
  post-norm (paper) / pre-norm + final LN  pre_norm=False / pre_norm=True (+ stack layer_norm)
  W_E * sqrt(d_model) (scale_embeddings)   embeddings + scale_embeddings flag
  sinusoidal PE, sin/cos INTERLEAVED       position_encodings.encodings = our table, written
                                           out (CT2's built-in table puts all sines first)
  learned positions                        position_encodings.encodings = the learned table
  q/k/v kernels (d_model, h, d_k)          self-attention: one fused [3 h d_k, d_model] matrix
                                           (Q rows, then K, then V; head-major inside each);
                                           cross-attention: Q, then fused [K; V]
  W^O (h, d_v, d_model)                    linear [d_model, h d_v]
  FFN inner/outer Dense                    ffn.linear_0 / ffn.linear_1 (ReLU)
  LayerNorm(epsilon)                       config layer_norm_epsilon (CT2's own default is
                                           1e-5 for LayerNorms with a beta; ours is 1e-6)
  pre-softmax x W_E^T (no bias)            decoder.projection = W_E, bias -1e9 at PAD and BOS
                                           (our search never emits them either)
  ids pad 0 / unk 1 / bos 2 / eos 3        shared vocabulary = the sentencepiece pieces in id
                                           order; decoder start <s>; add_source_eos (source =
                                           pieces + </s>, as ours)

Not convertible (clear error): other model families (ConvS2S), restricted self-attention
(`attention_window`), the source cursor (`source_cursor`, a parsing option) and d_k != d_v
(CT2 has one head size).

The export directory holds CT2's model.bin, config.json, shared_vocabulary.json, plus
bpe.model (the run's sentencepiece model) and transformer_tf.json (our decoding settings and
source length limit), which `CTranslate2Translator` reads to run it text in, text out. It
is a version directory NAME/VERSION written by the rules of `export.versions` (as the
SavedModel export's): written aside and swapped in, `overwrite` replacing only a
CTranslate2 model, never inside a training run.

Length penalty: CT2 divides a finished hypothesis' log-probability by length^lp, length
counted in tokens including the EOS (CT2 keeps it in the hypothesis while searching), as our
length is; ours
is GNMT's ((5 + length) / 6)^alpha. The two agree in their slope at a typical output length
n when lp = alpha * n / (5 + n); `ct2_length_penalty` gives that value (n = 15, Multi30k
German with EOS: lp = 0.45 for alpha 0.6). CT2 also stops a sentence once beam_size
hypotheses have finished (patience 1), ours once no alive hypothesis can still win.
"""
from __future__ import annotations

import json
import pathlib
from typing import Sequence

import numpy as np

from transformer_tf.config import BOS_ID, EOS_ID, PAD_ID, UNK_ID, DecodingConfig
from transformer_tf.export.versions import CTRANSLATE2, prepare_out_dir, write_version

# TensorFlow is imported inside the functions that need it: to write a model, and for the
# serving rule's blank test (`CTranslate2Translator` runs no TF op).

INFO_FILE = "transformer_tf.json"
BPE_MODEL = "bpe.model"
FORBIDDEN_LOGIT = -1e9  # the bias written at PAD and BOS (as our search adds to the logits)
TYPICAL_OUTPUT_LENGTH = 15  # target tokens with EOS, Multi30k German test 2016 (about 14 + 1)
_ASCII_SPACE = " \t\n\r\f\v"


def _processor(model_proto: bytes):
    """A sentencepiece processor (as transformer_tf.data.bpe.python_processor, without
    importing TensorFlow with it)."""
    import sentencepiece

    return sentencepiece.SentencePieceProcessor(model_proto=model_proto)


def ct2_length_penalty(alpha: float, typical_length: int = TYPICAL_OUTPUT_LENGTH) -> float:
    """CT2's `length_penalty` closest to our GNMT ((5 + n) / 6)^alpha around length n:
    d/dn log n^lp = lp / n equals d/dn log ((5 + n) / 6)^alpha = alpha / (5 + n)."""
    return alpha * typical_length / (5.0 + typical_length)


def _require_ctranslate2():
    try:
        import ctranslate2  # the package, not this module (absolute import)
    except ImportError as error:
        raise ImportError("ctranslate2: not installed; the CTranslate2 export needs it: "
                          "pip install 'ctranslate2==4.8.*' (the [ctranslate2] extra)") from error
    return ctranslate2


def check_convertible(family: str, config) -> None:
    """Raises ValueError naming why a model cannot be written as a CTranslate2 Transformer."""
    if family != "transformer":
        raise ValueError(
            f"model family {family!r} cannot be exported to CTranslate2: only the Transformer "
            "family is convertible (CTranslate2 has no convolutional sequence-to-sequence "
            "model)")
    if config.attention_window is not None:
        raise ValueError(
            f"attention_window={config.attention_window}: CTranslate2 has no restricted "
            "self-attention over a window in encoder-decoder models")
    if config.source_cursor:
        raise ValueError(
            "source_cursor=True: CTranslate2's decoder has no input from the encoder output "
            "at a cursor; serve this model with its SavedModel")
    if config.resolved_key_dim != config.resolved_value_dim:
        raise ValueError(
            f"key_dim={config.resolved_key_dim} != value_dim={config.resolved_value_dim}: "
            "CTranslate2 uses one head size for keys and values")


# ---------------------------------------------------------------------------------- weights
def _np(variable) -> np.ndarray:
    return np.asarray(variable.numpy(), dtype=np.float32)


def _projection(dense):
    """A q/k/v EinsumDense (kernel (d_model, h, depth), bias (h, depth)) as CT2's
    (weight [h * depth, d_model], bias [h * depth]); heads stay head-major."""
    kernel = _np(dense.kernel)
    d_in = kernel.shape[0]
    weight = kernel.reshape(d_in, -1).T
    bias = _np(dense.bias).reshape(-1) if dense.bias is not None else np.zeros(
        weight.shape[0], np.float32)
    return weight, bias


def _set_linear(spec, weight, bias) -> None:
    spec.weight = np.ascontiguousarray(weight, dtype=np.float32)
    spec.bias = np.ascontiguousarray(bias, dtype=np.float32)


def _set_fused(spec, denses) -> None:
    pairs = [_projection(dense) for dense in denses]
    _set_linear(spec, np.concatenate([w for w, _ in pairs]), np.concatenate([b for _, b in pairs]))


def _set_output(spec, attention) -> None:
    dense = attention._output_dense
    kernel = _np(dense.kernel)  # (h, d_v, d_model)
    bias = _np(dense.bias) if dense.bias is not None else np.zeros(kernel.shape[-1], np.float32)
    _set_linear(spec, kernel.reshape(-1, kernel.shape[-1]).T, bias)


def _set_layer_norm(spec, norm) -> None:
    spec.gamma = _np(norm.gamma)
    spec.beta = _np(norm.beta)


def _set_ffn(spec, layer) -> None:
    _set_layer_norm(spec.layer_norm, layer.feed_forward_residual.layer_norm)
    for linear, dense in ((spec.linear_0, layer.feed_forward.inner),
                          (spec.linear_1, layer.feed_forward.outer)):
        _set_linear(linear, _np(dense.kernel).T, _np(dense.bias))


def _set_self_attention(spec, layer) -> None:
    attention = layer.self_attention
    _set_layer_norm(spec.layer_norm, layer.self_attention_residual.layer_norm)
    _set_fused(spec.linear[0], [attention._query_dense, attention._key_dense,
                                attention._value_dense])
    _set_output(spec.linear[1], attention)


def _set_cross_attention(spec, layer) -> None:
    attention = layer.cross_attention
    _set_layer_norm(spec.layer_norm, layer.cross_attention_residual.layer_norm)
    _set_fused(spec.linear[0], [attention._query_dense])
    _set_fused(spec.linear[1], [attention._key_dense, attention._value_dense])
    _set_output(spec.linear[2], attention)


def _position_table(positions, config) -> np.ndarray:
    from transformer_tf.layers.position_encoding import sinusoidal_table

    if config.position_encoding == "sinusoidal":
        return np.asarray(sinusoidal_table(config.max_position, config.d_model).numpy(),
                          dtype=np.float32)
    return _np(positions.table)


def vocabulary(model_proto: bytes) -> list[str]:
    """The sentencepiece pieces in id order (CT2 token i is our id i)."""
    processor = _processor(model_proto)
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def transformer_spec(model, tokens: Sequence[str]):
    """A validated `ctranslate2.specs.TransformerSpec` holding `model`'s weights.

    Args:
      model: a built `transformer_tf.models.transformer.Transformer`.
      tokens: the vocabulary (source and target share it), `vocabulary(...)`.
    """
    ctranslate2 = _require_ctranslate2()
    specs = ctranslate2.specs
    c = model.config
    check_convertible(model.family, c)
    if len(tokens) != c.vocab_size or len(tokens) != c.resolved_target_vocab_size:
        raise ValueError(f"the tokenizer has {len(tokens)} pieces but the model's vocabulary "
                         f"sizes are {c.vocab_size} (source), {c.resolved_target_vocab_size} "
                         "(target)")
    pre_norm = c.norm_position == "pre"
    head_dim = c.resolved_key_dim
    head_dim = None if head_dim * c.num_heads == c.d_model else head_dim
    encoder = specs.TransformerEncoderSpec(c.num_layers, c.num_heads, pre_norm=pre_norm,
                                           head_dim=head_dim)
    decoder = specs.TransformerDecoderSpec(c.resolved_num_decoder_layers, c.num_heads,
                                           pre_norm=pre_norm, head_dim=head_dim)
    spec = specs.TransformerSpec(encoder, decoder)

    encoder.embeddings[0].weight = _np(model.source_embedding.embeddings)
    decoder.embeddings.weight = _np(model.target_embedding.embeddings)
    encoder.scale_embeddings = decoder.scale_embeddings = bool(c.scale_embeddings)
    encoder.position_encodings.encodings = _position_table(model.source_positions, c)
    decoder.position_encodings.encodings = _position_table(model.target_positions, c)
    forbidden = np.zeros(c.resolved_target_vocab_size, np.float32)
    forbidden[[PAD_ID, BOS_ID]] = FORBIDDEN_LOGIT
    _set_linear(decoder.projection, _np(model.output_projection.embeddings), forbidden)

    for layer_spec, layer in zip(encoder.layer, model.encoder_layers):
        _set_self_attention(layer_spec.self_attention, layer)
        _set_ffn(layer_spec.ffn, layer)
    for layer_spec, layer in zip(decoder.layer, model.decoder_layers):
        _set_self_attention(layer_spec.self_attention, layer)
        _set_cross_attention(layer_spec.attention, layer)
        _set_ffn(layer_spec.ffn, layer)
    if pre_norm:
        _set_layer_norm(encoder.layer_norm, model.encoder_final_norm)
        _set_layer_norm(decoder.layer_norm, model.decoder_final_norm)

    config = spec.config
    config.layer_norm_epsilon = float(c.layer_norm_epsilon)
    config.unk_token, config.bos_token = tokens[UNK_ID], tokens[BOS_ID]
    config.eos_token, config.decoder_start_token = tokens[EOS_ID], tokens[BOS_ID]
    config.add_source_eos = True
    spec.register_source_vocabulary(list(tokens))
    spec.register_target_vocabulary(list(tokens))
    spec.validate()
    return spec


# ---------------------------------------------------------------------------------- writing
def export_ctranslate2(model, model_proto: bytes, out_dir, decoding: DecodingConfig,
                       overwrite: bool = False, quantization: str | None = None,
                       info: dict | None = None, model_dir=None) -> pathlib.Path:
    """Write `model` as a CTranslate2 model directory at `out_dir` (atomically).

    Args:
      model: a built Transformer with its trained weights.
      model_proto: the run's sentencepiece model (copied beside the model as bpe.model).
      out_dir: the version directory NAME/VERSION (`export.versions`).
      decoding: the run's search settings, recorded for `CTranslate2Translator`.
      overwrite: replace an existing `out_dir` that holds a CTranslate2 model.
      quantization: CT2 weight type (None keeps float32; e.g. "int8").
      info: extra fields for transformer_tf.json (checkpoint, preset).
      model_dir: the run exported (`out_dir` may not be inside it).

    Returns:
      `out_dir`.
    """
    from transformer_tf.data.wordpiece import is_wordpiece_model

    if is_wordpiece_model(model_proto):
        raise ValueError("this run uses word pieces; the CTranslate2 export (and its "
                         "sentencepiece tokenization) supports sentencepiece BPE runs only")
    prepare_out_dir(out_dir, CTRANSLATE2, overwrite, model_dir)  # before the conversion
    spec = transformer_spec(model, vocabulary(model_proto))
    spec.optimize(quantization=quantization)  # also aliases the shared embedding matrices
    description = {"family": model.family, "model": model.config.get_config(),
                   "decoding": decoding.get_config(),
                   "max_source_tokens": model.max_source_length - 1,
                   "max_target_length": model.max_target_length,
                   "quantization": quantization or "float32", **(info or {})}

    def write(tmp: pathlib.Path) -> None:
        tmp.mkdir()
        spec.save(str(tmp))
        (tmp / BPE_MODEL).write_bytes(model_proto)
        (tmp / INFO_FILE).write_text(json.dumps(description, indent=2, sort_keys=True))

    return write_version(out_dir, write, CTRANSLATE2, overwrite, model_dir)


def export_model_dir_ctranslate2(model_dir, out_dir, checkpoint=None, overwrite: bool = False,
                                 quantization: str | None = None,
                                 decoding: DecodingConfig | None = None) -> pathlib.Path:
    """Export a training run (`checkpoint`, else the one the run is used with:
    `loading.default_checkpoint`) as a CTranslate2 model, recording `decoding` (None: the
    run's own settings) for the runner. `out_dir` (`export.versions`' rules), the family
    and the model's convertibility are checked before any weight is read."""
    from transformer_tf.inference.loading import load_trained
    from transformer_tf.rundir import model_dir as model_dir_lib

    prepare_out_dir(out_dir, CTRANSLATE2, overwrite, model_dir)
    run = model_dir_lib.read_run_config(model_dir)
    check_convertible(run.family, run.model)
    _require_ctranslate2()
    model, tokenizer, run, path = load_trained(model_dir, checkpoint, decoding)
    return export_ctranslate2(model, tokenizer.model_proto, out_dir, run.decoding, overwrite,
                              quantization, info={"checkpoint": str(path), "preset": run.preset},
                              model_dir=model_dir)


# ---------------------------------------------------------------------------------- running
class CTranslate2Translator:
    """Text in, text out over an exported CTranslate2 model, with the same source rule as
    our serving signature (strip, sentencepiece, at most max_source_tokens pieces, EOS)
    and the same output rule (ids to text with sentencepiece, "" for empty input).

    Args:
      model_dir: a directory written by `export_ctranslate2`.
      intra_threads: CT2's threads per translation (the benchmark gives both engines the
        same number).
      compute_type: CT2 compute type ("default" keeps the saved weight type).
      inter_threads: CT2 workers; with N > 1 a call's sentences are cut into N
        sub-batches (`max_batch_size`) that the workers translate at the same time, CT2's
        counterpart of our `DecodingConfig.lanes`.
    """

    def __init__(self, model_dir, intra_threads: int = 0, compute_type: str = "default",
                 inter_threads: int = 1):
        ctranslate2 = _require_ctranslate2()
        model_dir = pathlib.Path(model_dir)
        self.info = json.loads((model_dir / INFO_FILE).read_text())
        self.decoding = DecodingConfig.from_config(self.info["decoding"])
        self.max_source_tokens = int(self.info["max_source_tokens"])
        self.max_target_length = int(self.info["max_target_length"])
        self.processor = _processor((model_dir / BPE_MODEL).read_bytes())
        self.inter_threads = inter_threads
        self.translator = ctranslate2.Translator(str(model_dir), device="cpu",
                                                 intra_threads=intra_threads,
                                                 inter_threads=inter_threads,
                                                 compute_type=compute_type)

    def source_tokens(self, sentences: Sequence[str]) -> list[list[str]]:
        """Pieces per sentence, truncated to max_source_tokens (CT2 appends </s>); blank
        sentences (transformer_tf.data.source_text.is_blank, the serving rule) get []."""
        from transformer_tf.data.source_text import (
            is_blank,  # loads TensorFlow, idle here
        )

        ids = self.processor.encode([s.strip(_ASCII_SPACE) for s in sentences])
        return [[] if is_blank(sentence) else
                [self.processor.id_to_piece(i) for i in row[:self.max_source_tokens]]
                for sentence, row in zip(sentences, ids)]

    def translate_tokens(self, tokens: list[list[str]], beam_size: int | None = None,
                         length_penalty: float | None = None,
                         max_extra_length: int | None = None, **options) -> list[list[str]]:
        """CT2's search on piece lists, with our output limit per sentence: source pieces +
        EOS + max_extra_length tokens, EOS included, at most max_target_length.
        `length_penalty` defaults to `ct2_length_penalty(alpha)`; `options` go to
        `translate_batch`. Rows with no piece get [] (our rule for empty input).

        CT2 takes one limit per batch (the largest is used); the rare rows that reach it
        beyond their own limit are searched again alone with theirs."""
        beam_size = beam_size or self.decoding.beam_size
        if length_penalty is None:
            length_penalty = ct2_length_penalty(self.decoding.alpha)
        extra = self.decoding.max_extra_length if max_extra_length is None else max_extra_length
        limits = [min(len(row) + 1 + extra, self.max_target_length) for row in tokens]
        search = dict(beam_size=beam_size, length_penalty=length_penalty, max_input_length=0,
                      **options)
        outputs = [[] for _ in tokens]
        real = [i for i, row in enumerate(tokens) if row]
        if real and self.inter_threads > 1 and "max_batch_size" not in options:
            search["max_batch_size"] = -(-len(real) // self.inter_threads)
        if real:
            results = self.translator.translate_batch(
                [tokens[i] for i in real], max_decoding_length=max(limits[i] for i in real),
                **search)
            for i, result in zip(real, results):
                outputs[i] = result.hypotheses[0]
        for i in real:
            if len(outputs[i]) >= limits[i]:  # may have gone past its own limit
                outputs[i] = self.translator.translate_batch(
                    [tokens[i]], max_decoding_length=limits[i], **search)[0].hypotheses[0]
        return outputs

    def detokenize(self, tokens: list[list[str]]) -> list[str]:
        return [self.processor.decode([self.processor.piece_to_id(t) for t in row])
                for row in tokens]

    def translate(self, sentences: Sequence[str], **search) -> list[str]:
        """Sentences to translations (see `translate_tokens` for the search options)."""
        return self.detokenize(self.translate_tokens(self.source_tokens(sentences), **search))
