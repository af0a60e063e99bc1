"""Loading a trained model for inference: from a training run's model directory or from an
exported SavedModel (whose layout `transformer_tf.export.saved_model` writes).

A SavedModel written by transformer_tf carries, besides the graph and variables,
`assets.extra/transformer_tf.json` (family, model and decoding configs) and
`assets.extra/bpe.model` (the tokenizer), so tools can rebuild the model with other
search settings, in the arithmetic it was exported in ("precision", `SERVING_PRECISIONS`;
"float32" where not recorded). TF Serving ignores assets.extra.
"""
from __future__ import annotations

import dataclasses
import logging
import pathlib

import tensorflow as tf

from transformer_tf.config import SERVING_PRECISIONS, DecodingConfig
from transformer_tf.data.bpe import make_tokenizer
from transformer_tf.inference.translator import Translator
from transformer_tf.models.ensemble import Ensemble, build_ensemble
from transformer_tf.models.registry import DEFAULT_FAMILY, build_model
from transformer_tf.rundir import checkpoints
from transformer_tf.rundir import model_dir as model_dir_lib
from transformer_tf.runtime import error_text
from transformer_tf.runtime.json_file import JsonFileError, read_json_file

logger = logging.getLogger(__name__)

EXPORT_INFO = "transformer_tf.json"
BPE_MODEL = "bpe.model"
EXTRA_DIR = "assets.extra"


def serving_dtype_policy(precision: str) -> str:
    """The Keras dtype policy of an inference model in `precision` (a SERVING_PRECISIONS
    name); ValueError naming the choices otherwise."""
    if precision not in SERVING_PRECISIONS:
        raise ValueError(f"--precision: expected one of {', '.join(SERVING_PRECISIONS)}, "
                         f"got {precision!r}")
    return SERVING_PRECISIONS[precision]


def model_precision(model) -> str:
    """The arithmetic `model` runs in: its compute dtype's name ("float32", "bfloat16");
    an ensemble's is its first member's."""
    return getattr(model, "members", [model])[0].compute_dtype


def pick_checkpoint(model_dir, checkpoint=None) -> str:
    """`checkpoint` if given, else `default_checkpoint(model_dir)`: readable ones only
    (`checkpoints.checkpoint_problem`).

    A damaged `checkpoint` raises `checkpoints.CheckpointError`, which names the newest
    readable checkpoint of the run to use instead, if there is one.
    """
    if checkpoint:
        problem = checkpoints.checkpoint_problem(checkpoint)
        if problem is None:
            return str(checkpoint)
        try:
            offer = f"; the newest readable checkpoint of {model_dir} is " \
                    f"{checkpoints.newest_readable(model_dir)}"
        except (FileNotFoundError, checkpoints.CheckpointError):
            offer = ""
        raise checkpoints.CheckpointError(problem.path, problem.problem + offer)
    return default_checkpoint(model_dir)[0]


def default_checkpoint(model_dir) -> tuple[str, str]:
    """(checkpoint prefix, why) of the checkpoint a run is used with when none is named:

    1. the one its last choice kept (`model_dir.read_chosen`: the dev-set choice of the
       main job or `average --select dev`, or an explicit `average`), unless training has
       gone on since (then the newest training checkpoint) or it is damaged (warned);
    2. for a run with no recorded choice, its averaged checkpoint if there is one;
    3. its newest readable training checkpoint.
    """
    try:
        newest = checkpoints.newest_readable(model_dir)
    except FileNotFoundError:  # no training checkpoint (e.g. only an averaged one)
        newest = None
    chosen = model_dir_lib.read_chosen(model_dir)
    if chosen is not None:
        if newest is not None and checkpoints.checkpoint_step(newest) > chosen.newest_step:
            return newest, (f"the newest training checkpoint: the recorded choice "
                            f"({chosen.name}) was made at step {chosen.newest_step}, and the "
                            "run has trained since")
        problem = checkpoints.checkpoint_problem(chosen.checkpoint)
        if problem is None:
            return chosen.checkpoint, f"the recorded choice: {chosen.name} ({chosen.reason})"
        logger.warning("the recorded choice's checkpoint is damaged (%s); using the newest "
                       "readable training checkpoint instead", problem)
    averaged = model_dir_lib.averaged_prefix(model_dir)
    if chosen is None and averaged.with_name(averaged.name + ".index").exists():
        problem = checkpoints.checkpoint_problem(averaged)
        if problem is None:
            return str(averaged), "the averaged checkpoint (no choice recorded)"
        logger.warning("the averaged checkpoint is damaged (%s); using the newest readable "
                       "training checkpoint instead", problem)
    if newest is None:
        raise FileNotFoundError(f"{model_dir}: no checkpoint found (train first)")
    return newest, "the newest training checkpoint"


