"""Named presets: a model family's config, its training and its decoding, under one name.

One module per family or task holds its table (`transformer`, `convs2s`, `parsing`); this
module joins them, answers `get_preset(name)`, and keeps the presets a user or another
package registers (`register_preset`). Every preset is built once, at import: the configs
are frozen dataclasses, so callers change a copy (`preset.model.replace(...)`).
"""
from __future__ import annotations

from transformer_tf.config import ConfigError
from transformer_tf.presets.base import Preset
from transformer_tf.presets.convs2s import CONVS2S_PRESETS
from transformer_tf.presets.parsing import PARSING_PRESETS
from transformer_tf.presets.transformer import TRANSFORMER_PRESETS

__all__ = [
    "DEFAULT_PRESETS",
    "PRESET_NAMES",
    "Preset",
    "choose_preset",
    "get_preset",
    "register_preset",
    "unregister_preset",
]

_BUILT_IN: dict[str, Preset] = {**TRANSFORMER_PRESETS, **CONVS2S_PRESETS, **PARSING_PRESETS}
PRESET_NAMES = tuple(_BUILT_IN)

# The preset a command line uses when it names a model family (--model) but no preset.
DEFAULT_PRESETS = {"transformer": "multi30k", "convs2s": "convs2s_multi30k"}

_REGISTERED: dict[str, Preset] = {}


def register_preset(name: str, preset: Preset) -> None:
    """Make `preset` available as `name` (for model families added outside this package);
    the built-in names cannot be replaced."""
    if name in _BUILT_IN:
        raise ConfigError(f"preset: {name!r} is a built-in preset")
    _REGISTERED[name] = preset


def unregister_preset(name: str) -> None:
    _REGISTERED.pop(name, None)


def get_preset(name: str) -> Preset:
    """The preset called `name` (one of PRESET_NAMES, or registered)."""
    preset = _BUILT_IN.get(name) or _REGISTERED.get(name)
    if preset is None:
        raise ConfigError(f"preset: unknown preset {name!r}; choose one of "
                          f"{sorted({**_BUILT_IN, **_REGISTERED})}")
    return preset


def choose_preset(family: str | None, preset: str | None) -> str:
    """The preset of a command line's `--model FAMILY` and `--preset NAME` (either may be
    None): the named preset (which must be of FAMILY if both are given), else FAMILY's
    default, else the Transformer's."""
    if preset is None:
        family = family or "transformer"
        if family not in DEFAULT_PRESETS:
            raise ConfigError(f"model: unknown model family {family!r}; known: "
                              f"{sorted(DEFAULT_PRESETS)}")
        return DEFAULT_PRESETS[family]
    chosen = get_preset(preset)
    if family is not None and chosen.family != family:
        raise ConfigError(f"preset: {preset!r} is a {chosen.family} preset, not {family}; "
                          f"drop --model or choose a {family} preset")
    return preset
