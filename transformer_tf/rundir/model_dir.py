"""The model directory: what a training run writes, and how later steps read it back.

    MDIR/run_config.json     family, model, training and decoding configs, data dir, preset
    MDIR/bpe.model           the run's sentencepiece model (a copy of the prepared data's)
    MDIR/checkpoints/        training checkpoints (see checkpoints.py)
    MDIR/averaged/           averaged checkpoint(s) (scripts/average_checkpoints.py)
    MDIR/chosen_checkpoint.json  the checkpoint the last choice kept (`write_chosen`):
                             export and translate use it when not told otherwise
    MDIR/recipe_plan.json    the budget-aware recipe's plan of a run trained with it
                             (training/recipe_plan.py); a resumed run keeps it
    MDIR/chosen_decoding.json  beam size and alpha chosen on the dev set
                             (`write_chosen_decoding`): export's and translate's defaults
    MDIR/validation.jsonl    one line per evaluation during training (validation_log.py)
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

import contextlib
import dataclasses
import hashlib
import json
import logging
import pathlib
import shutil

from transformer_tf.config import DecodingConfig, TrainingConfig
from transformer_tf.data.prepared_reader import METADATA_FILE, TREE_LANGUAGE, load_prepared
from transformer_tf.models.registry import DEFAULT_FAMILY, config_class
from transformer_tf.rundir.files import write_json_atomically, write_text_atomically
from transformer_tf.rundir.lock import hold_run

RUN_CONFIG = "run_config.json"
TOKENIZER_FILE = "bpe.model"
CHOSEN_FILE = "chosen_checkpoint.json"
RECIPE_PLAN_FILE = "recipe_plan.json"
DECODING_FILE = "chosen_decoding.json"
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
    # What the run translates and with which tokenizer (part of its identity, see
    # `check_resumable`); empty in run directories written before they were recorded.
    source_language: str = ""
    target_language: str = ""  # "tree" for parsing
    tokenizer_sha256: str = ""
    # A fine-tuned run's origin (`rundir.init_source.InitSource.get_config()`): the source
    # run, checkpoint, step and checkpoint sha256; None for a run trained from scratch.
    init_from: dict | None = None

    @property
    def parses(self) -> bool:
        """Whether the run is a parser (sentences in, linearised trees out): its target
        language is the treebank's "tree", whatever its search (the paper's parsing
        preset decodes without the tree grammar); a run directory that recorded no
        language pair parses when it decodes with the tree grammar."""
        if self.target_language:
            return self.target_language == TREE_LANGUAGE
        return self.decoding.grammar == "tree"

    def to_json(self) -> str:
        fields = {
            "format": FORMAT_VERSION, "family": self.family, "preset": self.preset,
            "data_dir": self.data_dir, "model": self.model.get_config(),
            "training": self.training.get_config(), "decoding": self.decoding.get_config(),
            "source_language": self.source_language, "target_language": self.target_language,
            "tokenizer_sha256": self.tokenizer_sha256}
        if self.init_from is not None:
            fields["init_from"] = self.init_from
        return json.dumps(fields, indent=2, sort_keys=True)

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
                       data_dir=raw["data_dir"], preset=raw["preset"], family=family,
                       source_language=raw.get("source_language", ""),
                       target_language=raw.get("target_language", ""),
                       tokenizer_sha256=raw.get("tokenizer_sha256", ""),
                       init_from=raw.get("init_from"))
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
    write_text_atomically(pathlib.Path(model_dir) / RUN_CONFIG, run.to_json())


def write_tokenizer(model_dir, source_path) -> None:
    """Copy the run's sentencepiece model into the model directory (atomically)."""
    target = tokenizer_path(model_dir)
    tmp = target.with_suffix(".tmp")
    shutil.copyfile(source_path, tmp)
    tmp.replace(target)


@dataclasses.dataclass(frozen=True)
class ChosenCheckpoint:
    """The checkpoint a choice kept (the dev-set choice, or an explicit average)."""

    checkpoint: str  # its prefix (absolute)
    name: str  # "latest", "averaged"
    reason: str  # why, in one line
    newest_step: int  # the run's newest training checkpoint when the choice was made


def _within_run(model_dir, path) -> str:
    """`path` relative to MDIR when inside it (a copied run directory still finds it),
    else absolute."""
    path = pathlib.Path(path).resolve()
    try:
        return str(path.relative_to(pathlib.Path(model_dir).resolve()))
    except ValueError:
        return str(path)


def write_chosen(model_dir, chosen: ChosenCheckpoint) -> None:
    """Record `chosen` in MDIR/chosen_checkpoint.json (atomically; the path relative to
    MDIR when inside it, so that a copied run directory still finds it)."""
    record = {**dataclasses.asdict(chosen),
              "checkpoint": _within_run(model_dir, chosen.checkpoint)}
    write_json_atomically(pathlib.Path(model_dir) / CHOSEN_FILE, record)


