# aesara_bincount developer commands.  Each target creates or reuses a local
# virtual environment in $(VENV) and installs what it needs into it.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-test
PYTEST_ARGS ?=

.PHONY: venv demo test test-fast bench docs sanitize clean

$(STAMP): setup.py pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[test]"
	touch $(STAMP)

venv: $(STAMP)

## The main job: the seed case, checked against numpy.bincount and timed.
demo: $(STAMP)
	$(PY) -m aesara_bincount

## The test-suite (what CI runs).
test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

## The test-suite without the slow tests.
test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis docs/_build
