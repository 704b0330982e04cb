# aesara_bincount developer commands.  Each target creates or reuses a local
# virtual environment in $(VENV) and installs what it needs into it.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-test
PYTEST_ARGS ?=

.PHONY: venv demo test test-fast bench bench-quick docs doctest plots sanitize clean gpu-dry-run gpu-bundle
BENCH_STAMP := $(VENV)/.installed-bench
# torch is optional (its rows appear when it imports); this spec takes the CPU
# build where one lies in pip's find-links.  torch asks for setuptools >= 77,
# which lacks the distutils.msvccompiler that Aesara imports, so setuptools is
# put back below 70 afterwards (torch does not need it at run time).
TORCH_SPEC ?= torch==2.13.0
BENCH_ARGS ?=

DOCS_STAMP := $(VENV)/.installed-docs
SPHINX := $(PY) -m sphinx -W --keep-going -q

$(STAMP): setup.py pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[test]"
	touch $(STAMP)

venv: $(STAMP)

## The main job: the seed case, checked against numpy.bincount and timed.
## bincount uses no BLAS, so Aesara's BLAS probe (pages of numpy.distutils
## warnings at import) is skipped unless AESARA_FLAGS already chooses BLAS flags.
comma := ,
DEMO_AESARA_FLAGS := $(if $(findstring blas__ldflags,$(AESARA_FLAGS)),$(AESARA_FLAGS),$(if $(AESARA_FLAGS),$(AESARA_FLAGS)$(comma))blas__ldflags=)
demo: $(STAMP)
	AESARA_FLAGS="$(DEMO_AESARA_FLAGS)" $(PY) -m aesara_bincount

## The test-suite (what CI runs); it builds the docs and runs their examples.
test: $(DOCS_STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

## The test-suite without the slow tests and the docs build.
test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow and not docs" $(PYTEST_ARGS)

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[bench]"
	-$(PY) -m pip install --quiet --disable-pip-version-check "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet --disable-pip-version-check "setuptools<70"
	AESARA_FLAGS=blas__ldflags= $(PY) -c "import aesara"
	touch $(BENCH_STAMP)

## The CPU benchmark grid (a few minutes): table and JSON in benchmarks/results/.
bench: $(BENCH_STAMP)
	$(PY) benchmarks/bench_cpu.py $(BENCH_ARGS)

bench-quick: $(BENCH_STAMP)
	$(PY) benchmarks/bench_cpu.py --quick --name cpu-quick $(BENCH_ARGS)

$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[test,docs]"
	touch $(DOCS_STAMP)

## This documentation site, in docs/_build/html/index.html (warnings are errors).
docs: $(DOCS_STAMP)
	$(SPHINX) -b html docs docs/_build/html
	@echo "docs: open docs/_build/html/index.html"

## Run the code examples of the documentation (also part of make test).
doctest: $(DOCS_STAMP)
	$(SPHINX) -b doctest docs docs/_build/doctest

## Redraw the plots in docs/_static/ from benchmarks/results/ (or PLOT_ARGS files).
PLOT_ARGS ?=
plots: $(DOCS_STAMP)
	$(PY) benchmarks/plot.py $(PLOT_ARGS)

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
