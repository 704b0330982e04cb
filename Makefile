# aesara_bincount developer commands.  Each target creates or reuses a local
# virtual environment in $(VENV) and installs what it needs into it.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-test
PYTEST_ARGS ?=

.PHONY: venv demo test test-fast bench docs sanitize clean gpu-dry-run gpu-bundle

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

## scripts/gpu_check.sh's stages on the CPU emulation of the GPU (no GPU needed).
gpu-dry-run: $(STAMP)
	PYTHON=$(PY) bash scripts/gpu_check.sh dry-run

## The offline Python 3.12 bundle that scripts/gpu_check.sh installs on a GPU
## machine (needs the package index; make_bundle.sh is in the shared gpu-env).
GPU_ENV ?= /work/shared/gpu-env
gpu-bundle:
	bash $(GPU_ENV)/make_bundle.sh .gpu-bundle 3.12

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis docs/_build .cache .gpu-check gpu-check-out
