"""The model directory: what a training run writes, and how later steps read it back.

    MDIR/run_config.json     family, model, training and decoding configs, data dir, preset
    MDIR/bpe.model           the run's sentencepiece model (a copy of the prepared data's)
    MDIR/checkpoints/        training checkpoints (see checkpoints.py)
    MDIR/averaged/           averaged checkpoint(s) (scripts/average_checkpoints.py)
    MDIR/logs/train, logs/validation   TensorBoard event files

A model directory is self-contained: export, averaging and translation read nothing else
(the prepared data directory is needed only to train further).

run_config.json formats: 2 (current) records the model family and the model config with
every derived size written out (`ModelConfig.resolved`), and label smoothing under
"training". Format 1 files (no "format" field) still load: their model section may hold
`label_smoothing` (moved to training when training lacks it) and `value_dim: null`, which
then meant d_v = d_k (kept: the run's meaning does not change).
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil

from transformer_tf.config import DecodingConfig, TrainingConfig
from transformer_tf.data.prepared import load_prepared
from transformer_tf.models.registry import DEFAULT_FAMILY, config_class

RUN_CONFIG = "run_config.json"
TOKENIZER_FILE = "bpe.model"
FORMAT_VERSION = 2


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Everything needed to rebuild a run's model (and, to train on, its data)."""

    model: object  # the family's config dataclass, e.g. ModelConfig for the Transformer
    training: TrainingConfig
    decoding: DecodingConfig
    data_dir: str
    preset: str
    family: str = DEFAULT_FAMILY

    def to_json(self) -> str:
        return json.dumps({
            "format": FORMAT_VERSION, "family": self.family, "preset": self.preset,
            "data_dir": self.data_dir, "model": self.model.get_config(),
            "training": self.training.get_config(), "decoding": self.decoding.get_config()},
            indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, source: str = "run config") -> "RunConfig":
        try:
            raw = json.loads(text)
            model, training = dict(raw["model"]), dict(raw["training"])
            if raw.get("format", 1) == 1:
                model, training = _upgrade_format_1(model, training)
            family = raw.get("family", DEFAULT_FAMILY)
            return cls(model=config_class(family).from_config(model),
                       training=TrainingConfig.from_config(training),
                       decoding=DecodingConfig.from_config(raw["decoding"]),
                       data_dir=raw["data_dir"], preset=raw["preset"], family=family)
        except (KeyError, ValueError, TypeError) as error:
            raise ValueError(f"{source}: not a valid run configuration ({error})") from error


def _upgrade_format_1(model: dict, training: dict) -> tuple[dict, dict]:
    """Format 1 -> 2 with the same meaning (see the module docstring)."""
    smoothing = model.get("label_smoothing")
    if smoothing is not None:
        training.setdefault("label_smoothing", smoothing)
    return upgrade_format_1_model(model), training


def upgrade_format_1_model(model: dict) -> dict:
    """A Transformer model config written before format 2 (run directories and SavedModels
    without a "family"), with its meaning kept: label smoothing dropped (a training knob
    now), `value_dim: null` resolved by the old rule d_v = d_k."""
    model = {k: v for k, v in model.items() if k != "label_smoothing"}
    if model.get("value_dim") is None:
        model["value_dim"] = model.get("key_dim") or model["d_model"] // model["num_heads"]
    return model


def logdir(model_dir) -> pathlib.Path:
    return pathlib.Path(model_dir) / "logs"


def averaged_prefix(model_dir) -> pathlib.Path:
    return pathlib.Path(model_dir) / "averaged" / "ckpt"


def tokenizer_path(model_dir) -> pathlib.Path:
    return pathlib.Path(model_dir) / TOKENIZER_FILE


def write_run_config(model_dir, run: RunConfig) -> None:
    path = pathlib.Path(model_dir) / RUN_CONFIG
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(run.to_json())
    tmp.replace(path)


def write_tokenizer(model_dir, source_path) -> None:
    """Copy the run's sentencepiece model into the model directory (atomically)."""
    target = tokenizer_path(model_dir)
    tmp = target.with_suffix(".tmp")
    shutil.copyfile(source_path, tmp)
    tmp.replace(target)


def read_tokenizer_proto(model_dir) -> bytes:
    """The run's sentencepiece model; runs written before the model directory held it
    fall back to their prepared data directory."""
    path = tokenizer_path(model_dir)
    if path.exists():
        return path.read_bytes()
    run = read_run_config(model_dir)
    try:
        return load_prepared(run.data_dir).bpe_model_path.read_bytes()
    except (FileNotFoundError, ValueError) as error:
        raise FileNotFoundError(
            f"{path} not found, and this older run's prepared data cannot provide it "
            f"({error}): copy the run's BPE model to {path}") from error


def read_run_config(model_dir) -> RunConfig:
    path = pathlib.Path(model_dir) / RUN_CONFIG
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found: is {model_dir} a model directory written by scripts/train.py?")
    return RunConfig.from_json(path.read_text(), source=str(path))


def check_resumable(existing: RunConfig, requested: RunConfig, model_dir) -> None:
    """A run resumes only with the model it started with (family and every model field,
    derived sizes resolved); training and decoding knobs may change. Raises ValueError
    naming the fields that differ."""
    old = {"family": existing.family, **existing.model.resolved().get_config()}
    new = {"family": requested.family, **requested.model.resolved().get_config()}
    differing = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    if differing:
        details = ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in differing)
        raise ValueError(
            f"{model_dir} holds a run with a different model ({details}); use another "
            "--model-dir or the same preset and overrides")
