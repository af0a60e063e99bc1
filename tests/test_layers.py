"""Imports only run down the layers (config, console -> layers/data/decoding/evaluation ->
models, visualization -> training -> inference -> export -> recipe, variations -> cli):
importing every module of a package in a fresh interpreter must not load a module of a
higher layer."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

RANKS = {"config": 0, "console": 0, "layers": 1, "data": 1, "decoding": 1, "evaluation": 1,
         "models": 2, "visualization": 2, "training": 3, "inference": 4, "export": 5,
         "recipe": 6, "variations": 6, "recipe_parsing": 6, "cli": 7}

IMPORT_ALL = r"""
import importlib, json, pkgutil, sys
name = sys.argv[1]
module = importlib.import_module(name)
for info in pkgutil.walk_packages(getattr(module, "__path__", []), name + "."):
    importlib.import_module(info.name)
print(json.dumps(sorted(m for m in sys.modules if m.startswith("transformer_tf."))))
"""


def layer_of(module: str) -> str:
    return module.split(".")[1]


@pytest.mark.parametrize("package", sorted(RANKS))
def test_package_imports_no_higher_layer(package):
    done = subprocess.run([sys.executable, "-c", IMPORT_ALL, f"transformer_tf.{package}"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert any(layer_of(m) == package for m in loaded)  # the walk did import the package
    higher = [m for m in loaded if RANKS[layer_of(m)] > RANKS[package]]
    assert not higher, f"transformer_tf.{package} pulls in higher layers: {higher}"


def test_every_package_has_a_rank():
    import pathlib

    import transformer_tf
    root = pathlib.Path(transformer_tf.__file__).parent
    names = {p.stem for p in root.iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or
             (p.suffix == ".py" and p.stem != "__init__")}
    assert names == set(RANKS)
