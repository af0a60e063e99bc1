"""What setup.py declares against what the package imports and what `make test` installs.

- Every third-party top-level import in transformer_tf/ (read with ast) comes from a
  distribution (importlib.metadata.packages_distributions) that setup.py declares, in
  install_requires or an extra.
- A distribution that only an extra declares is imported inside functions only, so the
  package and its commands load without it.
- constraints.txt pins, with ==, every distribution .[test] needs on this platform (what
  setup.py names and, through the installed metadata, what those need in turn), each
  within setup.py's range; not the package itself, nor the venv's packaging tools.
"""
import ast
import importlib.metadata
import pathlib
import sys

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = REPO / "transformer_tf"
# Left to the venv, as `pip freeze` leaves them (Makefile: constraints).
PACKAGING_TOOLS = {"pip", "setuptools", "wheel"}


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


def read_constraints() -> dict[str, str]:
    pins = {}
    for number, line in enumerate((REPO / "constraints.txt").read_text().splitlines(), 1):
        if line.strip() and not line.startswith("#"):
            name, separator, version = line.partition("==")
            assert separator and version, f"constraints.txt:{number}: not NAME==VERSION: {line}"
            pins[canonicalize_name(name)] = version
    return pins


def test_constraints_pin_what_test_needs_within_setup_pys_ranges(requirements):
    pins = read_constraints()
    assert "transformer-tf" not in pins and not PACKAGING_TOOLS & set(pins)
    wanted = {**requirements[""], **requirements["test"]}
    for name, requirement in wanted.items():
        assert name in pins, f"{requirement} (setup.py) is not pinned in constraints.txt"
        assert requirement.specifier.contains(pins[name], prereleases=True), \
            f"constraints.txt pins {name}=={pins[name]}, outside setup.py's {requirement}"
    # Closed under the pinned distributions' own requirements on this platform (read from
    # the installed metadata: `make test` installs exactly the pins).
    environment = default_environment()
    queue = [(name, set(requirement.extras)) for name, requirement in wanted.items()]
    seen = set()
    while queue:
        name, extras = queue.pop()
        if (name, frozenset(extras)) in seen:
            continue
        seen.add((name, frozenset(extras)))
        installed = importlib.metadata.distribution(name)
        assert installed.version == pins[name], \
            f"{name} {installed.version} installed, constraints.txt pins {pins[name]}"
        for line in installed.requires or []:
            requirement = Requirement(line)
            if requirement.marker is not None and not any(
                    requirement.marker.evaluate({**environment, "extra": extra})
                    for extra in extras | {""}):
                continue
            needed = canonicalize_name(requirement.name)
            if needed in PACKAGING_TOOLS:
                continue
            assert needed in pins, f"{name} needs {requirement}: not pinned in constraints.txt"
            assert requirement.specifier.contains(pins[needed], prereleases=True), \
                f"{name} needs {requirement}; constraints.txt pins {pins[needed]}"
            queue.append((needed, set(requirement.extras)))
