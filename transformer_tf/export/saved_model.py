"""SavedModel export for TF Serving.

An export directory `saved_models/<name>/<version>/` holds a SavedModel whose root is a
`Translator` (transformer_tf.inference.translator) with five signatures:

  serving_default  text tf.string [None] -> translation tf.string [None], score float32 [None]
  translate_nbest  text tf.string [None] -> translations tf.string [None, n], scores float32 [None, n]
  translate_ids    source_ids int32 [None, None] -> ids int32 [None, None], length, score
  score            source, target tf.string [None] -> log_prob float32 [None],
                   token_scores float32 [None, None], token_ids int32 [None, None],
                   length int32 [None], truncated bool [None] (forced decoding)
  score_ids        source_ids, target_ids int32 [None, None] -> the same outputs

The sentencepiece model is embedded in the graph (see BpeTokenizer), so raw text goes in
and out; loading it needs the tensorflow-text ops registered (TF Serving links them in;
Python consumers `import tensorflow_text`), for every signature, since the whole graph is
loaded. The ids-only variant (`ids_only=True`) has no tokenizer in its graph, so a server
with core TF ops only can load it:

  serving_default, translate_ids   source_ids int32 [None, None] -> ids, length, score
  score_ids                        source_ids, target_ids int32 [None, None] -> log_prob, ...

and the client tokenizes with `assets.extra/bpe.model` (sentencepiece). `assets.extra/`
also records the family, model and decoding configuration (`variant`: "text" or "ids"),
read back by transformer_tf.inference.loading, and holds TF Serving's warm-up requests
(`tf_serving_warmup_requests`, transformer_tf.export.warmup), replayed by TF Serving when
it loads the version.

`precision` ("float32", the default, or "bfloat16": `export.precision`) is the
arithmetic the signatures run in. A bfloat16 export keeps the model's variables in
float32 and its laid-out inference kernels in bfloat16, multiplies in bfloat16 and keeps
softmax, layer norm, log-probabilities and the beam's scores in float32; its signatures
are the float32 export's. assets.extra/transformer_tf.json records it as "precision"
(the compute dtype of the exported model).

Training runs decoded together (`export_ensemble`, a `models.ensemble.Ensemble` of runs
that share one tokenizer) are exported the same way, with the same signatures.

A parsing model is exported as a `Parser` (transformer_tf.inference.parser) by
`export_parser`: serving_default (`parse`) takes sentences and returns bracketed trees,
`translate` the raw linearised output, `translate_ids` the ids.

Where an export may write, and how it replaces a version, is `export.versions`: `out_dir`
is `saved_models/<name>/<integer version>` outside any training run; the export is written
to a temporary sibling directory and renamed into place, so a server watching
`saved_models/<name>/` never sees a half-written version; `overwrite` replaces only a
SavedModel, renamed aside first and deleted once the new one is in place, so a failing or
killed export loses no version.

Every signature refuses a request of more than `max_batch_rows` rows (default
DEFAULT_MAX_BATCH_ROWS; 0: no limit) with an InvalidArgument error naming the limit,
recorded as `max_batch_rows` in assets.extra/transformer_tf.json.
"""
from __future__ import annotations

import json
import pathlib

import tensorflow as tf

from transformer_tf.config import DEFAULT_MAX_BATCH_ROWS, DecodingConfig
from transformer_tf.export.precision import check_export_precision
from transformer_tf.export.versions import SAVED_MODEL, prepare_out_dir, write_version
from transformer_tf.export.warmup import (
    WARMUP_FILE,
    as_source_ids,
    warmup_batches,
    write_warmup_requests,
)
from transformer_tf.inference.loading import (
    BPE_MODEL,
    EXPORT_INFO,
    EXTRA_DIR,
    load_ensemble,
    load_trained,
    model_precision,
)
from transformer_tf.inference.parser import Parser
from transformer_tf.inference.translator import Translator
from transformer_tf.rundir.model_dir import read_run_config


