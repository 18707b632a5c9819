# The two commands a newcomer needs: `make test` (and, later, `make demo`).
# Each creates its own virtual environment in .venv and installs the package into it.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: test install clean

$(VENV)/.installed: setup.py pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

test: $(VENV)/.installed
	$(PY) -m pytest tests

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
