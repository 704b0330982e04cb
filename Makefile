# aesara_bincount developer commands.  Each target creates or reuses a local
# virtual environment in $(VENV) and installs what it needs into it.
#
# The interpreter the venv is made with.  An explicit PYTHON (make demo
# PYTHON=python3.12, or PYTHON in the environment) is used as given, or refused
# at once if it is not a supported version; without one, python3 is used if it
# is supported, else the newest supported python3.X on PATH.  The supported
# versions are setup.py's python_requires; scripts/python_check.sh reads them
# and does the checking (make python-check says which Python would be used).
PYTHON_GIVEN := $(filter command environment,$(firstword $(origin PYTHON)))
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-test
PYTEST_ARGS ?=
# Extra pip constraints files for every install into the venv (make test-py312
# sets the GPU bundle's pinned versions).
PIP_CONSTRAINTS ?=
PIP_INSTALL = $(PY) -m pip install --quiet --disable-pip-version-check $(addprefix -c ,$(PIP_CONSTRAINTS))
PYTHON_CHECK = bash scripts/python_check.sh $(if $(PYTHON_GIVEN),--given,--default) "$(PYTHON)" \
  --goal $(or $(firstword $(filter-out python-check,$(MAKECMDGOALS))),venv)

.PHONY: venv demo test test-long test-fast bench bench-quick docs doctest plots sanitize fuzz-long test-large clean gpu-dry-run gpu-bundle gpu-strict
BENCH_STAMP := $(VENV)/.installed-bench
# torch is optional (its rows appear when it imports); this spec takes the CPU
# build where one lies in pip's find-links.  torch asks for setuptools >= 77,
# which lacks the distutils.msvccompiler that Aesara imports, so setuptools is
# put back below 70 afterwards (torch does not need it at run time).
TORCH_SPEC ?= torch==2.13.0
BENCH_ARGS ?=

DOCS_STAMP := $(VENV)/.installed-docs
SPHINX := $(PY) -m sphinx -W --keep-going -q

# An explicit PYTHON is checked on every run (python-check), so that it is
# never silently ignored for a venv made by another Python; the default is
# checked when the venv is made.
$(STAMP): setup.py pyproject.toml $(PIP_CONSTRAINTS) $(if $(PYTHON_GIVEN),| python-check)
	@py=$$($(PYTHON_CHECK)) || exit 1; \
	echo "$$py -m venv $(VENV)"; "$$py" -m venv $(VENV)
	$(PIP_INSTALL) -e ".[test]"
	touch $(STAMP)

venv: $(STAMP)

.PHONY: python-check test-py312 gpu-emulated gpu-emulated-short
## Which Python the venv is made with; an unsupported one stops here, in seconds.
python-check:
	@py=$$($(PYTHON_CHECK) --venv $(VENV)) && echo "python-check: $$py ($$("$$py" --version 2>&1)) for $(VENV)"

## The GPU test-suite (tests/gpu) on the CPU emulation of the GPU (tests/gpu_emu);
## a skipped test (no NVRTC, no C++20 compiler) fails here.
gpu-emulated: $(STAMP)
	@log=$$(mktemp); \
	$(PY) -m pytest -q -rs -p no:cacheprovider tests/test_gpu_emulated.py $(PYTEST_ARGS) 2>&1 | tee $$log; \
	if grep -Eq '[0-9]+ (failed|errors?|skipped)' $$log || ! grep -Eq '[0-9]+ passed' $$log; then \
	  rm -f $$log; echo "gpu-emulated: not every test passed (a skip counts as a failure here)"; exit 1; \
	fi; rm -f $$log

## The short GPU set: gpu-emulated with GPU_PER_FILE (1) GPU test of each file.
GPU_PER_FILE ?= 1
gpu-emulated-short:
	@AESARA_BINCOUNT_GPU_PER_FILE=$(GPU_PER_FILE) $(MAKE) --no-print-directory gpu-emulated

