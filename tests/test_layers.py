"""Imports only run down the floors (config, runtime, presets -> layers/data/decoding/evaluation ->
models, visualization -> rundir -> training -> inference -> export -> jobs -> cli).

Every `import` statement of the package is read from its source, those inside functions
included (a lazy import of a higher layer is still an arrow up), and checked against the
ranks; reading the source costs no TensorFlow start-up, which a fresh interpreter per
package did (about 75 s of CPU in the suite)."""
from __future__ import annotations

import ast
import pathlib

import pytest

import transformer_tf

RANKS = {"config": 0, "runtime": 0, "presets": 0, "layers": 1, "data": 1, "decoding": 1, "evaluation": 1,
         "models": 2, "visualization": 2, "rundir": 3, "training": 4, "inference": 5,
         "export": 6, "jobs": 7, "cli": 8}
ROOT = pathlib.Path(transformer_tf.__file__).parent


def layer_of(module: str) -> str:
    """'transformer_tf.models.transformer' -> 'models'."""
    return module.split(".")[1]


def imported_modules(source: str, module: str, is_package: bool) -> list[str]:
    """The transformer_tf modules named by the import statements of `source`, the code of
    `module` (dotted name); relative imports are resolved as Python does."""
    package = module if is_package else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            # Each name may be a module (`from transformer_tf import training`, `from .
            # import attention`); its layer is right either way.
            found += [f"{name}.{alias.name}" for alias in node.names]
    return [name for name in found if name.startswith("transformer_tf.")]


def arrows_up(module: str, source: str, is_package: bool = False) -> list[str]:
    """The imports in `source` of a layer ranked above `module`'s own."""
    rank = RANKS[layer_of(module)]
    return [name for name in imported_modules(source, module, is_package)
            if RANKS[layer_of(name)] > rank]


def package_modules():
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        if parts:  # (the top __init__ belongs to no layer)
            yield ".".join(("transformer_tf",) + parts), path, is_package


@pytest.mark.parametrize("package", sorted(RANKS))
def test_package_imports_no_higher_layer(package):
    modules = [m for m in package_modules() if layer_of(m[0]) == package]
    assert modules, f"no module found for layer {package}"
    higher = {module: arrows_up(module, path.read_text(), is_package)
              for module, path, is_package in modules}
    violations = {module: up for module, up in higher.items() if up}
    assert not violations, f"transformer_tf.{package} imports higher layers: {violations}"


def test_the_reader_sees_every_form_of_import():
    source = ("import transformer_tf.jobs.main_job\n"
              "from ..training import fit\n"
              "from . import attention\n"
              "def later():\n"
              "    from transformer_tf import export\n"
              "    from transformer_tf.config import ModelConfig\n")
    assert imported_modules(source, "transformer_tf.models.transformer", False) == [
        "transformer_tf.jobs.main_job", "transformer_tf.training.fit",
        "transformer_tf.models.attention", "transformer_tf.export",
        "transformer_tf.config.ModelConfig"]
    assert arrows_up("transformer_tf.models.transformer", source) == [
        "transformer_tf.jobs.main_job", "transformer_tf.training.fit", "transformer_tf.export"]
    # In a package's __init__, one dot is the package itself.
    assert imported_modules("from .fit import train\n", "transformer_tf.training",
                            True) == ["transformer_tf.training.fit.train"]


def test_every_package_has_a_rank():
    names = {p.stem for p in ROOT.iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or
             (p.suffix == ".py" and p.stem != "__init__")}
    assert names == set(RANKS)


def test_the_search_knows_no_task():
    """decoding/ is driven by a step function and takes a task's constraint as an argument:
    it imports nothing from the corpora and tasks of data/ (the tree grammar of parsing
    lives in data/tree_grammar.py and is passed in by the translator)."""
    imports = {module: [name for name in imported_modules(path.read_text(), module, is_package)
                        if layer_of(name) == "data"]
               for module, path, is_package in package_modules()
               if layer_of(module) == "decoding"}
    assert not {module: names for module, names in imports.items() if names}
