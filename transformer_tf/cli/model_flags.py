"""The flags that choose and adjust a model, shared by the commands that train one
(train, main_job; parse_job takes all but --model, variations the two option flags only):
--model, --preset, --model-option, --training-option, --config, --dump-config."""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import pathlib
import typing
from typing import Any

from transformer_tf.cli.config_files import (
    check_fields,
    merge_config_files,
    resolved_settings,
)
from transformer_tf.cli.flags import add_flag
from transformer_tf.config import ConfigError, ModelConfig, TrainingConfig, field_types
from transformer_tf.presets import (
    choose_preset,
    get_preset,
)


def add_model_flags(parser: argparse.ArgumentParser) -> None:
    add_flag(parser, "family")
    add_flag(parser, "preset",
             help="model and training preset (default: multi30k, or the --model family's)")
    add_option_flags(parser)
    add_config_flags(parser)


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """--config FILE ... and --dump-config (cli/config_files.py)."""
    parser.add_argument("--config", nargs="+", action="extend", metavar="FILE",
                        help="JSON or YAML configuration files (preset, model, training, "
                             "decoding; a run's run_config.json is one), merged in order; "
                             "the command line's flags win")
    parser.add_argument("--dump-config", action="store_true",
                        help="print the resolved configuration (a valid --config) and exit")


def add_option_flags(parser: argparse.ArgumentParser,
                     model_help: str = "override fields of the preset's model config, e.g. "
                                       "d_model=512 d_ff=2048 (repeatable)",
                     training_help: str = "override TrainingConfig fields, e.g. "
                                          "clip_norm=1.0 seed=2 (repeatable)") -> None:
    """--model-option and --training-option, each taking one or more FIELD=VALUE (the
    commands that have them take no positional arguments these could swallow)."""
    parser.add_argument("--model-option", nargs="+", action="extend", metavar="FIELD=VALUE",
                        help=model_help)
    parser.add_argument("--training-option", nargs="+", action="extend",
                        metavar="FIELD=VALUE", help=training_help)


def resolve_option_flags(parser: argparse.ArgumentParser, args,
                         model_class=ModelConfig) -> tuple[dict, dict]:
    """(model overrides, training overrides) of `add_option_flags`' flags, the model fields
    checked against `model_class`; a bad value ends the command through `parser.error`
    (exit 2, naming the flag)."""
    try:
        return (parse_overrides(args.model_option, model_class, "--model-option"),
                parse_overrides(args.training_option, TrainingConfig, "--training-option"))
    except ConfigError as error:
        parser.error(str(error))


@dataclasses.dataclass
class ModelChoice:
    """What `add_model_flags`' flags resolve to: the preset and the changes to it, the
    configuration files' first and the command line's last."""

    preset: str
    model_overrides: dict[str, Any]
    training_overrides: dict[str, Any]
    decoding_overrides: dict[str, Any]
    data_dir: str | None  # from a configuration file (the command line's --data wins)


def resolve_model_flags(parser: argparse.ArgumentParser, args,
                        default_preset: str | None = None) -> ModelChoice:
    """The `ModelChoice` of `add_model_flags`' flags (a command without --model: the
    others), the preset `default_preset` when neither a flag nor a file names one (None:
    the family's); a bad value or file ends the command through `parser.error` (exit 2,
    naming the flag or the file)."""
    try:
        files = merge_config_files(args.config)
        preset = choose_preset(getattr(args, "model", None) or files.family,
                               args.preset or files.preset or default_preset)
        model_class = type(get_preset(preset).model)
        check_fields(files, model_class)
        model, training = resolve_option_flags(parser, args, model_class)
    except ConfigError as error:
        parser.error(str(error))
    return ModelChoice(preset, {**files.model, **model}, {**files.training, **training},
                       dict(files.decoding), files.data_dir)


def dump_config(choice: ModelChoice, data_dir: str | None = None,
                vocab_size: int | None = None, precision: str = "auto") -> str:
    """`--dump-config`'s JSON: the resolved configuration, with the data's vocabulary size
    and directory when `data_dir` holds prepared data (else `vocab_size`, if known), and
    the preset's training fields for `precision` (a `--precision` value, resolved on this
    machine as training would)."""
    from transformer_tf.training.precision import resolve_precision

    if data_dir is not None:
        from transformer_tf.data.prepared_reader import load_prepared

        vocab_size = load_prepared(data_dir).vocab_size
    settings = resolved_settings(get_preset(choice.preset), choice.model_overrides,
                                 choice.training_overrides, choice.decoding_overrides,
                                 choice.preset, vocab_size, resolve_precision(precision)[0])
    if data_dir is not None:
        settings["data_dir"] = str(pathlib.Path(data_dir).resolve())
    return json.dumps(settings, indent=2, sort_keys=True)


def parse_overrides(pairs, config_class, flag: str = "--option") -> dict[str, Any]:
    """Command-line overrides ["d_model=256", "clip_norm=1.0"] -> {"d_model": 256, ...}.

    Each value is read as its field's declared type (`field_value`). An unknown field, or a
    value that is not of its field's type, raises ConfigError naming the flag and the field.
    """
    fields = {f.name for f in dataclasses.fields(config_class)}
    types = field_types(config_class)
    result: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or key not in fields:
            raise ConfigError(f"{flag} {pair!r}: expected FIELD=VALUE with FIELD one of "
                              f"{sorted(fields)}")
        try:
            result[key] = field_value(value, *types[key])
        except ValueError as error:
            raise ConfigError(f"{flag} {pair}: {error}") from None
    return result


NULLS = ("null", "none")
TRUE, FALSE = ("true", "1", "yes"), ("false", "0", "no")


def field_value(text: str, declared, optional: bool = False) -> Any:
    """`text` read as a value of the type `declared` (a field's type, `config.field_types`):
    bool from true/false, 1/0, yes/no; int; a finite float; str as it is; a tuple from a
    JSON list; None from null/none where `optional`. Else ValueError saying what was
    expected. Other types take the JSON value of `text`, or `text` itself."""
    if optional and text.strip().lower() in NULLS:
        return None
    or_null = " or null" if optional else ""
    if declared is bool:
        word = text.strip().lower()
        if word not in TRUE + FALSE:
            raise ValueError(f"expected true or false{or_null}")
        return word in TRUE
    if declared is int:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"expected an integer{or_null}") from None
    if declared is float:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"expected a number{or_null}") from None
        if not math.isfinite(value):
            raise ValueError(f"expected a finite number{or_null}")
        return value
    if declared is str:
        return text
    if (typing.get_origin(declared) or declared) is tuple:
        value = _json_or_text(text)
        if not isinstance(value, list):
            raise ValueError(f"expected a JSON list{or_null}")
        return tuple(value)
    return _json_or_text(text)


def _json_or_text(text: str) -> Any:
    """`text` parsed as JSON when it is JSON, else `text` itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
