"""SavedModel export for TF Serving, and loading a trained model back for inference.

An export directory `saved_models/<name>/<version>/` holds a SavedModel whose root is a
`Translator` with three signatures:

  serving_default  text tf.string [None] -> translation tf.string [None], score float32 [None]
  translate_nbest  text tf.string [None] -> translations tf.string [None, n], scores float32 [None, n]
  translate_ids    source_ids int32 [None, None] -> ids int32 [None, None], length, score
                   (no tf-text op inside: runs on any TF Serving build)

The sentencepiece model is embedded in the graph (see BpeTokenizer), so raw text goes in
and out. `assets.extra/transformer_tf.json` records the model/decoding configuration and
`assets.extra/bpe.model` the tokenizer, so tools can rebuild the model with other search
settings (scripts/translate.py --beam-size ... does). TF Serving ignores assets.extra.

The export is written to a temporary sibling directory and renamed into place, so a
server watching `saved_models/<name>/` never sees a half-written version.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil

import tensorflow as tf

from transformer_tf.config import DecodingConfig, ModelConfig
from transformer_tf.data.bpe import BpeTokenizer
from transformer_tf.data.prepare import load_prepared
from transformer_tf.export.translator import Translator
from transformer_tf.models.transformer import Transformer
from transformer_tf.training import checkpoints, model_dir as model_dir_lib

EXPORT_INFO = "transformer_tf.json"
BPE_MODEL = "bpe.model"


def pick_checkpoint(model_dir, checkpoint=None) -> str:
    """`checkpoint` if given, else the averaged checkpoint if there is one, else the latest."""
    if checkpoint:
        return str(checkpoint)
    averaged = model_dir_lib.averaged_prefix(model_dir)
    if averaged.with_name(averaged.name + ".index").exists():
        return str(averaged)
    found = checkpoints.list_checkpoints(model_dir)
    if not found:
        raise FileNotFoundError(f"{model_dir}: no checkpoint found (train first)")
    return found[-1]


def load_trained(model_dir, checkpoint=None, **decoding_overrides):
    """(model, tokenizer, run_config, checkpoint_path) of a training run's model directory;
    the run config's decoding settings with `decoding_overrides` (beam_size=, alpha=,
    max_extra_length=; None = keep), checked before anything is loaded."""
    run = model_dir_lib.read_run_config(model_dir)
    run = dataclasses.replace(run, decoding=run.decoding.with_overrides(**decoding_overrides))
    path = pick_checkpoint(model_dir, checkpoint)
    model = Transformer(run.model)
    model.build()
    checkpoints.load_weights(model, path)
    tokenizer = load_prepared(run.data_dir).tokenizer
    return model, tokenizer, run, path


def export_saved_model(translator: Translator, out_dir, overwrite: bool = False,
                       info: dict | None = None) -> pathlib.Path:
    """Write `translator` as a SavedModel at `out_dir` (atomically); returns the path."""
    out_dir = pathlib.Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not overwrite:
        raise FileExistsError(f"{out_dir} exists and is not empty; choose a new version "
                              "number or pass --overwrite")
    tmp = out_dir.parent / f".{out_dir.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tf.saved_model.save(translator, str(tmp), signatures={
        "serving_default": translator.translate,
        "translate_nbest": translator.translate_nbest,
        "translate_ids": translator.translate_ids,
    })
    extra = tmp / "assets.extra"
    extra.mkdir()
    (extra / BPE_MODEL).write_bytes(translator.tokenizer.model_proto)
    description = {"model": translator.model.config.get_config(),
                   "decoding": translator.decoding.get_config(), "n_best": translator.n_best,
                   **(info or {})}
    (extra / EXPORT_INFO).write_text(json.dumps(description, indent=2, sort_keys=True))
    if out_dir.exists():
        shutil.rmtree(out_dir)
    tmp.rename(out_dir)
    return out_dir


def export_model_dir(model_dir, out_dir, checkpoint=None, overwrite: bool = False,
                     **decoding_overrides) -> pathlib.Path:
    """Export a training run (averaged checkpoint if present) with its decoding settings,
    where `decoding_overrides` (beam_size=, alpha=, max_extra_length=; None = keep) do
    not replace them."""
    model, tokenizer, run, path = load_trained(model_dir, checkpoint, **decoding_overrides)
    translator = Translator(model, tokenizer, run.decoding)
    return export_saved_model(translator, out_dir, overwrite,
                              info={"checkpoint": str(path), "preset": run.preset})


def read_export_info(saved_model_dir) -> dict:
    path = pathlib.Path(saved_model_dir) / "assets.extra" / EXPORT_INFO
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: not a SavedModel exported by transformer_tf")
    return json.loads(path.read_text())


def read_bpe_model(saved_model_dir) -> bytes:
    """The sentencepiece model proto exported with the SavedModel."""
    return (pathlib.Path(saved_model_dir) / "assets.extra" / BPE_MODEL).read_bytes()


def translator_from_saved_model(saved_model_dir, decoding: DecodingConfig) -> Translator:
    """A fresh Translator with other search settings, weights read from a SavedModel."""
    saved_model_dir = pathlib.Path(saved_model_dir)
    info = read_export_info(saved_model_dir)
    model = Transformer(ModelConfig.from_config(info["model"]))
    model.build()
    tokenizer = BpeTokenizer(read_bpe_model(saved_model_dir))
    checkpoints.load_weights(model, saved_model_dir / "variables" / "variables")
    return Translator(model, tokenizer, decoding)
