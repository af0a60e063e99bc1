# The two commands of the README:
#   make main   train on Multi30k En->De, average, decode test 2016, score, export, translate
#   make test   the test suite
# Both create .venv and install what they need first, at the versions of constraints.txt.
# Override PYTHON to pick the interpreter (Python 3.11: the version the suite runs on),
# TRANSFORMER_TF_DATA to point at the local corpora.

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
export TRANSFORMER_TF_DATA ?= $(abspath ../shared/data)
MAIN_ARGS ?=

.PHONY: main test install constraints docs docs-serve bench clean

$(VENV)/.installed: setup.py constraints.txt
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11 or run 'make PYTHON=/path/to/python3.11 ...'" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $@

install: $(VENV)/.installed

main: install
	$(PY) scripts/main_job.py $(MAIN_ARGS)

# pytest exits with 5 when it collects no test: that is a failure here, not a pass.
# TEST_WORKERS processes (pytest-xdist): tracing, compiling and waiting on child processes
# are single-threaded, so three workers keep 2 cores busier than two.
# --dist loadscope keeps each test module on one worker, so a module's fixtures (a trained
# run, a set of exports) are built once, not once per worker; --no-loadscope-reorder hands
# the modules out in collection order, the long ones first (tests/conftest.py).
# --durations: the 25 slowest tests, to watch the suite's 15-minute budget on 2 cores.
TEST_WORKERS ?= 3
test: install
	$(PY) -m pytest -q --timeout=900 -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder \
		--durations=25

# constraints.txt pins every distribution that .[test] needs (the package itself and the
# venv's pip, setuptools and wheel aside) at the version installed in .venv, as pip
# resolves .[test] against them. After changing a requirement in setup.py, or upgrading
# a package in .venv on purpose, run `make constraints` and commit constraints.txt.
define PINS_FROM_REPORT
import json, sys
print("# What `make test` installs: .[test] as resolved in .venv. Written by `make constraints`.")
for item in sorted(json.load(sys.stdin)["install"], key=lambda i: i["metadata"]["name"].lower()):
    name, version = item["metadata"]["name"], item["metadata"]["version"]
    if not item.get("is_direct") and name not in ("pip", "setuptools", "wheel"):
        print(f"{name}=={version}")
endef
export PINS_FROM_REPORT

constraints: install
	$(PY) -m pip freeze --all --exclude-editable > $(VENV)/installed.txt
	$(PY) -m pip install --quiet --dry-run --ignore-installed --report $(VENV)/resolved.json \
		-c $(VENV)/installed.txt -e '.[test]'
	$(PY) -c "$$PINS_FROM_REPORT" < $(VENV)/resolved.json > constraints.txt.new
	mv constraints.txt.new constraints.txt

# torch first, pinned: PyPI's torch==2.13.0 is the CUDA build (several GB). The CPU build
# is on PyTorch's own index: make bench TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=
# The user's guide as a site (mkdocs.yml): built into site/, or served at localhost:8000.
docs: install
	$(PY) -m mkdocs build --strict --site-dir site

docs-serve: install
	$(PY) -m mkdocs serve

bench: install
	$(PY) -m pip install --quiet torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) bench/run_all.py --quick --json

clean:
	rm -rf $(VENV) runs site
