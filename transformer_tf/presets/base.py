"""The `Preset` bundle every family's table is made of."""
from __future__ import annotations

import dataclasses
from typing import Any

from transformer_tf.config import DecodingConfig, TrainingConfig


@dataclasses.dataclass(frozen=True)
class Preset:
    """A named bundle of model, training and decoding settings.

    `model` is the config dataclass of the model family named by `family` (see
    transformer_tf.models.registry); every family's config has a `vocab_size` field
    (set from the prepared data) and a `resolved()` copy with derived sizes written out.
    """

    model: Any
    training: TrainingConfig
    decoding: DecodingConfig = DecodingConfig()
    family: str = "transformer"
