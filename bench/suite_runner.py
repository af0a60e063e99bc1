"""Runs bench/run_all.py's workers: one subprocess at a time, what each one said kept,
the better of two rounds' results, and how many calls each workload times."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import common

BENCH = Path(__file__).resolve().parent
WORKERS = BENCH / "workers"

PEER_MODULES = {"torch": ["torch"], "ctranslate2": ["ctranslate2"],
                "hf": ["transformers", "torch"]}


def log(message: str) -> None:
    print(f"[run_all {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def missing_modules(names) -> str | None:
    """None when every module can be imported, else why not (without importing it)."""
    missing = [n for n in names if importlib.util.find_spec(n) is None]
    if missing:
        return (f"not installed: {', '.join(missing)} "
                "(pip install -e '.[bench]'; first, for torch's CPU build: pip install "
                "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu)")
    return None


class Runner:
    """Starts workers one at a time and keeps what each one said."""

    def __init__(self, timeout: float, without=()):
        self.timeout = timeout
        self.without = set(without)
        self.workers: dict[str, dict] = {}
        self.results: dict[str, dict] = {}  # best result so far per worker (--rounds)
        self.temporary: list[str] = []  # directories removed when the suite ends

    def run(self, name: str, script: str, args: list[str],
            needs=(), env: dict[str, str] | None = None) -> tuple[dict | None, str | None]:
        """(result, None) or (None, reason); with several rounds, the best result so far.
        `env`: variables set for this worker on top of the suite's environment."""
        result, reason = self._run_once(name, script, args, needs, env)
        previous = self.results.get(name)
        if result is None:
            return (previous, None) if previous is not None else (None, reason)
        self.results[name] = result if previous is None else merge_results(previous, result)
        return self.results[name], None

    def _run_once(self, name, script, args, needs, env=None):
        reason = missing_modules(needs)
        disabled = sorted(self.without & set(needs))
        if disabled:
            reason = f"disabled with --without {','.join(disabled)}"
        if reason is not None:
            self.workers[name] = {"ok": False, "seconds": 0.0, "rounds": 0, "error": reason}
            log(f"{name}: skipped, {reason}")
            return None, reason
        path = WORKERS / f"{script}.py"
        if not path.exists():  # a script of bench/ itself (e.g. layer_scaling)
            path = BENCH / f"{script}.py"
        command = [sys.executable, str(path), *args]
        settings = "".join(f"{key}={value} " for key, value in (env or {}).items())
        log(f"{name}: {settings}{' '.join(command[1:])}")
        start = time.perf_counter()
        try:
            proc = subprocess.run(command, capture_output=True, text=True,
                                  timeout=self.timeout, cwd=str(common.ROOT),
                                  env={**os.environ, **env} if env else None)
        except subprocess.TimeoutExpired:
            seconds = time.perf_counter() - start
            reason = f"timed out after {seconds:.0f} s"
            self._record(name, False, seconds, reason)
            log(f"{name}: {reason}")
            return None, reason
        seconds = time.perf_counter() - start
        result = None
        for line in reversed(proc.stdout.strip().splitlines()):
            try:
                result = json.loads(line)
                break
            except json.JSONDecodeError:
                continue
        if proc.returncode != 0 or not isinstance(result, dict):
            tail = [line for line in (proc.stderr or proc.stdout).strip().splitlines()
                    if line.strip()][-6:]
            reason = f"exit code {proc.returncode}: " + " | ".join(tail)[-1200:]
            self._record(name, False, seconds, reason)
            log(f"{name}: FAILED {reason}")
            return None, reason
        self._record(name, True, seconds)
        log(f"{name}: done in {seconds:.0f} s")
        return result, None

    def _record(self, name, ok, seconds, error=None):
        entry = self.workers.setdefault(name, {"ok": False, "seconds": 0.0, "rounds": 0})
        entry["seconds"] = round(entry["seconds"] + seconds, 1)
        entry["rounds"] += 1
        entry["ok"] = entry["ok"] or ok
        if error is not None:
            entry.setdefault("errors", []).append(error)
            if not entry["ok"]:
                entry["error"] = error


# The figure that decides which of two results of the same worker is kept (--rounds).
_PRIMARY = ("target_tokens_per_s", "output_tokens_per_s", "peak_gflops",
            "padded_target_positions_per_s")


def _primary(result: dict):
    for key in _PRIMARY:
        if result.get(key) is not None:
            return key, result[key]
    return None, None


# What tells a decode worker's runs apart: one configuration each (the CTranslate2 peer
# runs every configuration in each of its compute types).
_CONFIGURATION = ("shape", "beam", "xla", "batch", "compute_type")


def merge_results(a: dict, b: dict) -> dict:
    """The better of two results of one worker (decode workers: per configuration).

    Every round's primary figure is kept in "all_rounds", so the spread stays visible.
    """
    if "runs" in a and "runs" in b:
        def key(run):
            return tuple(run.get(field) for field in _CONFIGURATION)

        merged = dict(b)
        by_key = {key(r): r for r in a["runs"]}
        runs = []
        for run in b["runs"]:
            old = by_key.pop(key(run), None)
            runs.append(run if old is None else merge_results(old, run))
        merged["runs"] = runs + list(by_key.values())
        return merged
    name, value_a = _primary(a)
    _, value_b = _primary(b)
    if name is None:
        return b
    best = dict(b if (value_b or 0) >= (value_a or 0) else a)
    best["all_rounds"] = a.get("all_rounds", [value_a]) + [value_b]
    return best


def plan(quick: bool) -> dict:
    """Repeats per workload: (warm-up calls, timed calls, seconds cap on timed calls)."""
    if quick:
        return {"train_big": (1, 1, None), "train_small": (1, 5, 8.0),
                "decode": (1, 3, 4.0), "decode_xla": (), "pipeline_epochs": 1,
                "timeout": 600.0, "matmul_repeats": 10}
    return {"train_big": (2, 5, 60.0), "train_small": (2, 20, 30.0),
            "decode": (1, 5, 30.0), "decode_xla": ("on",), "pipeline_epochs": 2,
            "timeout": 2400.0, "matmul_repeats": 30}


def repeat_args(spec) -> list[str]:
    warmup, repeats, cap = spec
    args = ["--warmup", str(warmup), "--repeats", str(repeats)]
    if cap is not None:
        args += ["--max-seconds", str(cap)]
    return args
