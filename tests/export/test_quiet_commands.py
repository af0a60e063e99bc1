"""The quiet console of a real command under the user's own TF_CPP_MIN_LOG_LEVEL: with the
variable unset, 2 or 3, `scripts/translate.py --model` (TensorFlow, its CUDA stub, oneDNN
and the tensorflow-text sentencepiece op all loaded) writes nothing to stderr. (A level of
0 shows every line: tests/runtime/test_console.py; each run here costs a TensorFlow
start-up, about 10 s of CPU.)"""
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
OURS = ("TF_CPP_MIN_LOG_LEVEL", "TRANSFORMER_TF_VERBOSE")


def translate(export, level: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in OURS}
    env["PYTHONPATH"] = str(REPO)
    if level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "translate.py"), "--model", str(export),
         "--quiet"], input=b"A man is riding a bicycle.\n", capture_output=True, env=env,
        timeout=300, check=False)


@pytest.mark.parametrize("level", [None, "2", "3"])
def test_no_start_up_noise_unset_or_at_the_users_quiet_levels(serving_exports, level):
    done = translate(serving_exports["text"], level)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert done.stdout.count(b"\n") == 1
    assert done.stderr == b""

