"""The suite's long modules are handed out first (tests/conftest.py's LONG_MODULES): each
named module exists, and `make test` keeps pytest-xdist from reordering the modules."""
import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _long_modules() -> list[str]:
    tree = ast.parse((ROOT / "tests" / "conftest.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["LONG_MODULES"]:
            return list(ast.literal_eval(node.value))
    raise AssertionError("tests/conftest.py has no LONG_MODULES")


def test_every_long_module_exists_once():
    modules = _long_modules()
    assert len(modules) == len(set(modules))
    assert [m for m in modules if not (ROOT / m).is_file()] == []


def test_make_test_hands_out_modules_in_collection_order():
    recipe = (ROOT / "Makefile").read_text().split("\ntest: install\n")[1].split("\n\n")[0]
    command = re.sub(r"\\\n\s*", " ", recipe)
    assert "--dist loadscope" in command and "--no-loadscope-reorder" in command
