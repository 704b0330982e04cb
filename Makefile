# aesara_bincount developer commands.  Each target creates or reuses a local
# virtual environment in $(VENV) and installs what it needs into it.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-test
PYTEST_ARGS ?=

.PHONY: venv demo test test-fast bench docs sanitize fuzz-long test-large clean

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

## The differential fuzz tests with many examples (by hand: about an hour on 2 cores).
fuzz-long: $(STAMP)
	$(PY) -m pytest tests/test_fuzz.py --hypothesis-profile=long --hypothesis-show-statistics $(PYTEST_ARGS)

## Only the slow tests (64-bit sizes: 4.3 GiB of memory).
test-large: $(STAMP)
	$(PY) -m pytest -m slow $(PYTEST_ARGS)

## The CPU tests with the C code built under AddressSanitizer and
## UndefinedBehaviorSanitizer (gcc's libasan and libubsan; Debian: libasan8,
## libubsan1, which come with gcc).  A compile directory of its own keeps the
## sanitized modules apart from the normal ones.  Python is not built with
## ASan, so its runtime is preloaded.  pytest captures only Python-level
## output, so that a report written to stderr stays visible.  Leak detection
## is off (Python keeps its allocations at exit; tests/test_leaks.py covers
## leaks), and so are the tests that measure memory or run for minutes.
SAN_CXX ?= g++
SAN_DIR := $(CURDIR)/.cache/aesara-sanitize
SAN_LOG := $(CURDIR)/.cache/sanitize-logs
SAN_FLAGS := -fsanitize=address -fsanitize=undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
sanitize: $(STAMP)
	@rt="$$($(SAN_CXX) -print-file-name=libasan.so)"; \
	if [ ! -e "$$rt" ]; then \
	  echo "make sanitize needs the AddressSanitizer runtime of $(SAN_CXX) (libasan; Debian/Ubuntu: apt-get install libasan8 libubsan1)"; \
	  exit 1; \
	fi; \
	rm -rf "$(SAN_LOG)"; mkdir -p "$(SAN_LOG)"; \
	echo "sanitizers: LD_PRELOAD=$$rt, compiledir $(SAN_DIR), reports in $(SAN_LOG)"; \
	AESARA_FLAGS="gcc__cxxflags=$(SAN_FLAGS),compiledir=$(SAN_DIR),blas__ldflags=" \
	ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:allocator_may_return_null=1:log_path=$(SAN_LOG)/asan:$$ASAN_OPTIONS" \
	UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$(SAN_LOG)/ubsan:$$UBSAN_OPTIONS" \
	AESARA_BINCOUNT_SANITIZE=1 \
	LD_PRELOAD="$$rt" \
	$(PY) -m pytest -p no:cacheprovider --capture=sys -m "not slow and not aesara_suite and not gpu" \
	  --ignore=tests/test_leaks.py $(PYTEST_ARGS); \
	status=$$?; \
	if ls "$(SAN_LOG)"/* >/dev/null 2>&1; then \
	  echo "=== sanitizer reports ==="; cat "$(SAN_LOG)"/*; status=1; \
	fi; \
	exit $$status

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis docs/_build
