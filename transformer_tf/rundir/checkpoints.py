"""Training checkpoints (tf.train.CheckpointManager): listing, checking, restoring them
(averaging them: training/averaging.py).

Layout under a model directory:
    MDIR/checkpoints/ckpt-<step>.{index,data-*}  the last K training checkpoints
    MDIR/checkpoints/checkpoint                  the manager's state file
    MDIR/checkpoints/best/                       the best checkpoint by dev BLEU, out of
                                                 the manager's window (best_checkpoint.py)

Each checkpoint holds the model, the optimizer (iteration count, Adam moments) and, from
the training driver, the number of training batches consumed (the data position; it is
not the step count when gradients are accumulated over several batches, or when loss
scaling skips a step), so a resumed run continues with the same step count, optimizer
state and data position. TensorFlow writes a
checkpoint's files under temporary names and renames them, and rewrites the state file
atomically, so a run killed during a save leaves the previous checkpoint intact (and a
`ckpt-<step>_temp/` directory, removed by `remove_interrupted_saves` when the next run
starts).

Damaged checkpoints (a truncated or deleted data file, a garbage index, a prefix that
names nothing) raise `CheckpointError`, whose message is "<file>: <what is wrong>";
`checkpoint_problem` is the one rule for "is this checkpoint readable". Where the code
chooses the checkpoint itself (the newest, the last N to average) it skips damaged ones
with a warning and takes the newest readable ones (`readable_checkpoints`).
"""
from __future__ import annotations

import contextlib
import gc
import glob
import logging
import os
import pathlib
import re
import shutil

import numpy as np
import tensorflow as tf

from transformer_tf.runtime import error_text

logger = logging.getLogger(__name__)

CHECKPOINT_SUBDIR = "checkpoints"


def checkpoint_dir(model_dir) -> pathlib.Path:
    return pathlib.Path(model_dir) / CHECKPOINT_SUBDIR


BATCHES_KEY = "batches/.ATTRIBUTES/VARIABLE_VALUE"
# The run's training time (seconds, float64) up to the checkpoint: a training_state entry.
TRAINED_SECONDS = "trained_seconds"


def trained_seconds(path) -> float:
    """Seconds the run had trained when checkpoint `path` was saved (0.0 for checkpoints
    written before this was recorded)."""
    reader = tf.train.load_checkpoint(str(path))
    key = f"{TRAINED_SECONDS}/.ATTRIBUTES/VARIABLE_VALUE"
    return float(reader.get_tensor(key)) if reader.has_tensor(key) else 0.0


def make_manager(model, optimizer, model_dir, max_to_keep: int,
                 batches: tf.Variable | None = None,
                 training_state: dict | None = None) -> tf.train.CheckpointManager:
    """A manager saving model and optimizer as MDIR/checkpoints/ckpt-<step>.

    `batches`, if given, is an int64 variable counting the training batches consumed,
    saved (and restored by `restore_latest`) with them. `training_state` maps names to
    more variables of the run (e.g. the best dev loss of a plateau schedule), saved and
    restored the same way.
    """
    objects = {"model": model, "optimizer": optimizer, **(training_state or {})}
    if batches is not None:
        objects["batches"] = batches
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(**objects), str(checkpoint_dir(model_dir)),
        max_to_keep=max_to_keep, step_counter=optimizer.iterations, checkpoint_name="ckpt")
    manager.training_state = dict(training_state or {})
    return manager


def restore_latest(manager: tf.train.CheckpointManager) -> int:
    """Restore the newest readable checkpoint of the manager's directory if there is one
    (damaged newer ones skipped with a warning); returns the restored step (0 if there is
    no checkpoint). Raises `CheckpointError` when checkpoints exist and none is readable.

    Optimizer slot variables must exist before restoring: build the optimizer first. The
    batch counter keeps its value if the checkpoint has none (written before it existed).
    """
    model_dir = pathlib.Path(manager.directory).parent
    found = list_checkpoints(model_dir)
    if not found:
        return 0
    good = readable_checkpoints(found, wanted=1)
    if not good:
        raise CheckpointError(checkpoint_problem(found[-1]).path,
                              f"damaged, and so are the {len(found) - 1} older checkpoint(s) "
                              f"of {model_dir}; nothing was restored")
    latest = good[-1]
    checkpoint = manager.checkpoint
    with reading(latest):
        tf.train.Checkpoint(model=checkpoint.model, optimizer=checkpoint.optimizer) \
            .restore(latest).assert_existing_objects_matched().expect_partial()  # not `batches`
    batches = getattr(checkpoint, "batches", None)
    reader = tf.train.load_checkpoint(latest)
    if batches is not None and reader.has_tensor(BATCHES_KEY):
        batches.assign(reader.get_tensor(BATCHES_KEY))
    for name, variable in getattr(manager, "training_state", {}).items():
        key = f"{name}/.ATTRIBUTES/VARIABLE_VALUE"
        if reader.has_tensor(key):  # absent from checkpoints written before it existed
            variable.assign(reader.get_tensor(key))
    return int(checkpoint.optimizer.iterations.numpy())


