"""What setup.py declares against what the package imports and what `make test` installs.

- Every third-party top-level import in transformer_tf/ (read with ast) comes from a
  distribution (importlib.metadata.packages_distributions) that setup.py declares, in
  install_requires or an extra.
- A distribution that only an extra declares is imported inside functions only, so the
  package and its commands load without it (and say what to install when it is needed).
"""
import ast
import importlib.metadata
import pathlib
import sys

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = REPO / "transformer_tf"


def third_party_imports() -> dict[str, list[tuple[str, bool]]]:
    """{top-level module: [("file:line", imported at module level?), ...]} of transformer_tf/."""
    found: dict[str, list[tuple[str, bool]]] = {}

    def visit(node, path, at_module_level):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0:
                names = [child.module]
            else:
                inside = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                visit(child, path, at_module_level and not inside)
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "transformer_tf":
                    site = f"{path.relative_to(REPO)}:{child.lineno}"
                    found.setdefault(top, []).append((site, at_module_level))

    for path in sorted(PACKAGE.rglob("*.py")):
        visit(ast.parse(path.read_text(encoding="utf-8")), path, True)
    return found


def declared(info) -> dict[str, dict[str, Requirement]]:
    """{"": core requirements, extra: its requirements}, each {canonical name: Requirement}."""
    distribution = importlib.metadata.PathDistribution(info)
    requirements = [Requirement(line) for line in distribution.requires]
    groups = {"": {canonicalize_name(r.name): r for r in requirements if r.marker is None}}
    for extra in distribution.metadata.get_all("Provides-Extra"):
        groups[extra] = {canonicalize_name(r.name): r for r in requirements
                         if r.marker is not None and r.marker.evaluate({"extra": extra})}
    return groups


@pytest.fixture(scope="module")
def requirements(setup_metadata):
    return declared(setup_metadata)


@pytest.fixture(scope="module")
def imports():
    found = third_party_imports()
    assert {"tensorflow", "numpy", "regex", "etils"} <= set(found)  # the walk sees them
    return found


@pytest.fixture(scope="module")
def providers():
    """{top-level module: {canonical names of the installed distributions providing it}}."""
    return {module: {canonicalize_name(name) for name in names}
            for module, names in importlib.metadata.packages_distributions().items()}


def test_every_third_party_import_is_declared(requirements, imports, providers):
    anywhere = set().union(*requirements.values())
    missing = {}
    for module, sites in imports.items():
        providing = providers.get(module, set())
        assert providing, f"{module} ({sites[0][0]}): no installed distribution provides it"
        if not providing & anywhere:
            missing[module] = sorted(providing), [site for site, _ in sites]
    assert not missing, f"imported but not declared in setup.py: {missing}"


def test_a_distribution_only_an_extra_declares_is_imported_lazily(requirements, imports,
                                                                 providers):
    core = set(requirements[""])
    eager = {module: [site for site, top in sites if top]
             for module, sites in imports.items() if not providers.get(module, set()) & core}
    assert set(eager) >= {"ctranslate2", "matplotlib"}  # the extras' modules are seen
    assert all(not sites for sites in eager.values()), \
        f"imported at module level, but declared only in an extra: {eager}"

