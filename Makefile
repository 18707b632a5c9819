# The two commands a newcomer needs: `make demo` and `make test`.
# Each creates its own virtual environment in .venv and installs the package into it.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: test lint install clean demo

# uv (from PyPI, into the environment) installs the packages: it fetches and unpacks
# TensorFlow's wheel and the rest in parallel: 31-40 s against pip's 58 s on a fresh 2-core
# machine (2026-11-27, both compiling the bytecode). pip does it where uv cannot be
# installed or cannot reach the index (`pip install -e '.[test]'` is the same install).
$(VENV)/.installed: setup.py pyproject.toml
	$(PYTHON) -m venv $(VENV)
	( $(PY) -m pip install --quiet 'uv>=0.5' && \
	  $(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) -e '.[test]' ) || \
	  $(PY) -m pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

# Two pytest workers (pytest-xdist): most tests keep about one core busy, so on 2 cores
# two workers take about two thirds of the time one does (`make test TEST_WORKERS=1`).
# A module at a time, the longest first (tests/conftest.py; --no-loadscope-reorder keeps
# that order), so that both end together.
TEST_WORKERS ?= 2
test: $(VENV)/.installed
	$(PY) -m pytest -n $(TEST_WORKERS) --dist=loadscope --no-loadscope-reorder tests

# ruff with the rules of pyproject.toml (CI runs it before the tests).
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

# The whole product end to end on generated data, offline, on CPU (about 5 minutes):
# SentencePiece, pretraining, fine-tuning, SavedModel export and raw-text requests.
# A rerun resumes in $(DEMO_DIR); `make demo DEMO_FLAGS=--fresh` starts clean.
DEMO_DIR ?= demo_output
DEMO_FLAGS ?=
demo: $(VENV)/.installed
	$(PY) demo.py --work_dir=$(DEMO_DIR) $(DEMO_FLAGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache $(DEMO_DIR)