def checkpoint_step(path) -> int:
    """The step of a training checkpoint prefix `.../ckpt-<step>`."""
    return int(str(path).rsplit("-", 1)[1])


_CHECKPOINT_INDEX = re.compile(r"^ckpt-(\d+)\.index$")
STATE_FILE = "checkpoint"  # the manager's state file in MDIR/checkpoints
DAMAGED_SUBDIR = "damaged"
_reported_state_problems: set = set()


def checkpoints_on_disk(model_dir) -> list[str]:
    """Prefixes of the `ckpt-<step>` checkpoints whose index file is in MDIR/checkpoints,
    lowest step first."""
    directory = checkpoint_dir(model_dir)
    if not directory.is_dir():
        return []
    found = [(int(match.group(1)), str(directory / f"ckpt-{match.group(1)}"))
             for match in map(_CHECKPOINT_INDEX.match, os.listdir(directory)) if match]
    return [prefix for _, prefix in sorted(found)]


def state_problem(model_dir, found: list[str] | None = None) -> str | None:
    """What is wrong with MDIR/checkpoints/checkpoint (the manager's list of its
    checkpoints) given the checkpoints `found` on disk, or None when it lists exactly
    those, newest last."""
    found = checkpoints_on_disk(model_dir) if found is None else found
    path = checkpoint_dir(model_dir) / STATE_FILE
    if not path.exists():
        return f"{path} is missing" if found else None
    state = tf.train.get_checkpoint_state(str(checkpoint_dir(model_dir)))
    if state is None:
        return f"{path} is unreadable"
    listed = [pathlib.Path(p).name for p in state.all_model_checkpoint_paths]
    names = [pathlib.Path(p).name for p in found]
    latest = pathlib.Path(state.model_checkpoint_path).name
    if sorted(listed) != sorted(names) or (names and latest != names[-1]):
        unlisted = sorted(set(names) - set(listed), key=checkpoint_step)
        gone = sorted(set(listed) - set(names), key=checkpoint_step)
        return (f"{path} lists {len(listed)} checkpoint(s), newest {latest or 'none'}, but "
                f"{len(names)} are present" + (f" ({', '.join(unlisted)} not listed)" if unlisted
                                              else "") +
                (f" ({', '.join(gone)} listed but absent)" if gone else ""))
    return None


def list_checkpoints(model_dir) -> list[str]:
    """Checkpoint prefixes of MDIR, oldest first: the `ckpt-<step>` checkpoints present.

    The files decide, not the manager's state file: when that file is missing, unreadable
    or lists other checkpoints (a crash, a copy, a hand edit), a warning says so once and
    the checkpoints present are used; `train` rewrites it (`repair_checkpoint_state`)."""
    found = checkpoints_on_disk(model_dir)
    problem = state_problem(model_dir, found)
    if problem is not None and problem not in _reported_state_problems:
        _reported_state_problems.add(problem)
        logger.warning("%s; using the %d checkpoint(s) present", problem, len(found))
    return found


def data_shards(prefix) -> list[str]:
    """The .data-*-of-* files of the checkpoint at `prefix`, sorted. A prefix is a path,
    not a pattern: "[" or "*" in it are characters of its name."""
    return sorted(glob.glob(glob.escape(str(prefix)) + ".data-*-of-*"))


def checkpoint_files(prefix) -> list[str]:
    """The files of the checkpoint at `prefix` that exist: its .index, then `data_shards`."""
    index = f"{prefix}.index"
    return ([index] if os.path.isfile(index) else []) + data_shards(prefix)