def read_chosen(model_dir) -> ChosenCheckpoint | None:
    """The recorded choice of MDIR, or None when there is none (or it is unreadable:
    logged, and treated as none)."""
    path = pathlib.Path(model_dir) / CHOSEN_FILE
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
        chosen = ChosenCheckpoint(**record)
    except (ValueError, TypeError) as error:
        logging.getLogger(__name__).warning("%s: unreadable (%s); ignored", path, error)
        return None
    return dataclasses.replace(chosen, checkpoint=str(pathlib.Path(model_dir) / chosen.checkpoint))


def write_recipe_plan(model_dir, plan: dict) -> None:
    """Record a run's recipe plan (a JSON-able dict) in MDIR/recipe_plan.json, atomically."""
    write_json_atomically(pathlib.Path(model_dir) / RECIPE_PLAN_FILE, plan)


def read_recipe_plan(model_dir) -> dict | None:
    """The recorded recipe plan of MDIR, or None for a run without one. An unreadable file
    raises ValueError naming it: a run's plan is never replaced by a new one."""
    path = pathlib.Path(model_dir) / RECIPE_PLAN_FILE
    if not path.exists():
        return None
    try:
        return dict(json.loads(path.read_text()))
    except (ValueError, TypeError) as error:
        raise ValueError(f"{path}: unreadable recipe plan ({error}); restore it, or train "
                         "in another --model-dir") from error


@dataclasses.dataclass(frozen=True)
class ChosenDecoding:
    """The search settings chosen on the dev set: the run's defaults for export and
    translate (an explicit setting still wins). Kept apart from run_config.json, which
    every `train` invocation rewrites from its preset and flags, and from the chosen
    checkpoint, which a later `average` replaces without saying anything about search.

    beam_size, alpha: the chosen settings.
    reason: why, in one line.
    checkpoint: the checkpoint they were chosen with (its prefix).
    scores: [{"beam_size", "alpha", "dev_bleu"}, ...], every setting tried.
    """

    beam_size: int
    alpha: float
    reason: str
    checkpoint: str
    scores: list = dataclasses.field(default_factory=list)

    def overrides(self) -> dict:
        """beam_size= and alpha= for `DecodingConfig.with_overrides`."""
        return {"beam_size": self.beam_size, "alpha": self.alpha}


def write_chosen_decoding(model_dir, chosen: ChosenDecoding) -> None:
    """Record `chosen` in MDIR/chosen_decoding.json (atomically; the checkpoint as
    `write_chosen` stores it)."""
    record = {**dataclasses.asdict(chosen),
              "checkpoint": _within_run(model_dir, chosen.checkpoint)}
    write_json_atomically(pathlib.Path(model_dir) / DECODING_FILE, record)


def read_chosen_decoding(model_dir) -> ChosenDecoding | None:
    """The recorded search choice of MDIR, or None when there is none (or it is
    unreadable: logged, and treated as none)."""
    path = pathlib.Path(model_dir) / DECODING_FILE
    if not path.exists():
        return None
    try:
        chosen = ChosenDecoding(**json.loads(path.read_text()))
        DecodingConfig().with_overrides(**chosen.overrides())  # the config's own checks
    except (ValueError, TypeError) as error:
        logging.getLogger(__name__).warning("%s: unreadable (%s); ignored", path, error)
        return None
    return dataclasses.replace(chosen, checkpoint=str(pathlib.Path(model_dir) / chosen.checkpoint))


def read_tokenizer_proto(model_dir) -> bytes:
    """The run's sentencepiece model; runs written before the model directory held it
    fall back to their prepared data directory. A tokenizer file whose sha256 is not the
    one run_config.json recorded (replaced since the run was trained) raises
    `TokenizerChangedError`: its pieces would no longer be the ids the model learned."""
    path = tokenizer_path(model_dir)
    if path.exists():
        proto = path.read_bytes()
        recorded = read_run_config(model_dir).tokenizer_sha256
        if recorded and tokenizer_sha256(proto) != recorded:
            raise TokenizerChangedError(
                f"{path}: not the tokenizer this run was trained with (its sha256 "
                f"{tokenizer_sha256(proto)[:12]}... differs from the {recorded[:12]}... "
                f"recorded in {RUN_CONFIG}); put the run's own bpe.model back (the prepared "
                "data it was trained on holds a copy)")
        return proto
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


@contextlib.contextmanager
def hold_existing_run(model_dir):
    """`lock.hold_run` of a run that exists: a directory without run_config.json (not a
    run, e.g. a SavedModel) raises `read_run_config`'s FileNotFoundError before a lock
    file is written into it."""
    read_run_config(model_dir)
    with hold_run(model_dir):
        yield


