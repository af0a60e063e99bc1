"""transformer_tf: the Transformer of "Attention Is All You Need" in TensorFlow 2 / Keras 3.

The names a program needs, importable from the package itself::

    import transformer_tf as ttf

    preset = ttf.get_preset("multi30k")
    ttf.train(ttf.TrainOptions(data_dir="runs/en_de/data", model_dir="runs/en_de/model",
                               preset="multi30k", max_minutes=60))
    ttf.export_model_dir("runs/en_de/model", "saved_models/en_de/1")
    translator = ttf.load_translator(model="saved_models/en_de/1")
    translations, scores = ttf.translate_lines(translator, ["A man rides a bicycle."])

Each name is loaded on first use (PEP 562), so `import transformer_tf` stays light: the
commands answer --help and score files without starting TensorFlow.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

# Public name -> the module that defines it.
_PUBLIC = {
    # configuration
    "ModelConfig": "transformer_tf.config",
    "ConvS2SConfig": "transformer_tf.config",
    "TrainingConfig": "transformer_tf.config",
    "DecodingConfig": "transformer_tf.config",
    "Preset": "transformer_tf.presets",
    "get_preset": "transformer_tf.presets",
    "register_preset": "transformer_tf.presets",
    # models
    "Seq2SeqModel": "transformer_tf.models.contract",
    "Transformer": "transformer_tf.models.transformer",
    "ConvS2S": "transformer_tf.models.convs2s",
    # training
    "TrainOptions": "transformer_tf.training.fit",
    "train": "transformer_tf.training.fit",
    "average_run": "transformer_tf.training.averaging",
    # inference and export
    "Translator": "transformer_tf.inference.translator",
    "load_translator": "transformer_tf.inference.batch",
    "translate_lines": "transformer_tf.inference.batch",
    "export_model_dir": "transformer_tf.export.saved_model",
    "export_saved_model": "transformer_tf.export.saved_model",
    # evaluation
    "evaluate": "transformer_tf.evaluation.scoring",
    # the main job
    "MainJobOptions": "transformer_tf.jobs.main_job",
    "run_main_job": "transformer_tf.jobs.main_job",
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'transformer_tf' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(__all__)
