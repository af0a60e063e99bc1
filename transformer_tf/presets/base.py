"""The `Preset` bundle every family's table is made of."""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from transformer_tf.config import DecodingConfig, TrainingConfig


@dataclasses.dataclass(frozen=True)
class Preset:
    """A named bundle of model, training and decoding settings.

    `model` is the config dataclass of the model family named by `family` (see
    transformer_tf.models.registry); every family's config has a `vocab_size` field
    (set from the prepared data) and a `resolved()` copy with derived sizes written out.

    `mixed_precision_training` holds the TrainingConfig fields that differ for a run in
    mixed precision (a CPU with native bfloat16, a GPU with tensor cores): such a run
    trains several times the tokens in the same minutes, and a preset tuned on both kinds
    of hardware can say what suits each. `training_for(precision)` applies it; a user's
    own value for a field still wins over both.
    """

    model: Any
    training: TrainingConfig
    decoding: DecodingConfig = DecodingConfig()
    family: str = "transformer"
    mixed_precision_training: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def fields_for(self, precision: str) -> Mapping[str, Any]:
        """The `mixed_precision_training` fields a run whose Keras dtype policy is
        `precision` ("float32", "mixed_bfloat16", "mixed_float16") takes: none in float32."""
        return self.mixed_precision_training if precision.startswith("mixed_") else {}

    def training_for(self, precision: str) -> TrainingConfig:
        """The preset's training config for a run in `precision` (`fields_for`)."""
        fields = self.fields_for(precision)
        return self.training.replace(**fields) if fields else self.training