def tokenizer_sha256(proto: bytes) -> str:
    """The hex sha256 of a serialized sentencepiece model: the run's tokenizer identity."""
    return hashlib.sha256(proto).hexdigest()


class TokenizerChangedError(ValueError):
    """A run directory's bpe.model is not the tokenizer its run_config.json recorded."""


class RunMismatchError(ValueError):
    """A command would change what a run directory holds (another model, tokenizer or
    language pair); the message names each field and both values."""


def _identity(run: RunConfig, tokenizer: str) -> dict:
    return {"family": run.family, **run.model.resolved().get_config(),
            "source language": run.source_language, "target language": run.target_language,
            "tokenizer sha256": tokenizer}


def _differences(old: dict, new: dict, skipped=frozenset()) -> list[str]:
    """Sorted keys of the fields (not in `skipped`) on which two identities differ."""
    return sorted(k for k in old.keys() | new.keys()
                  if k not in skipped and old.get(k) != new.get(k))


def check_resumable(existing: RunConfig, requested: RunConfig, model_dir,
                    existing_tokenizer_sha256: str | None = None) -> None:
    """A run resumes only as the run it is: the same family and model fields (derived
    sizes resolved), language pair (or task) and tokenizer; training and decoding knobs and
    the data directory's location may change. `existing_tokenizer_sha256` is the sha256 of
    the tokenizer in the run directory (default: the recorded one). A field an older run
    directory did not record is not compared. Raises `RunMismatchError` naming every field
    that differs with both values."""
    old = _identity(existing, existing_tokenizer_sha256 or existing.tokenizer_sha256)
    new = _identity(requested, requested.tokenizer_sha256)
    unrecorded = {k for k in ("source language", "target language", "tokenizer sha256")
                  if not old[k]}
    differing = _differences(old, new, unrecorded)
    if differing:
        details = "; ".join(f"{k}: the run's {old.get(k)!r}, requested {new.get(k)!r}"
                            for k in differing)
        raise RunMismatchError(
            f"{model_dir} holds another run ({details}); nothing was written. Use another "
            "--model-dir, or the run's own data, preset and overrides")


# Files that say a directory holds something other than a run: a new run there would
# write its own bpe.model (and more) over what the directory holds.
_OTHER_KINDS = {METADATA_FILE: "prepared data", "saved_model.pb": "an exported SavedModel"}


def _check_not_another_kind(model_dir) -> None:
    """Raises `RunMismatchError` when `model_dir`, not yet a run, holds prepared data or a
    SavedModel."""
    for name, kind in _OTHER_KINDS.items():
        if (pathlib.Path(model_dir) / name).exists():
            raise RunMismatchError(
                f"{model_dir} holds {kind} ({name}), not a run: a new run there would "
                f"write its own {TOKENIZER_FILE} over it; nothing was written. Use another "
                "--model-dir")


def check_resume_in(model_dir, requested: RunConfig) -> bool:
    """`check_resumable` against the run in `model_dir`, comparing the tokenizer file the
    directory holds; True when there is a run to resume, False for a new directory (which
    must not hold prepared data or a SavedModel: `RunMismatchError`)."""
    if not (pathlib.Path(model_dir) / RUN_CONFIG).exists():
        _check_not_another_kind(model_dir)
        return False
    existing = read_run_config(model_dir)
    path = tokenizer_path(model_dir)
    held = tokenizer_sha256(path.read_bytes()) if path.exists() else None
    check_resumable(existing, requested, model_dir, held)
    return True


def check_same_model(source: RunConfig, requested: RunConfig, source_dir,
                     source_tokenizer_sha256: str, requested_tokenizer) -> None:
    """A run fine-tuned from `source` (in `source_dir`) keeps its model: the same family,
    model fields (derived sizes resolved) and tokenizer (the sha256 of the source run's
    tokenizer file against that of `requested_tokenizer`, the new data's file); the
    language pair, training knobs and data may change. Raises `RunMismatchError` naming
    every field that differs with both values (the two tokenizer files for the tokenizer).
    """
    old = _identity(source, source_tokenizer_sha256)
    new = _identity(requested, requested.tokenizer_sha256)
    differing = _differences(old, new, {"source language", "target language"})
    if not differing:
        return
    details = "; ".join(
        f"tokenizer: {tokenizer_path(source_dir)} (sha256 {old[k][:12]}...) is not "
        f"{requested_tokenizer} (sha256 {new[k][:12]}...)" if k == "tokenizer sha256" else
        f"{k}: the source's {old.get(k)!r}, requested {new.get(k)!r}" for k in differing)
    raise RunMismatchError(
        f"cannot fine-tune from {source_dir}: the new run differs from it ({details}); "
        "nothing was written. Prepare the new data with the source run's tokenizer, and "
        "give the source's preset and --model-option values")
