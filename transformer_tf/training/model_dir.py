"""The model directory: what a training run writes, and how later steps read it back.

    MDIR/run_config.json     model, training and decoding configs, data dir, preset
    MDIR/checkpoints/        training checkpoints (see checkpoints.py)
    MDIR/averaged/           averaged checkpoint(s) (scripts/average_checkpoints.py)
    MDIR/logs/train, logs/validation   TensorBoard event files
"""
from __future__ import annotations

import dataclasses
import json
import pathlib

from transformer_tf.config import DecodingConfig, ModelConfig, TrainingConfig

RUN_CONFIG = "run_config.json"


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Everything needed to rebuild a run's model and data."""

    model: ModelConfig
    training: TrainingConfig
    decoding: DecodingConfig
    data_dir: str
    preset: str

    def to_json(self) -> str:
        return json.dumps({
            "preset": self.preset, "data_dir": self.data_dir,
            "model": self.model.get_config(), "training": self.training.get_config(),
            "decoding": self.decoding.get_config()}, indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, source: str = "run config") -> "RunConfig":
        try:
            raw = json.loads(text)
            return cls(model=ModelConfig.from_config(raw["model"]),
                       training=TrainingConfig.from_config(raw["training"]),
                       decoding=DecodingConfig.from_config(raw["decoding"]),
                       data_dir=raw["data_dir"], preset=raw["preset"])
        except (KeyError, ValueError, TypeError) as error:
            raise ValueError(f"{source}: not a valid run configuration ({error})") from error


def logdir(model_dir) -> pathlib.Path:
    return pathlib.Path(model_dir) / "logs"


def averaged_prefix(model_dir) -> pathlib.Path:
    return pathlib.Path(model_dir) / "averaged" / "ckpt"


def write_run_config(model_dir, run: RunConfig) -> None:
    path = pathlib.Path(model_dir) / RUN_CONFIG
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(run.to_json())
    tmp.replace(path)


def read_run_config(model_dir) -> RunConfig:
    path = pathlib.Path(model_dir) / RUN_CONFIG
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found: is {model_dir} a model directory written by scripts/train.py?")
    return RunConfig.from_json(path.read_text(), source=str(path))


def check_resumable(existing: RunConfig, requested: RunConfig, model_dir) -> None:
    """A run resumes only with the model it started with; say which fields differ."""
    old, new = existing.model.get_config(), requested.model.get_config()
    differing = sorted(k for k in old if old[k] != new.get(k))
    if differing:
        details = ", ".join(f"{k}: {old[k]!r} -> {new.get(k)!r}" for k in differing)
        raise ValueError(
            f"{model_dir} holds a run with a different model ({details}); use another "
            "--model-dir or the same preset and overrides")
