"""Configuration files for the commands that train (`--config FILE ...`, `--dump-config`).

A configuration file is a JSON or YAML mapping with any of these keys:

    preset: multi30k              # the preset the sections below change
    family: transformer           # checked against the preset's family
    data_dir: runs/en_de/data     # used when the command line gives no --data
    model: {d_model: 256, ...}    # fields of the family's config (ModelConfig, ConvS2SConfig)
    training: {warmup_steps: 400} # TrainingConfig fields
    decoding: {beam_size: 5}      # DecodingConfig fields

A run directory's `run_config.json` is such a file: its other keys (`format`, the
languages, the tokenizer's sha256) are the run's identity, which training checks against
the data anyway, and are skipped here. Several files merge in order, each key of a later
file replacing the same key of an earlier one; the command line's flags
(`--preset`, `--model-option`, `--training-option`, `--tokens-per-batch`, ...) come last.
A key or field that does not exist is an error naming the file.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any

from transformer_tf.config import ConfigError, DecodingConfig, TrainingConfig

SECTIONS = ("model", "training", "decoding")
SETTINGS = ("preset", "family", "data_dir")
# What run_config.json records beside the settings: the run's identity, not settings.
IDENTITY_KEYS = ("format", "source_language", "target_language", "tokenizer_sha256")


@dataclasses.dataclass
class FileSettings:
    """The merged contents of the configuration files (empty: no file)."""

    preset: str | None = None
    family: str | None = None
    data_dir: str | None = None
    model: dict[str, Any] = dataclasses.field(default_factory=dict)
    training: dict[str, Any] = dataclasses.field(default_factory=dict)
    decoding: dict[str, Any] = dataclasses.field(default_factory=dict)
    sources: dict[str, str] = dataclasses.field(default_factory=dict)  # "model.d_model" -> file


def read_config_file(path) -> dict[str, Any]:
    """One file's mapping (JSON, or YAML for .yml/.yaml names)."""
    path = pathlib.Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"--config {path}: cannot read it ({error.strerror or error})") from None
    try:
        if path.suffix.lower() in (".yml", ".yaml"):
            import yaml  # PyYAML, a dependency of the package

            raw = yaml.safe_load(text)
        else:
            raw = json.loads(text)
    except Exception as error:  # the parsers' own errors name the line and column
        raise ConfigError(f"--config {path}: not valid {_format_of(path)}: {error}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"--config {path}: expected a mapping of settings at the top, "
                          f"got {type(raw).__name__}")
    return raw


def _format_of(path: pathlib.Path) -> str:
    return "YAML" if path.suffix.lower() in (".yml", ".yaml") else "JSON"


def merge_config_files(paths) -> FileSettings:
    """The files' settings merged in order (later files win, key by key)."""
    merged = FileSettings()
    for path in paths or []:
        raw = read_config_file(path)
        unknown = sorted(set(raw) - set(SECTIONS) - set(SETTINGS) - set(IDENTITY_KEYS))
        if unknown:
            raise ConfigError(f"--config {path}: unknown key(s) {unknown}; a configuration "
                              f"file holds {sorted(SETTINGS + SECTIONS)}")
        for key in SETTINGS:
            if raw.get(key) is not None:
                setattr(merged, key, str(raw[key]))
                merged.sources[key] = str(path)
        for section in SECTIONS:
            values = raw.get(section) or {}
            if not isinstance(values, dict):
                raise ConfigError(f"--config {path}: {section!r} must be a mapping of fields, "
                                  f"got {type(values).__name__}")
            getattr(merged, section).update(values)
            merged.sources.update({f"{section}.{field}": str(path) for field in values})
    return merged


def check_fields(settings: FileSettings, model_class) -> None:
    """Each section's fields exist in its config class; else ConfigError naming the file."""
    for section, config_class in (("model", model_class), ("training", TrainingConfig),
                                  ("decoding", DecodingConfig)):
        known = {f.name for f in dataclasses.fields(config_class)}
        for field in getattr(settings, section):
            if field not in known:
                raise ConfigError(
                    f"--config {settings.sources[f'{section}.{field}']}: {section}.{field} is "
                    f"not a field of {config_class.__name__}; known: {sorted(known)}")


def resolved_settings(preset, model_overrides: dict, training_overrides: dict,
                      decoding_overrides: dict, preset_name: str,
                      vocab_size: int | None, precision: str) -> dict[str, Any]:
    """What `--dump-config` prints: the preset with every change applied, in the layout
    `--config` reads (the model's vocabulary size only when the data is known; the
    training fields of a run in `precision`, a Keras dtype policy)."""
    model_changes = dict(model_overrides)
    if vocab_size is not None:
        model_changes["vocab_size"] = vocab_size
    model = preset.model.replace(**model_changes)
    model_config = (model.resolved() if vocab_size is not None else model).get_config()
    if vocab_size is None:
        model_config.pop("vocab_size", None)
    return {"preset": preset_name, "family": preset.family, "model": model_config,
            "training": preset.training_for(precision).replace(
                **training_overrides).get_config(),
            "decoding": preset.decoding.replace(**decoding_overrides).get_config()}