def run_decoding(model_dir, run: model_dir_lib.RunConfig) -> DecodingConfig:
    """The search settings a run is used with when none is given: its run config's, with
    the beam size and alpha chosen on the dev set (`model_dir.read_chosen_decoding`) when
    recorded."""
    chosen = model_dir_lib.read_chosen_decoding(model_dir)
    return run.decoding.with_overrides(**chosen.overrides()) if chosen else run.decoding


def check_one_source(model=None, model_dir=None, ensemble=None) -> None:
    """ValueError unless exactly one of a SavedModel directory, a model directory and the
    run directories of an ensemble is given."""
    if sum(source is not None for source in (model, model_dir, ensemble)) != 1:
        raise ValueError("give exactly one of a SavedModel directory, a model directory "
                         "or the run directories of an ensemble")


def source_decoding(model=None, model_dir=None, ensemble=None) -> DecodingConfig:
    """The search settings of exactly one of a SavedModel directory (`model`: those it was
    exported with), a training run (`model_dir`: `run_decoding`) or the runs of an
    ensemble (the first run's), used when a caller gives none. Reads JSON files only."""
    check_one_source(model, model_dir, ensemble)
    if model is not None:
        return DecodingConfig.from_config(read_export_info(model)["decoding"])
    model_dir = model_dir if model_dir is not None else ensemble[0]
    return run_decoding(model_dir, model_dir_lib.read_run_config(model_dir))


def load_trained(model_dir, checkpoint=None, decoding: DecodingConfig | None = None,
                 precision: str = "float32"):
    """(model, tokenizer, run_config, checkpoint_path) of a training run's model directory;
    the run config's decoding is `decoding`, or when None the run's own (`run_decoding`);
    the model computes in `precision` (`serving_dtype_policy`). Reads only the model
    directory (its run config, choices, tokenizer and checkpoints)."""
    policy = serving_dtype_policy(precision)
    run = model_dir_lib.read_run_config(model_dir)
    run = dataclasses.replace(run, decoding=decoding or run_decoding(model_dir, run))
    path = pick_checkpoint(model_dir, checkpoint)
    model = build_model(run.family, run.model, dtype=policy)
    checkpoints.load_weights(model, path)
    tokenizer = make_tokenizer(model_dir_lib.read_tokenizer_proto(model_dir))
    return model, tokenizer, run, path


class EnsembleMismatchError(ValueError):
    """Runs that cannot be decoded together; the message names the run at fault."""