def export_saved_model(translator: Translator, out_dir, overwrite: bool = False,
                       info: dict | None = None, ids_only: bool = False,
                       warmup: bool = True, max_batch_rows: int = DEFAULT_MAX_BATCH_ROWS,
                       model_dir=None) -> pathlib.Path:
    """Write `translator` as a SavedModel at `out_dir` (atomically, `export.versions`'
    rules); returns the path. `ids_only`: the core-ops variant (ids signatures only, no
    tokenizer in the graph); `warmup`: write TF Serving warm-up requests
    (`export.warmup`); `max_batch_rows`: the signatures' row limit (0: none);
    `model_dir`: the run exported (`out_dir` may not be inside it)."""
    return _export(translator, out_dir, overwrite, info, ids_only, None, warmup,
                   max_batch_rows, model_dir)


def export_parser(parser: Parser, out_dir, overwrite: bool = False,
                  info: dict | None = None, warmup: bool = True,
                  max_batch_rows: int = DEFAULT_MAX_BATCH_ROWS, model_dir=None) -> pathlib.Path:
    """Write a parsing model's `Parser` as a SavedModel at `out_dir` (atomically)."""
    return _export(parser.translator, out_dir, overwrite, {"task": "parsing", **(info or {})},
                   False, parser, warmup, max_batch_rows, model_dir)


def _export(translator: Translator, out_dir, overwrite: bool, info: dict | None,
            ids_only: bool, parser: Parser | None, warmup: bool, max_batch_rows: int,
            model_dir) -> pathlib.Path:
    check_max_batch_rows(max_batch_rows)

    def write(tmp):  # `_write` looked up when called: tests replace it to fail on purpose
        _write(translator, tmp, info, ids_only, parser, warmup, max_batch_rows)

    return write_version(out_dir, write, SAVED_MODEL, overwrite, model_dir)


def check_out_dir(out_dir, overwrite: bool, model_dir=None) -> None:
    """Raises `versions.OutDirError` (a ValueError) if `out_dir` cannot become a
    SavedModel version directory (`export.versions.check_out_dir`), after recovering
    what a killed export left in its NAME directory."""
    prepare_out_dir(out_dir, SAVED_MODEL, overwrite, model_dir)


def _write(translator: Translator, tmp: pathlib.Path, info: dict | None,
           ids_only: bool, parser: Parser | None = None, warmup: bool = True,
           max_batch_rows: int = DEFAULT_MAX_BATCH_ROWS) -> None:
    """The SavedModel and its assets.extra, written into the new directory `tmp`."""
    limited = translator.with_max_batch_rows(max_batch_rows)
    if parser is not None and limited is not translator:
        parser = Parser(limited)
    translator = limited
    if parser is not None:
        module = parser
        signatures = {"serving_default": parser.parse, "translate": translator.translate,
                      "translate_ids": translator.translate_ids}
    elif ids_only:
        module = translator.ids_only()
        signatures = {"serving_default": module.translate_ids,
                      "translate_ids": module.translate_ids, "score_ids": module.score_ids}
    else:
        module = translator
        signatures = {"serving_default": translator.translate,
                      "translate_nbest": translator.translate_nbest,
                      "translate_ids": translator.translate_ids,
                      "score": translator.score, "score_ids": translator.score_ids}
    tf.saved_model.save(module, str(tmp), signatures=signatures)
    extra = tmp / EXTRA_DIR
    extra.mkdir()
    (extra / BPE_MODEL).write_bytes(translator.tokenizer.model_proto)
    model = translator.model
    description = {"family": model.family, "model": model.config.get_config(),
                   "decoding": translator.decoding.get_config(), "n_best": translator.n_best,
                   "max_source_tokens": translator.max_source_tokens,
                   "variant": "ids" if ids_only else "text",
                   "max_batch_rows": translator.max_batch_rows,
                   "precision": model_precision(model),
                   **(info or {})}
    (extra / EXPORT_INFO).write_text(json.dumps(description, indent=2, sort_keys=True))
    if warmup:
        proto = translator.tokenizer.model_proto
        batches = warmup_batches(proto, translator.decoding, model.max_source_length,
                                 max_rows=translator.max_batch_rows)
        requests = ([{"source_ids": as_source_ids(proto, batch)} for batch in batches]
                    if ids_only else [{"text": list(batch)} for batch in batches])
        write_warmup_requests(extra / WARMUP_FILE, requests)


