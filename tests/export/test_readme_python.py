"""The README's "From Python" examples run as written, on an export of the test suite's
tiny model in place of saved_models/multi30k_en_de/1, and print a translation."""
import contextlib
import io
import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"
DOCUMENTED_MODEL = "saved_models/multi30k_en_de/1"


def readme_python_blocks() -> list[str]:
    section = README.read_text(encoding="utf-8").split("## From Python", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_readme_shows_both_ways():
    blocks = readme_python_blocks()
    assert len(blocks) == 2 and all(DOCUMENTED_MODEL in block for block in blocks)


@pytest.mark.parametrize("which", [0, 1], ids=["package", "signature"])
def test_a_readme_python_example_runs(serving_exports, which):
    code = readme_python_blocks()[which].replace(DOCUMENTED_MODEL, str(serving_exports["text"]))
    out = io.StringIO()
    namespace = {}
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"README.md python block {which + 1}", "exec"), namespace)
    if which == 0:
        text, score = out.getvalue().rsplit(" ", 1)
        assert float(score) <= 0.0 and "\\n" not in text
