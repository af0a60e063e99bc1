"""What every end-to-end job shares: its stages on the console and their timing, the rule
for its work directory (another's files are not replaced) and the rule for where a job
exports (a new TF Serving version, never over an earlier one)."""
from __future__ import annotations

import pathlib
import time
from collections.abc import Iterable

from transformer_tf.export.versions import next_free_version
from transformer_tf.rundir.model_dir import RUN_CONFIG
from transformer_tf.runtime.gc_freeze import set_aside_live_objects
from transformer_tf.runtime.outputs import refuse_existing


class JobStages:
    """The stages of a job (the main job, the parsing job): a heading on the console as
    each begins, its wall time (seconds) when it is done.

    When a stage is done, the objects still alive are set aside from later garbage
    collections (`gc_freeze.set_aside_live_objects`: after training, rescanning them
    made the later stages' tracing 2-3 times slower). The jobs run as commands, so the
    process-wide freeze is theirs to make."""

    def __init__(self):
        self.started = self._clock = time.monotonic()
        self.seconds: dict[str, float] = {}

    @staticmethod
    def begin(heading: str) -> None:
        print(f"\n==> {heading}", flush=True)

    def done(self, name: str) -> None:
        now = time.monotonic()
        self.seconds[name] = round(now - self._clock, 1)
        set_aside_live_objects()
        self._clock = time.monotonic()

    def total_seconds(self) -> float:
        return round(time.monotonic() - self.started, 1)


def check_work_dir(work_dir, outputs: Iterable[str]) -> None:
    """Refuses (FileExistsError, naming them) files matching a job's output names (glob
    patterns in `work_dir`) when `work_dir` is not yet a job's work directory (it has no
    trained run in WORK/model): they are someone else's, and the job would replace them
    after training. In a job's own work directory they are its outputs, rewritten when
    the job runs again."""
    work_dir = pathlib.Path(work_dir)
    if (work_dir / "model" / RUN_CONFIG).exists() or not work_dir.is_dir():
        return
    refuse_existing(sorted(path for pattern in outputs for path in work_dir.glob(pattern)),
                    f"{work_dir} is not a job's work directory (no run in its model/), and "
                    "the job would replace them: give another --work-dir")


def export_version_dir(name_dir, version: int | None) -> pathlib.Path:
    """NAME_DIR/VERSION of a job's export: `version` if given (FileExistsError at once if
    that directory holds anything: a job never replaces an earlier export), else the next
    free version (`export.versions.next_free_version`): TF Serving moves to the new model,
    and the earlier versions stay on disk to go back to."""
    name_dir = pathlib.Path(name_dir)
    if version is None:
        return name_dir / str(next_free_version(name_dir))
    return check_export_free(name_dir / str(version))


def check_export_free(path) -> pathlib.Path:
    """`path` if nothing is there (or an empty directory); else FileExistsError."""
    path = pathlib.Path(path)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise FileExistsError(f"{path}: an export is already there; give another version, "
                              "or none for the next free one")
    return path