def export_model_dir(model_dir, out_dir, checkpoint=None, overwrite: bool = False,
                     ids_only: bool = False, parser: bool | None = None, warmup: bool = True,
                     max_batch_rows: int = DEFAULT_MAX_BATCH_ROWS,
                     decoding: DecodingConfig | None = None, precision: str = "float32",
                     force_precision: bool = False) -> pathlib.Path:
    """Export a training run (averaged checkpoint if present) searching with `decoding`
    (None: the run's own settings, `inference.loading.run_decoding`); `ids_only`: the
    core-ops variant; `max_batch_rows`: rows per request the signatures accept (0: no limit);
    `precision`: "float32" or "bfloat16", the latter refused on a machine without native
    bfloat16 unless `force_precision` (`export.precision.check_export_precision`);
    `parser`: export as a Parser (sentences in, trees out); None: when the run parses
    (trained on a treebank: `RunConfig.parses`), unless `ids_only`."""
    check_max_batch_rows(max_batch_rows)
    check_export_precision(precision, force_precision)
    check_out_dir(out_dir, overwrite, model_dir)  # before the minutes of loading and tracing
    parser = _as_parser(parser, model_dir, ids_only)
    model, tokenizer, run, path = load_trained(model_dir, checkpoint, decoding,
                                               precision=precision)
    return _export_loaded(Translator(model, tokenizer, run.decoding), out_dir, overwrite,
                          {"checkpoint": str(path), "preset": run.preset}, ids_only, parser,
                          warmup, max_batch_rows, model_dir)


def export_ensemble(model_dirs, out_dir, overwrite: bool = False, ids_only: bool = False,
                    parser: bool | None = None, warmup: bool = True,
                    max_batch_rows: int = DEFAULT_MAX_BATCH_ROWS,
                    decoding: DecodingConfig | None = None, precision: str = "float32",
                    force_precision: bool = False) -> pathlib.Path:
    """Export training runs decoded together (`inference.loading.load_ensemble`: one
    tokenizer, each run at its default checkpoint) as one SavedModel with the signatures
    of a single model's, searching with `decoding` (None: the first run's). The other arguments
    are `export_model_dir`'s; `parser` None follows the first run. assets.extra/transformer_tf.json records family "ensemble", the
    members' configs ("model") and each run's directory and checkpoint ("runs")."""
    model_dirs = [str(d) for d in model_dirs]
    check_max_batch_rows(max_batch_rows)
    check_export_precision(precision, force_precision)
    # Before the minutes of loading and tracing; `out_dir` inside any run is refused.
    check_out_dir(out_dir, overwrite, model_dirs[0])
    parser = _as_parser(parser, model_dirs[0], ids_only)
    model, tokenizer, run, paths = load_ensemble(model_dirs, decoding, precision=precision)
    info = {"runs": [{"model_dir": d, "checkpoint": str(p)}
                     for d, p in zip(model_dirs, paths)]}
    return _export_loaded(Translator(model, tokenizer, run.decoding), out_dir, overwrite,
                          info, ids_only, parser, warmup, max_batch_rows, model_dirs[0])


def _as_parser(parser: bool | None, model_dir, ids_only: bool) -> bool:
    """Whether to export as a Parser: `parser`, or when None, whether the run parses
    (`RunConfig.parses`) and the export is not ids-only."""
    if parser is None:
        return read_run_config(model_dir).parses and not ids_only
    return parser


def _export_loaded(translator: Translator, out_dir, overwrite: bool, info: dict,
                   ids_only: bool, parser: bool, warmup: bool, max_batch_rows: int,
                   model_dir) -> pathlib.Path:
    if parser:
        return export_parser(Parser(translator), out_dir, overwrite, info=info, warmup=warmup,
                             max_batch_rows=max_batch_rows, model_dir=model_dir)
    return export_saved_model(translator, out_dir, overwrite, info=info, ids_only=ids_only,
                              warmup=warmup, max_batch_rows=max_batch_rows,
                              model_dir=model_dir)


def check_max_batch_rows(max_batch_rows) -> None:
    """Raises ValueError unless `max_batch_rows` is 0 (no limit) or a positive int."""
    if isinstance(max_batch_rows, bool) or not isinstance(max_batch_rows, int) \
            or max_batch_rows < 0:
        raise ValueError(f"--max-batch-rows: must be 0 (no limit) or a positive number of "
                         f"rows, not {max_batch_rows!r}")
