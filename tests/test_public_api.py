"""The package's public names (`transformer_tf.<name>`): each is the object its module
defines, an unknown name is an AttributeError, and importing the package loads no
TensorFlow (the names load on first use)."""
import importlib
import json
import subprocess
import sys

import pytest

import transformer_tf


@pytest.mark.parametrize("name", sorted(transformer_tf._PUBLIC))
def test_a_public_name_is_its_modules_object(name):
    module = importlib.import_module(transformer_tf._PUBLIC[name])
    assert getattr(transformer_tf, name) is getattr(module, name)
    assert name in dir(transformer_tf)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Transformr'"):
        transformer_tf.Transformr  # noqa: B018


def test_importing_the_package_loads_no_tensorflow():
    code = ("import json, sys, transformer_tf; dir(transformer_tf); "
            "print(json.dumps(sorted({'tensorflow', 'keras'} & set(sys.modules))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert json.loads(out.splitlines()[-1]) == []
