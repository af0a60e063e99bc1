"""Where a measurement comes from, for the results files (results/README.md's `machine`
and `commit` fields): the CPU it ran on and the commit of the code that ran."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess

from transformer_tf.runtime import cpu

# The flags that decide training and decoding speed here (runtime/cpu.py reads them).
SHOWN_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16")
_CHECKOUT = pathlib.Path(__file__).resolve().parents[2]


def machine_description() -> str:
    """CPU model, cores and the instruction-set flags that matter for speed, e.g.
    "AMD EPYC, 2 cores; flags: avx2, fma", or "AMD EPYC, 2 cores, this process pinned to
    1 (taskset); flags: avx2, fma" when it may run on fewer cores than the machine has
    (TensorFlow sizes its thread pools by the cores a process may use)."""
    flags = cpu.read_cpu_flags()
    shown = [flag for flag in SHOWN_FLAGS if flag in flags]
    cores = f"{os.cpu_count()} cores"
    usable = _usable_cores()
    if usable is not None and usable < os.cpu_count():
        cores += f", this process pinned to {usable} (taskset)"
    return f"{cpu.cpu_model_name()}, {cores}; flags: {', '.join(shown) or 'none of AVX2/AVX-512'}"


def _usable_cores() -> int | None:
    """The number of cores this process may run on (its CPU affinity), or None where the
    platform does not say (macOS)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return None


def current_commit() -> str:
    """The short hash of HEAD of the checkout this package runs from, or "unknown" (an
    installed copy, or no git)."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=_CHECKOUT,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# The keys `where_this_runs` gives a study's rows: kept in results files, said in their
# conditions (`conditions_of`), not shown as columns.
WHERE_KEYS = ("trained_on", "trained_at_commit", "trained_alongside")


def where_this_runs(alongside: str | None = None) -> dict:
    """{"trained_on", "trained_at_commit"}: the machine and commit of this process, for a
    study's rows (a study may span machines and sittings, and HEAD may move while it runs:
    call it once when the process starts); with `alongside`, what else the machine ran
    meanwhile in the user's words (e.g. "the parsing ablation on the other core"), as
    "trained_alongside"."""
    here = {"trained_on": machine_description(), "trained_at_commit": current_commit()}
    if alongside:
        here["trained_alongside"] = alongside
    return here


SITTINGS_FILE = "sittings.jsonl"


def record_sitting(directory, here: dict, from_step: int) -> None:
    """Note in DIRECTORY/sittings.jsonl that this process (`here`, from `where_this_runs`)
    trains the run kept in `directory` on from step `from_step` (0: from the start). Call
    it before training: a study's row stopped and resumed in other sittings, perhaps at
    other commits or on another machine, then says where each part of it ran
    (`where_it_ran`)."""
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / SITTINGS_FILE, "a", encoding="utf-8") as sittings:
        sittings.write(json.dumps({"from_step": int(from_step), **here}) + "\n")


def where_it_ran(directory, here: dict, last_step: int) -> dict:
    """The WHERE_KEYS of the run in `directory`, trained up to `last_step` in the sittings
    `record_sitting` noted (`here` when none was noted). A key on which every sitting
    agrees keeps its one value; otherwise the value says each sitting's with the steps it
    trained, e.g. "1a2b3c4 (steps 0-1,250); 5d6e7f8 (steps 1,250-3,000)", and steps before
    the first noted sitting are "not recorded". Sittings that trained no step are left out
    (with none left, `here`). A sitting that resumed from an older checkpoint than the
    newest (which was damaged) retrained the steps after it: the earlier sittings' work
    from there on is not in the run."""
    path = pathlib.Path(directory) / SITTINGS_FILE
    noted = ([json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
              if line.strip()] if path.exists() else [])
    sittings = []  # the run's history: from_step increasing, each to the next's
    for sitting in noted:  # in the order they ran
        if sitting["from_step"] >= last_step:
            continue  # began where the run was already done
        while sittings and sittings[-1]["from_step"] >= sitting["from_step"]:
            sittings.pop()  # its steps from here on were trained again (or none saved)
        sittings.append(sitting)
    if not sittings:
        return dict(here)
    if sittings[0]["from_step"] > 0:
        sittings.insert(0, {"from_step": 0})
    where = {}
    for key in WHERE_KEYS:
        values = [sitting.get(key) for sitting in sittings]
        if len(set(values)) == 1:
            if values[0] is not None:
                where[key] = values[0]
            continue
        ends = [sitting["from_step"] for sitting in sittings[1:]] + [last_step]
        where[key] = "; ".join(
            f"{value or 'not recorded'} (steps {sitting['from_step']:,}-{end:,})"
            for value, sitting, end in zip(values, sittings, ends))
    return where


def _rows_by(rows: list[dict], key: str, name_key: str, missing: str) -> dict[str, list[str]]:
    """{value of `key` (or `missing`): the `name_key` of each row that has it}, in order."""
    grouped: dict[str, list[str]] = {}
    for row in rows:
        grouped.setdefault(row.get(key) or missing, []).append(str(row[name_key]))
    return grouped


def machines_of(rows: list[dict], name_key: str, noun: str) -> str:
    """Which machine trained which of a study's rows (their `trained_on`), in words: "every
    run on the machine named", or "runs on several machines: M1 (a, b); M2 (c)" with
    `noun` "run" and each row named by its `name_key`."""
    by_machine = _rows_by(rows, "trained_on", name_key, "machine not recorded")
    if len(by_machine) <= 1:
        return f"every {noun} on the machine named"
    return f"{noun}s on several machines: " + "; ".join(
        f"{machine} ({', '.join(names)})" for machine, names in by_machine.items())


def company_of(rows: list[dict], name_key: str, noun: str) -> str:
    """What else the machine ran while a study's rows trained (their `trained_alongside`),
    in words: "" when no row recorded it, "every run alongside X" when all recorded the
    same, else "runs alongside: X (a, b); nothing recorded (c)"."""
    by_company = _rows_by(rows, "trained_alongside", name_key, "nothing recorded")
    if list(by_company) == ["nothing recorded"]:
        return ""
    if len(by_company) == 1:
        return f"every {noun} alongside {next(iter(by_company))}"
    return f"{noun}s alongside: " + "; ".join(
        f"{company} ({', '.join(names)})" for company, names in by_company.items())


def conditions_of(rows: list[dict], name_key: str, noun: str) -> str:
    """The machines (`machines_of`) and the company (`company_of`) of a study's rows, in
    one clause for a results file's `conditions`."""
    return "; ".join(part for part in (company_of(rows, name_key, noun),
                                       machines_of(rows, name_key, noun)) if part)