## The main job and the GPU dry run (every stage of scripts/gpu_check.sh on the
## emulation) on Python 3.12 (the GPU machine's) with the GPU bundle's pinned versions
## (PY312_PINS, checked against make_bundle.sh by tests/test_python_versions.py),
## in a venv of its own.  The Python 3.12 is PYTHON312, else python3.12 on PATH, else pyenv's;
## none is an error.  CI runs this after make test.
PY312_VENV ?= .venv-py312
PY312_PINS := scripts/gpu-bundle-constraints.txt
PYTHON312 ?=
test-py312:
	@py="$(PYTHON312)"; [ -n "$$py" ] || py=$$(bash scripts/python_check.sh --find 3.12) || exit 1; \
	echo "test-py312: $$py in $(PY312_VENV), pins $(PY312_PINS)"; \
	$(MAKE) --no-print-directory -k VENV=$(PY312_VENV) PYTHON="$$py" PIP_CONSTRAINTS=$(PY312_PINS) \
	  demo gpu-dry-run

## The main job: the seed case, checked against numpy.bincount and timed.
## bincount uses no BLAS, so Aesara's BLAS probe (pages of numpy.distutils
## warnings at import) is skipped unless AESARA_FLAGS already chooses BLAS flags.
comma := ,
DEMO_AESARA_FLAGS := $(if $(findstring blas__ldflags,$(AESARA_FLAGS)),$(AESARA_FLAGS),$(if $(AESARA_FLAGS),$(AESARA_FLAGS)$(comma))blas__ldflags=)
demo: $(STAMP)
	AESARA_FLAGS="$(DEMO_AESARA_FLAGS)" $(PY) -m aesara_bincount

## The test-suite (what CI runs); it builds the docs and runs their examples.  It
## runs on TEST_JOBS pytest-xdist workers (auto: one per core; TEST_JOBS=0 runs it
## in this process), each with an Aesara compile directory of its own.
TEST_JOBS ?= auto
test: $(DOCS_STAMP)
	$(PY) -m pytest -n $(TEST_JOBS) --dist worksteal $(PYTEST_ARGS)

## The test-suite without the slow tests and the docs build.
test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow and not docs" $(PYTEST_ARGS)

$(BENCH_STAMP): $(STAMP)
	$(PIP_INSTALL) -e ".[bench]"
	-$(PIP_INSTALL) "$(TORCH_SPEC)"
	$(PIP_INSTALL) "setuptools<70"
	AESARA_FLAGS=blas__ldflags= $(PY) -c "import aesara"
	touch $(BENCH_STAMP)

## The CPU benchmarks (about 16 minutes on 2 cores; run them on a quiet machine):
## the scatter-add of rows (benchmarks/results/$(ROWS_NAME).md / .json and
## docs/_static/rows.png), the SGD step of an embedding table written
## W - lr * grad(cost, W) against its dense form (benchmarks/results/$(SGD_NAME).md
## / .json), the fused bincount (benchmarks/results/fusion-dev.md
## / .json), then the grid and the busy-cores scenario, the table
## with the targets of issue 13 (benchmarks/results/cpu-dev.md / .json), the
## plots (docs/_static/) and the figures in README.rst, which name both runs:
## every plot is redrawn from the run whose figures the README shows.  Each
## table names the CPU and the CPU plan its loops ran under (made, or read from
## Aesara's compile directory, when the run starts; AESARA_BINCOUNT_CPU_PLAN
## forces one); then the
## multi-index scatter-adds against numpy, Aesara, numba and torch, with the
## CPU model (benchmarks/results/scatter-dev.md / .json).
ROWS_NAME ?= rows-dev
SGD_NAME ?= sgd-dev
bench: $(BENCH_STAMP)
	$(PY) benchmarks/bench_rows.py --plot --name $(ROWS_NAME) $(ROWS_BENCH_ARGS)
	$(PY) benchmarks/bench_sgd.py --name $(SGD_NAME)
	$(PY) benchmarks/bench_fusion.py --write fusion-dev
	$(PY) benchmarks/bench_cpu.py --plot --readme --rows benchmarks/results/$(ROWS_NAME).json $(BENCH_ARGS)
	$(PY) benchmarks/bench_scatter.py --json benchmarks/results/scatter-dev.json --md benchmarks/results/scatter-dev.md

bench-quick: $(BENCH_STAMP)
	$(PY) benchmarks/bench_cpu.py --quick --name cpu-quick $(BENCH_ARGS)

$(DOCS_STAMP): $(STAMP)
	$(PIP_INSTALL) -e ".[test,docs]"
	touch $(DOCS_STAMP)