def _aside_directory(root: pathlib.Path, names: list[str]) -> pathlib.Path:
    """`root`, or root/2, root/3, ...: the first that holds none of `names` (made if
    missing), so a checkpoint damaged twice at the same step keeps both copies."""
    directory, number = root, 1
    while any((directory / name).exists() for name in names):
        number += 1
        directory = root / str(number)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def repair_checkpoint_state(model_dir) -> list[pathlib.Path]:
    """Before a run resumes (holding the run's lock): damaged checkpoints newer than the
    newest readable one are moved to MDIR/checkpoints/damaged/ (kept for inspection, out
    of the run's way; into damaged/2/, 3/, ... when files of their names are there), and
    the state file is rewritten from the checkpoints present when it does not list
    exactly them. Each change is logged as a warning. Returns the moved
    files. Raises `CheckpointError` when checkpoints exist and none is readable: a resume
    must not silently start again from step 0."""
    found = checkpoints_on_disk(model_dir)
    if not found:
        return []
    good = readable_checkpoints(found, wanted=1)
    if not good:
        raise CheckpointError(checkpoint_problem(found[-1]).path,
                              f"damaged, and so are the {len(found) - 1} older checkpoint(s) "
                              f"of {model_dir}; nothing was restored. Move "
                              f"{checkpoint_dir(model_dir)} aside to train from the start")
    moved = []
    newer = [p for p in found if checkpoint_step(p) > checkpoint_step(good[-1])]
    if newer:
        files = [path for prefix in newer for path in checkpoint_files(prefix)]
        aside = _aside_directory(checkpoint_dir(model_dir) / DAMAGED_SUBDIR,
                                 [pathlib.Path(path).name for path in files])
        for path in files:
            target = aside / pathlib.Path(path).name
            os.replace(path, target)
            moved.append(target)
        logger.warning("moved the damaged checkpoint(s) %s to %s; resuming from %s",
                       ", ".join(pathlib.Path(p).name for p in newer), aside,
                       pathlib.Path(good[-1]).name)
        found = [p for p in found if p not in newer]
    problem = state_problem(model_dir, found)
    if problem is not None:
        names = [pathlib.Path(p).name for p in found]
        # Each with its save time: the manager then keeps them in its rotation (entries
        # without times it treats as preserved for ever and drops from its list).
        times = [os.path.getmtime(p + ".index") for p in found]
        tf.compat.v1.train.update_checkpoint_state(
            str(checkpoint_dir(model_dir)), names[-1], all_model_checkpoint_paths=names,
            all_model_checkpoint_timestamps=times, last_preserved_timestamp=min(times) - 1.0)
        logger.warning("%s; rewrote it from the %d checkpoint(s) present (newest %s)",
                       problem, len(names), names[-1])
    return moved


