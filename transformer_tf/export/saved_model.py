"""SavedModel export for TF Serving.

An export directory `saved_models/<name>/<version>/` holds a SavedModel whose root is a
`Translator` (transformer_tf.inference.translator) with three signatures:

  serving_default  text tf.string [None] -> translation tf.string [None], score float32 [None]
  translate_nbest  text tf.string [None] -> translations tf.string [None, n], scores float32 [None, n]
  translate_ids    source_ids int32 [None, None] -> ids int32 [None, None], length, score

The sentencepiece model is embedded in the graph (see BpeTokenizer), so raw text goes in
and out; loading it needs the tensorflow-text ops registered (TF Serving links them in;
Python consumers `import tensorflow_text`), for every signature, since the whole graph is
loaded. The ids-only variant (`ids_only=True`) has no tokenizer in its graph, so a server
with core TF ops only can load it:

  serving_default, translate_ids   source_ids int32 [None, None] -> ids, length, score

and the client tokenizes with `assets.extra/bpe.model` (sentencepiece). `assets.extra/`
also records the family, model and decoding configuration (`variant`: "text" or "ids"),
read back by transformer_tf.inference.loading, and holds TF Serving's warm-up requests
(`tf_serving_warmup_requests`, transformer_tf.export.warmup), replayed by TF Serving when
it loads the version.

A parsing model is exported as a `Parser` (transformer_tf.inference.parser) by
`export_parser`: serving_default (`parse`) takes sentences and returns bracketed trees,
`translate` the raw linearised output, `translate_ids` the ids.

The export is written to a temporary sibling directory and renamed into place, so a
server watching `saved_models/<name>/` never sees a half-written version; with overwrite,
the old version is renamed aside first and deleted only once the new one is in place, so a
failing export leaves the old version as it was.
"""
from __future__ import annotations

import json
import pathlib
import shutil

import tensorflow as tf

from transformer_tf.export.warmup import (
    WARMUP_FILE, as_source_ids, warmup_batches, write_warmup_requests)
from transformer_tf.inference.loading import BPE_MODEL, EXPORT_INFO, EXTRA_DIR, load_trained
from transformer_tf.inference.parser import Parser
from transformer_tf.inference.translator import Translator
from transformer_tf.training.model_dir import read_run_config


def export_saved_model(translator: Translator, out_dir, overwrite: bool = False,
                       info: dict | None = None, ids_only: bool = False,
                       warmup: bool = True) -> pathlib.Path:
    """Write `translator` as a SavedModel at `out_dir` (atomically); returns the path.
    `ids_only`: the core-ops variant (ids signatures only, no tokenizer in the graph);
    `warmup`: write TF Serving warm-up requests (`export.warmup`)."""
    return _export(translator, out_dir, overwrite, info, ids_only, parser=None,
                   warmup=warmup)


def export_parser(parser: Parser, out_dir, overwrite: bool = False,
                  info: dict | None = None, warmup: bool = True) -> pathlib.Path:
    """Write a parsing model's `Parser` as a SavedModel at `out_dir` (atomically)."""
    return _export(parser.translator, out_dir, overwrite, {"task": "parsing", **(info or {})},
                   ids_only=False, parser=parser, warmup=warmup)


def _export(translator: Translator, out_dir, overwrite: bool, info: dict | None,
            ids_only: bool, parser: Parser | None, warmup: bool) -> pathlib.Path:
    out_dir = pathlib.Path(out_dir)
    check_out_dir(out_dir, overwrite)
    tmp = out_dir.parent / f".{out_dir.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        _write(translator, tmp, info, ids_only, parser, warmup)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = out_dir.parent / f".{out_dir.name}.old"
    shutil.rmtree(old, ignore_errors=True)
    if out_dir.exists():
        out_dir.rename(old)
    try:
        tmp.rename(out_dir)
    except OSError:
        if old.exists():
            old.rename(out_dir)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return out_dir


def check_out_dir(out_dir, overwrite: bool) -> None:
    """Raises FileExistsError if `out_dir` cannot become an export directory: a file is
    in the way, or a non-empty directory and not `overwrite`."""
    out_dir = pathlib.Path(out_dir)
    for path in (out_dir, *out_dir.parents):
        if path.exists() and not path.is_dir():
            raise FileExistsError(
                f"{path}: is a file, not a directory; --out names the version directory "
                "to create, e.g. saved_models/NAME/1")
    if out_dir.exists() and any(out_dir.iterdir()) and not overwrite:
        raise FileExistsError(f"{out_dir} exists and is not empty; choose a new version "
                              "number or pass --overwrite")


def _write(translator: Translator, tmp: pathlib.Path, info: dict | None,
           ids_only: bool, parser: Parser | None = None, warmup: bool = True) -> None:
    if parser is not None:
        module = parser
        signatures = {"serving_default": parser.parse, "translate": translator.translate,
                      "translate_ids": translator.translate_ids}
    elif ids_only:
        module = translator.ids_only()
        signatures = {"serving_default": module.translate_ids,
                      "translate_ids": module.translate_ids}
    else:
        module = translator
        signatures = {"serving_default": translator.translate,
                      "translate_nbest": translator.translate_nbest,
                      "translate_ids": translator.translate_ids}
    tf.saved_model.save(module, str(tmp), signatures=signatures)
    extra = tmp / EXTRA_DIR
    extra.mkdir()
    (extra / BPE_MODEL).write_bytes(translator.tokenizer.model_proto)
    model = translator.model
    description = {"family": model.family, "model": model.config.get_config(),
                   "decoding": translator.decoding.get_config(), "n_best": translator.n_best,
                   "max_source_tokens": translator.max_source_tokens,
                   "variant": "ids" if ids_only else "text",
                   **(info or {})}
    (extra / EXPORT_INFO).write_text(json.dumps(description, indent=2, sort_keys=True))
    if warmup:
        proto = translator.tokenizer.model_proto
        batches = warmup_batches(proto, translator.decoding, model.max_source_length)
        requests = ([{"source_ids": as_source_ids(proto, batch)} for batch in batches]
                    if ids_only else [{"text": list(batch)} for batch in batches])
        write_warmup_requests(extra / WARMUP_FILE, requests)


def export_model_dir(model_dir, out_dir, checkpoint=None, overwrite: bool = False,
                     ids_only: bool = False, parser: bool | None = None, warmup: bool = True,
                     **decoding_overrides) -> pathlib.Path:
    """Export a training run (averaged checkpoint if present) with its decoding settings,
    where `decoding_overrides` (beam_size=, alpha=, max_extra_length=, grammar=, stopping=,
    chunk_size=, lanes=, xla=; None = keep) do not replace them; `ids_only`: the core-ops
    variant;
    `parser`: export as a Parser (sentences in, trees out); None: when the run was
    trained to decode with the "tree" grammar (the parsing presets; whatever `grammar=`
    overrides it with), unless `ids_only`."""
    check_out_dir(out_dir, overwrite)  # before the minutes of loading and tracing
    if parser is None:
        parser = read_run_config(model_dir).decoding.grammar == "tree" and not ids_only
    model, tokenizer, run, path = load_trained(model_dir, checkpoint, **decoding_overrides)
    translator = Translator(model, tokenizer, run.decoding)
    info = {"checkpoint": str(path), "preset": run.preset}
    if parser:
        return export_parser(Parser(translator), out_dir, overwrite, info=info, warmup=warmup)
    return export_saved_model(translator, out_dir, overwrite, info=info, ids_only=ids_only,
                              warmup=warmup)
