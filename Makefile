# aesara_bincount developer commands.  Each target creates or reuses a local
# virtual environment in $(VENV) and installs what it needs into it.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-test
PYTEST_ARGS ?=

.PHONY: venv demo test test-fast bench bench-quick docs sanitize clean
BENCH_STAMP := $(VENV)/.installed-bench
# torch is optional (its rows appear when it imports); this spec takes the CPU
# build where one lies in pip's find-links.
TORCH_SPEC ?= torch==2.13.0
BENCH_ARGS ?=

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

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[bench]"
	-$(PY) -m pip install --quiet --disable-pip-version-check "$(TORCH_SPEC)" "setuptools<70"
	touch $(BENCH_STAMP)

## The CPU benchmark grid (a few minutes): table and JSON in benchmarks/results/.
bench: $(BENCH_STAMP)
	$(PY) benchmarks/bench_cpu.py $(BENCH_ARGS)

bench-quick: $(BENCH_STAMP)
	$(PY) benchmarks/bench_cpu.py --quick --name cpu-quick $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis docs/_build