## This documentation site, in docs/_build/html/index.html (warnings are errors).
docs: $(DOCS_STAMP)
	$(SPHINX) -b html docs docs/_build/html
	@echo "docs: open docs/_build/html/index.html"

## Run the code examples of the documentation and the README's two (the GPU one
## on the CPU emulation of the GPU; also part of make test).
doctest: $(DOCS_STAMP)
	$(SPHINX) -b doctest docs docs/_build/doctest
	$(PY) tests/readme_examples.py

## Redraw the plots in docs/_static/ from benchmarks/results/ (or PLOT_ARGS files).
PLOT_ARGS ?=
plots: $(DOCS_STAMP)
	$(PY) benchmarks/plot.py $(PLOT_ARGS)

## Every stage of scripts/gpu_check.sh on the CPU emulation of the GPU (no GPU
## needed; a few minutes); results and table in a new temporary folder (OUT=...
## to choose one).  make test runs it too (tests/test_gpu_check.py).
gpu-dry-run: $(STAMP)
	PYTHON=$(PY) bash scripts/gpu_check.sh dry-run

## Each kernel family through aesara.function under the emulation's two strict
## modes: the race check (FAKE_CUDA_RACECHECK=1) and asynchronous streams
## (FAKE_CUDA_ASYNC=1); fails on any race report or wrong result
## (tests/gpu_strict.py; GPU_STRICT_ARGS="--modes race --cases hist" to choose).
## make test runs it too (tests/test_gpu_strict.py).
GPU_STRICT_ARGS ?=
gpu-strict: $(STAMP)
	$(PY) tests/gpu_strict.py $(GPU_STRICT_ARGS)

## The offline Python 3.12 bundle that scripts/gpu_check.sh installs on a GPU
## machine (needs the package index; make_bundle.sh is in the shared gpu-env,
## which CI lays beside the checkout).
GPU_ENV ?= ../shared/gpu-env
gpu-bundle:
	bash $(GPU_ENV)/make_bundle.sh .gpu-bundle 3.12

## The long tier, run before each stop and not by CI: the tests marked long (the
## exhaustive grids and long fuzzing that make test leaves out) and the whole compile
## sweep on the CPU, then every GPU test on the CPU emulation of the GPU
## (tests/gpu_emu; make test runs each GPU grid's each-choice cover only).
## Docs: Development, "Test tiers".
test-long: $(DOCS_STAMP)
	AESARA_BINCOUNT_LONG=1 $(PY) -m pytest -n $(TEST_JOBS) --dist worksteal -m "long and not gpu" $(PYTEST_ARGS) || [ $$? -eq 5 ]
	AESARA_BINCOUNT_LONG=1 $(PY) -m pytest tests/test_compile_sweep.py $(PYTEST_ARGS)
	AESARA_BINCOUNT_LONG=1 $(PY) tests/gpu_emu/run.py -n $(TEST_JOBS) --dist worksteal -m "gpu and not slow" tests $(PYTEST_ARGS)

## The differential fuzz tests with many examples (by hand: about an hour on 2 cores).
fuzz-long: $(STAMP)
	$(PY) -m pytest tests/test_fuzz.py --hypothesis-profile=long --hypothesis-show-statistics $(PYTEST_ARGS)

## Only the slow tests (64-bit sizes: 4.3 GiB of memory).
test-large: $(STAMP)
	$(PY) -m pytest -m slow $(PYTEST_ARGS)

## The test-suite with our C code built under AddressSanitizer and
## UndefinedBehaviorSanitizer (the CPU Ops; the GPU Ops' host C and the kernel
## layer's library on the emulated GPU cases of tests/test_sanitize.py), with
## g++'s libasan and libubsan (Debian: libasan8, libubsan1, which come with
## gcc).  Aesara's own modules compile as usual; all go to a compile directory
## of their own.  tests/sanitizer.py does the set-up (the preloaded runtime,
## the options, the selection and what it leaves out, the reports, which fail
## the run); make test runs a small part of it (tests/test_sanitize.py).
sanitize: $(DOCS_STAMP)
	$(PY) tests/sanitizer.py $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(PY312_VENV) build dist *.egg-info .pytest_cache .hypothesis docs/_build .cache .gpu-check gpu-check-out
