"""The docs site builds with `mkdocs build --strict`: a broken link, a page missing from
the navigation or a docstring mkdocstrings cannot read fails the suite."""
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None
                    or importlib.util.find_spec("mkdocstrings") is None,
                    reason="mkdocs is not installed: pip install -e '.[docs]'")
def test_the_docs_build_strictly(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        # Not --quiet: it hides the warnings from --strict, which then passes a broken link.
        [sys.executable, "-m", "mkdocs", "build", "--strict",
         "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert "Seq2SeqModel" in api and "decode_step" in api   # docstrings were rendered