class CheckpointError(ValueError):
    """A checkpoint cannot be used; str() is "<file>: <what is wrong>".

    Attributes:
      path: the file at fault (an .index or .data-* file, or the prefix).
      problem: what is wrong with it.
    """

    def __init__(self, path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


def checkpoint_problem(prefix) -> CheckpointError | None:
    """What makes the checkpoint at `prefix` unreadable, or None if it looks whole.

    Checks the index (present, parseable) and the data shards it needs: present, and
    together at least as large as the tensors the index lists (the fixed-size ones from
    their shapes, the strings -- the object graph -- read). The weights themselves are not
    read, so checking a run's checkpoints costs little; the rare damage this misses is
    reported the same way when the weights are read (`reading`).
    """
    prefix = str(prefix)
    index = f"{prefix}.index"
    if not os.path.isfile(index):
        return CheckpointError(index, "not found (no checkpoint with this prefix)")
    shards = data_shards(prefix)
    if not shards:
        return CheckpointError(f"{prefix}.data-00000-of-00001",
                               "missing (the checkpoint's weights; deleted?)")
    total = int(re.search(r"-of-(\d+)$", shards[0]).group(1))
    for shard in range(total):
        name = f"{prefix}.data-{shard:05d}-of-{total:05d}"
        if name not in shards:
            return CheckpointError(name, "missing (the checkpoint's weights; deleted?)")
    try:
        reader = tf.train.load_checkpoint(prefix)
        shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    except (tf.errors.OpError, ValueError) as error:
        return CheckpointError(index, f"not a readable checkpoint index ({error_text.summary(error)})")
    where = shards[0] if len(shards) == 1 else f"{prefix}.data-*"
    try:
        strings = [np.asarray(reader.get_tensor(key), dtype=object).ravel()
                   for key in shapes if dtypes[key] == tf.string]
    except (IndexError, tf.errors.OpError) as error:
        return CheckpointError(where, f"truncated or damaged ({error_text.summary(error)})")
    needed = sum(int(np.prod(shapes[key])) * dtypes[key].size
                 for key in shapes if dtypes[key] != tf.string)
    needed += sum(len(value) for values in strings for value in values)
    present = sum(os.path.getsize(shard) for shard in shards)
    if present < needed:
        return CheckpointError(where, f"truncated: {present} bytes, but the index lists "
                                      f"{needed} bytes of tensors")
    return None


def check_readable(prefix) -> None:
    """Raises `CheckpointError` if `checkpoint_problem(prefix)` finds one."""
    problem = checkpoint_problem(prefix)
    if problem is not None:
        raise problem


@contextlib.contextmanager
def reading(prefix):
    """Reads of the checkpoint at `prefix` inside this block raise `CheckpointError`
    (naming the file) instead of TensorFlow's IndexError / OpError."""
    try:
        yield
    except (IndexError, tf.errors.OpError) as error:
        raise (checkpoint_problem(prefix) or CheckpointError(
            f"{prefix}.data-*", f"cannot be read ({error_text.summary(error)})")) from None


def readable_checkpoints(paths: list[str], wanted: int | None = None) -> list[str]:
    """The newest `wanted` (default: all) of `paths` (oldest first) that are readable,
    oldest first; each damaged one met on the way is logged as a warning."""
    good = []
    for path in reversed(paths):
        if wanted is not None and len(good) >= wanted:
            break
        problem = checkpoint_problem(path)
        if problem is None:
            good.append(path)
        else:
            logger.warning("skipping a damaged checkpoint: %s", problem)
    return good[::-1]


def newest_readable(model_dir) -> str:
    """The newest readable training checkpoint of MDIR (damaged newer ones skipped with a
    warning). Raises FileNotFoundError without checkpoints, CheckpointError if none is
    readable (naming the newest one's problem)."""
    found = list_checkpoints(model_dir)
    if not found:
        raise FileNotFoundError(f"{model_dir}: no checkpoint found (train first)")
    good = readable_checkpoints(found, wanted=1)
    if not good:
        raise CheckpointError(checkpoint_problem(found[-1]).path,
                              f"damaged, and so are the {len(found) - 1} older checkpoint(s)"
                              f" of {model_dir}")
    return good[-1]


def resume_step(model_dir) -> int:
    """The step a run in MDIR resumes from: its newest readable checkpoint's, 0 without
    checkpoints (CheckpointError when none is readable, as for `newest_readable`)."""
    try:
        return checkpoint_step(newest_readable(model_dir))
    except FileNotFoundError:
        return 0


def remove_interrupted_saves(model_dir) -> list[pathlib.Path]:
    """Deletes the `ckpt-<step>_temp/` directories that saves killed midway leave in
    MDIR/checkpoints and its best/ (call only while holding the run's lock); returns them."""
    leftovers = sorted(p for pattern in ("*_temp", "best/*_temp")
                       for p in checkpoint_dir(model_dir).glob(pattern) if p.is_dir())
    for path in leftovers:
        shutil.rmtree(path, ignore_errors=True)
        logger.info("removed %s, left by an interrupted checkpoint save", path)
    return leftovers


@contextlib.contextmanager
def _tensorflow_warnings_off():
    tf_logger = logging.getLogger("tensorflow")
    level = tf_logger.level
    tf_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        tf_logger.setLevel(level)


def load_weights(model, checkpoint_path) -> None:
    """Load model weights from a training or averaged checkpoint (optimizer state ignored).

    Raises `CheckpointError` for a damaged checkpoint, or one that does not fit `model`
    (another configuration): one line naming the first variable that differs, not the
    warning per unrestored value TensorFlow logs when a failed restore is collected.
    The inference copies a translator's model keeps are refreshed.
    """
    path = str(checkpoint_path)
    check_readable(path)
    mismatch = None
    with _tensorflow_warnings_off(), reading(path):
        try:
            tf.train.Checkpoint(model=model).read(path).expect_partial() \
                .assert_existing_objects_matched()
        except (ValueError, AssertionError) as error:
            mismatch = error_text.summary(error)
        if mismatch is not None:
            gc.collect()  # the failed restore's status logs its warnings when collected
    if mismatch is not None:
        raise CheckpointError(path, "does not fit the model built from the configuration "
                                    f"(trained with another one?): {mismatch}")
    refresh_inference_weights(model)


def refresh_inference_weights(model) -> None:
    """Weights changed: a model that keeps inference copies of them
    (`Seq2SeqModel.keep_inference_weights`, a translator's) lays them out again."""
    if getattr(model, "keeps_inference_weights", False):
        model.keep_inference_weights()
