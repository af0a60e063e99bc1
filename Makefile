# The two commands of the README:
#   make main   train on Multi30k En->De, average, decode test 2016, score, export, translate
#   make test   the test suite
# Both create .venv and install what they need first. Override PYTHON to pick the
# interpreter (Python 3.11), TRANSFORMER_TF_DATA to point at the local corpora.

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
export TRANSFORMER_TF_DATA ?= $(abspath ../shared/data)
MAIN_ARGS ?=

.PHONY: main test install bench clean

$(VENV)/.installed: setup.py
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11 or run 'make PYTHON=/path/to/python3.11 ...'" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

main: install
	$(PY) scripts/main_job.py $(MAIN_ARGS)

# pytest exits with 5 when it collects no test: that is a failure here, not a pass.
# Two worker processes (pytest-xdist): tracing and Python-bound work overlap on 2 cores.
# --dist loadscope keeps each test module on one worker, so a module's fixtures (a trained
# run, a set of exports) are built once, not once per worker.
test: install
	$(PY) -m pytest -q --timeout=900 -n 2 --dist loadscope

# torch first, pinned: a bare resolve could pull a CUDA build of several GB.
bench: install
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) bench/run_all.py --quick --json

clean:
	rm -rf $(VENV) runs