def check_ensemble_runs(model_dirs) -> None:
    """Raises `EnsembleMismatchError` unless the runs in `model_dirs` (at least one) share
    one tokenizer (the sha256 of their bpe.model files, `model_dir.tokenizer_sha256`) and,
    where both recorded it, the language pair; the message names the first run that
    differs from the first one. Reads run configs and tokenizers only (no model)."""
    if not model_dirs:
        raise EnsembleMismatchError("--ensemble: give at least one run directory")
    first, first_run = model_dirs[0], model_dir_lib.read_run_config(model_dirs[0])
    first_sha = model_dir_lib.tokenizer_sha256(model_dir_lib.read_tokenizer_proto(first))
    for other in model_dirs[1:]:
        run = model_dir_lib.read_run_config(other)
        sha = model_dir_lib.tokenizer_sha256(model_dir_lib.read_tokenizer_proto(other))
        if sha != first_sha:
            raise EnsembleMismatchError(
                f"{other}: its tokenizer (bpe.model sha256 {sha[:12]}...) is not the one of "
                f"{first} (sha256 {first_sha[:12]}...); ensemble members must share one "
                "tokenizer (train them on the same prepared data)")
        for side in ("source_language", "target_language"):
            mine, theirs = getattr(run, side), getattr(first_run, side)
            if mine and theirs and mine != theirs:
                raise EnsembleMismatchError(
                    f"{other}: its {side.replace('_', ' ')} is {mine!r}, {first}'s is "
                    f"{theirs!r}; ensemble members must translate the same language pair")


def load_ensemble(model_dirs, decoding: DecodingConfig | None = None,
                  precision: str = "float32"):
    """(ensemble, tokenizer, run_config, checkpoint paths) of training runs decoded
    together (`models.ensemble.Ensemble`), each run at its default checkpoint
    (`default_checkpoint`), computing in `precision`. The runs are checked first
    (`check_ensemble_runs`); the decoding settings are `decoding`, or when None the first
    run's."""
    model_dirs = [str(d) for d in model_dirs]
    check_ensemble_runs(model_dirs)
    loaded = [load_trained(model_dir, decoding=decoding, precision=precision)
              for model_dir in model_dirs]
    _, tokenizer, run, _ = loaded[0]
    members, paths = [model for model, *_ in loaded], [path for *_, path in loaded]
    return Ensemble(members), tokenizer, run, paths


def read_export_info(saved_model_dir) -> dict:
    path = pathlib.Path(saved_model_dir) / EXTRA_DIR / EXPORT_INFO
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: not a SavedModel exported by transformer_tf")
    info = read_json_file(path)
    if not isinstance(info, dict):
        raise JsonFileError(f"{path}: not a transformer_tf export description")
    return info


def load_saved_model(saved_model_dir):
    """`tf.saved_model.load` of an export; a damaged one (a truncated variables file, a
    missing or corrupt saved_model.pb) raises ValueError naming the directory instead of
    TensorFlow's traceback."""
    try:
        return tf.saved_model.load(str(saved_model_dir))
    except (tf.errors.OpError, IndexError, ValueError, OSError) as error:
        raise ValueError(f"{saved_model_dir}: the SavedModel cannot be loaded "
                         f"({error_text.summary(error)}); export it again") from None


def read_bpe_model(saved_model_dir) -> bytes:
    """The sentencepiece model proto exported with the SavedModel."""
    return (pathlib.Path(saved_model_dir) / EXTRA_DIR / BPE_MODEL).read_bytes()


def model_from_saved_model(saved_model_dir):
    """(model, tokenizer, export_info): the model rebuilt from a SavedModel's variables, in
    the precision it was exported in."""
    saved_model_dir = pathlib.Path(saved_model_dir)
    info = read_export_info(saved_model_dir)
    policy = serving_dtype_policy(info.get("precision", "float32"))
    if info.get("family") == Ensemble.family:
        model = build_ensemble(info["model"], dtype=policy)
    elif "family" in info:
        model = build_model(info["family"], info["model"], dtype=policy)
    else:  # exported before the format recorded the family
        model = build_model(DEFAULT_FAMILY, model_dir_lib.upgrade_format_1_model(info["model"]),
                            dtype=policy)
    checkpoints.load_weights(model, saved_model_dir / "variables" / "variables")
    return model, make_tokenizer(read_bpe_model(saved_model_dir)), info


def translator_from_saved_model(saved_model_dir, decoding: DecodingConfig,
                                n_best: int | None = None) -> Translator:
    """A fresh Translator with other search settings, weights read from a SavedModel."""
    model, tokenizer, _ = model_from_saved_model(saved_model_dir)
    return Translator(model, tokenizer, decoding, n_best=n_best)
