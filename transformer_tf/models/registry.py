"""Model families by name: what a run directory's `family` field refers to.

A family is a `Seq2SeqModel` subclass and its config dataclass (with get_config /
from_config, a `vocab_size` field and a `resolved()` copy that writes out every derived
size). The families of this package are listed in `FAMILIES`; others (a user's, a test's)
are added with `register_family`.
"""
from __future__ import annotations

from transformer_tf.config import ConfigError, ConvS2SConfig, ModelConfig
from transformer_tf.models.convs2s import ConvS2S
from transformer_tf.models.transformer import Transformer

DEFAULT_FAMILY = "transformer"
FAMILIES = {
    "transformer": (Transformer, ModelConfig),
    "convs2s": (ConvS2S, ConvS2SConfig),
}


def register_family(name: str, model_class, config_class) -> None:
    """Add a model family (its class's `family` attribute must be `name`)."""
    if getattr(model_class, "family", None) != name:
        raise ValueError(f"{model_class.__name__}.family must be {name!r}")
    FAMILIES[name] = (model_class, config_class)


def _family(name: str):
    if name not in FAMILIES:
        raise ConfigError(f"family: unknown model family {name!r}; known: {sorted(FAMILIES)}")
    return FAMILIES[name]


def config_class(family: str):
    """The config dataclass of `family`."""
    return _family(family)[1]


def build_model(family: str, config, dtype=None):
    """A built model of `family` from its config (dataclass or dict); `dtype`: its Keras
    dtype policy (name or policy; None: the global one)."""
    model_class, config_type = _family(family)
    if isinstance(config, dict):
        config = config_type.from_config(config)
    # A family's constructor takes Keras' keyword arguments only if it passes them on.
    model = model_class(config) if dtype is None else model_class(config, dtype=dtype)
    model.build()
    return model
