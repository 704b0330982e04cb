#!/usr/bin/env bash
# gpu_check.sh -- the GPU part of aesara_bincount, checked and timed on a machine with an
# NVIDIA GPU, in one run: tests, compute-sanitizer, benchmark, and ONE table.
#
# Usage:  bash scripts/gpu_check.sh [all | standalone | aesara | sanitize | dry-run | plan]
#
#   standalone  with the machine's own Python (e.g. 3.12, NumPy 2, CuPy 14, PyTorch; no
#               Aesara): report the machine; test the stand-alone kernel layer
#               (tests/gpu/test_cuda_kernel_layer.py); time it against cupy.bincount,
#               torch.bincount and numpy.bincount.
#   aesara      install the offline bundle (NumPy 1.26, Aesara 2.9.4, CuPy 13, NVRTC 12)
#               from .gpu-bundle/part-* ($GPU_BUNDLE) into .gpu-check/site; run the GPU
#               test-suite through Aesara (tests/gpu/test_cuda_op.py and every `gpu`-marked
#               test of tests/: each test of the CPU Op on GpuBincount), the benchmark through
#               Aesara (end-to-end function times, the seed case) and the main job's GPU rows.
#   sanitize    on the Aesara stack the aesara call unpacked: compute-sanitizer's workload
#               (bench_gpu.py --sanitize: every kernel family, the kernel layer and through
#               aesara.function, small; benchmarks/gpu_sanitize.py) once plainly, then under
#               memcheck, racecheck and synccheck, where compute-sanitizer is installed and
#               accepts the device.
#   all         (default) standalone, aesara, then sanitize; then the table.
#   dry-run     no GPU needed: every stage above on the CPU emulation of tests/gpu_emu
#               (tiny sizes, a subset of the tests; the bundle stages use $GPU_BUNDLE where it
#               holds a bundle, and say why not where it does not).  Its results and table go
#               to a new temporary folder (OUT, default mktemp -d), never to benchmarks/results.
#               `make gpu-dry-run` runs it; tests/test_gpu_check.py runs it in `make test`.
#   plan        print each mode's stages and time limits, and their sums.
#
# Device time (see docs/development.rst, "Running the GPU check on a lent machine"): one GPU session has 15 minutes of device
# time in all, at most 10 minutes per command and 64 MiB carried per call.  The stage limits
# below keep each of standalone, aesara and sanitize under 9.5 minutes even if every stage runs to its
# limit, so that one command never loses the stages after a slow one; `plan` prints the sums.
#
# Every mode ends with the table, merged from every benchmark run so far (kept in
# .gpu-check/, which survives between calls on the same machine), written to
# $OUT/gpu-table.md and benchmarks/results/gpu-<GPU name>.md; commit the latter.
#
# The bundle is made on a machine with a package index by `make gpu-bundle`
#   (bash ../shared/gpu-env/make_bundle.sh .gpu-bundle 3.12: about 96 MiB, 2 parts of <= 60 MiB)
# and is git-ignored.  One transfer carries 64 MiB at most: carry it in two calls of the same
# warm machine, one part each:
#   call 1: carry .gpu-bundle/part-aa, run  bash scripts/gpu_check.sh standalone
#   call 2: carry .gpu-bundle/part-ab, run  bash scripts/gpu_check.sh aesara
#   call 3: carry nothing,              run  bash scripts/gpu_check.sh sanitize
# (files carried or written in git-ignored folders stay on the machine between calls).
#
# Robustness: `set -u`, no `set -e`: every stage runs under `timeout`, its output goes to
# $OUT/gpu_check.log, its outcome and time to $OUT/summary.txt, and a failing stage does not
# stop the others.  A stage command that exits 77 is reported as skipped (it could not run
# here, e.g. compute-sanitizer refusing the device).  Exit status: the number of failed
# stages (0: all passed or skipped).
# Environment: OUT, PYTHON (default python3), GPU_BUNDLE, GPU_CHECK_STATE,
# GPU_CHECK_DRY_RUN_SLACK (dry-run: the limits times this, default 4).
# Sourcing this file defines its functions and runs nothing (tests/test_gpu_check.py).

# Time limits (seconds) of the stages; a stage that ignores the TERM signal at its limit is
# killed KILL_AFTER seconds later.  The expected times on an H200 are in docs/development.rst.
KILL_AFTER=5
LIMIT_machine=45
LIMIT_kernel_tests=140
LIMIT_kernel_benchmark=140
LIMIT_sanitizer_workload=120 # the plain run: Aesara's C modules and NVRTC's kernels compiled, cached
LIMIT_sanitizer=90          # each of memcheck, racecheck, synccheck (caches warm)
LIMIT_bundle_install=60
LIMIT_bundle_import=45
LIMIT_gpu_tests=240
LIMIT_aesara_benchmark=115  # issue 31 added its deterministic rows (about 20 s), issue 30 its scatter rows
                            # (about 30 s, estimated; 115 is the most the 570 s of an aesara call leaves)
LIMIT_main_job=60
LIMIT_table=20

# stage NAME SECONDS COMMAND...: run it time-bounded, log it, record the outcome and time.
stage() {
  local name=$1 limit=$2 rc t0=$SECONDS
  shift 2
  echo "=== [$name] $(date +%T), at most ${limit}s: $*" | tee -a "$LOG"
  if declare -F "$1" >/dev/null; then
    # A function of this script: run it in a child bash, so that `timeout` can stop it.
    timeout --kill-after="$KILL_AFTER" "$limit" bash -c "$(declare -f); $(printf '%q ' "$@")" 2>&1 | tee -a "$LOG"
  else
    timeout --kill-after="$KILL_AFTER" "$limit" "$@" 2>&1 | tee -a "$LOG"
  fi
  rc=${PIPESTATUS[0]}
  local verdict="ok"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    verdict="TIMED OUT after ${limit}s"
  elif [ "$rc" -eq 77 ]; then
    verdict="skipped: see the log"
  elif [ "$rc" -ne 0 ]; then
    verdict="FAILED (exit $rc)"
  fi
  case "$verdict" in ok | skipped*) ;; *) FAILED=$((FAILED + 1)) ;; esac
  printf '%-28s %-26s %4ss\n' "$name" "$verdict" "$((SECONDS - t0))" | tee -a "$SUMMARY" "$LOG"
  [ "$verdict" = ok ]
}

skip() {
  printf '%-28s %-26s\n' "$1" "skipped: $2" | tee -a "$SUMMARY" "$LOG"
}

# run_pytest ARGS...: pytest that fails unless some test passed (all skipped is a failure:
# it means no GPU was found).
run_pytest() {
  local log
  log=$(mktemp)
  "$PY" -m pytest -q -rs -p no:cacheprovider -W ignore "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 0 ] && ! grep -Eq '[0-9]+ passed' "$log"; then
    echo "no test passed"
    rc=5
  fi
  rm -f "$log"
  return "$rc"
}

report_machine() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || echo "no nvidia-smi"
  "$PY" - <<'EOF' || return 1
import importlib, platform, sys
print("python", platform.python_version(), sys.executable)
for name in ("numpy", "cupy", "torch", "aesara", "pytest", "hypothesis"):
    try:
        print(name, importlib.import_module(name).__version__)
    except Exception as exc:
        print(name, "absent:", str(exc).splitlines()[0][:120])
from aesara_bincount_core.cuda import kernels
print("kernel layer:", kernels.availability())
EOF
  command -v nvcc >/dev/null && nvcc --version | tail -1
  if command -v compute-sanitizer >/dev/null; then
    echo "compute-sanitizer: $(command -v compute-sanitizer)"
  else
    echo "compute-sanitizer: absent"
  fi
  return 0
}

# The CPU emulation for dry-run: a fake libcuda running the real kernels, and a fake CuPy.
# Writes the exports that select it to $STATE/emulation.env.
build_emulation() {
  "$PY" - > "$STATE/emulation.env" <<'EOF'
import shlex, sys
sys.path.insert(0, "tests")
from gpu_emu import build
problem = build.cxx20_problem()
if problem:
    sys.exit(f"the CPU emulation needs a C++20 compiler: {problem}")
env = build.environment(build.build())
for k in ("AESARA_BINCOUNT_LIBCUDA", "AESARA_BINCOUNT_EMULATED_GPU", "PYTHONPATH", "AESARA_FLAGS"):
    print(f"export {k}={shlex.quote(env[k])}")
EOF
}

# sanitize TOOL: compute-sanitizer's TOOL on bench_gpu.py --sanitize.  77 (skipped) when the
# tool refuses the device (as it does under gVisor: "Device not supported").
sanitize() {
  local log rc
  log=$(mktemp)
  compute-sanitizer --tool "$1" --error-exitcode 3 "$PY" benchmarks/bench_gpu.py --sanitize 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ] && grep -Eq 'Device not supported|Target application terminated before first instrumented API call' "$log"; then
    echo "compute-sanitizer cannot instrument this device or process: skipped"
    rc=77
  fi
  rm -f "$log"
  return "$rc"
}

run_standalone() {
  stage machine "$LIMIT_machine" report_machine
  stage kernel-tests "$LIMIT_kernel_tests" run_pytest --noconftest tests/gpu/test_cuda_kernel_layer.py "${PYTEST_K[@]}"
  stage kernel-benchmark "$LIMIT_kernel_benchmark" "$PY" benchmarks/bench_gpu.py --standalone "${SMALL[@]}" \
    --json "$STATE/bench-standalone.json"
}

# compute-sanitizer's workload on the Aesara stack (the kernel layer alone where there is
# none): plainly first (every case checked; the compiles cached for the tools), then each tool.
run_sanitize() {
  if [ "$MODE" = sanitize ] && ! prepare_aesara_stack; then
    echo "no usable Aesara stack: the sanitizers see the kernel layer only" | tee -a "$LOG"
  fi
  stage sanitizer-workload "$LIMIT_sanitizer_workload" "$PY" benchmarks/bench_gpu.py --sanitize
  if [ "$MODE" = dry-run ]; then
    skip compute-sanitizer "needs a GPU (its workload ran above)"
  elif command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck synccheck; do
      stage "sanitizer-$tool" "$LIMIT_sanitizer" sanitize "$tool"
    done
  else
    skip compute-sanitizer "not installed"
  fi
}

bundle_parts() {
  ls "$BUNDLE"/part-* 2>/dev/null
}

# Unpack the bundle into $STATE/site (once per set of parts).
install_bundle() {
  local parts stamp
  parts=$(bundle_parts)
  [ -n "$parts" ] || { echo "no bundle parts in $BUNDLE"; return 1; }
  # shellcheck disable=SC2086
  stamp=$(ls -l $parts | awk '{print $5, $NF}' | md5sum | cut -c1-16)
  if [ -f "$STATE/site/.stamp" ] && [ "$(cat "$STATE/site/.stamp")" = "$stamp" ]; then
    echo "bundle already unpacked ($stamp)"
    return 0
  fi
  echo "parts: $parts"
  # shellcheck disable=SC2086
  if ! cat $parts | xz -t 2>/dev/null; then
    echo "the bundle is incomplete or damaged (carry every part-* of make_bundle.sh)"
    return 1
  fi
  rm -rf "$STATE/site" && mkdir -p "$STATE/site"
  # shellcheck disable=SC2086
  cat $parts | xz -dc | tar xf - -C "$STATE/site" || return 1
  echo "$stamp" > "$STATE/site/.stamp"
  du -sh "$STATE/site"
}

# The CPython tag of the unpacked bundle's compiled modules (e.g. cpython-312), or nothing
# for a bundle of pure Python.
bundle_python() {
  find "$STATE/site" -name '*.cpython-3*.so' -print -quit 2>/dev/null | sed -E 's/.*\.(cpython-3[0-9]+)-.*/\1/'
}

# Put the unpacked bundle in front of the machine's packages (in this shell).
use_bundle() {
  export PYTHONPATH="$STATE/site${PYTHONPATH:+:$PYTHONPATH}"
  export LD_LIBRARY_PATH="$STATE/site/_nvrtc${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # Aesara's BLAS probe needs numpy.distutils, absent on Python 3.12.
  case ",${AESARA_FLAGS:-}," in
    *,blas__ldflags=*) ;;
    *) export AESARA_FLAGS="blas__ldflags=${AESARA_FLAGS:+,$AESARA_FLAGS}" ;;
  esac
  if ! "$PY" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
    echo "WARNING: no Python.h for $PY: Aesara runs without C code (GpuBincount uses perform)" | tee -a "$LOG"
    export AESARA_FLAGS="$AESARA_FLAGS,cxx="
  fi
}

# Every package of the bundle's pins that the bundle holds imports from it (the fake CuPy of
# the emulation excepted); print the versions.
check_bundle() {
  "$PY" - <<'EOF'
import importlib, os, sys
site = os.path.realpath(os.path.join(os.environ["STATE"], "site"))
emulated = os.environ.get("AESARA_BINCOUNT_EMULATED_GPU") == "1"
pins = ("numpy", "scipy", "aesara", "cupy", "fastrlock", "etuples", "cons", "unification",
        "kanren", "filelock", "toolz", "multipledispatch", "typing_extensions")
bad = 0
for name in pins:
    if not any(os.path.exists(os.path.join(site, name + ext)) for ext in ("", ".py")):
        continue
    if name == "cupy" and emulated:
        continue
    module = importlib.import_module(name)
    where = os.path.realpath(module.__file__)
    ok = where.startswith(site + os.sep)
    bad += not ok
    print(f"{name}: {'bundle' if ok else 'NOT FROM THE BUNDLE'} ({where})")
import numpy, cupy, aesara
print("stack:", "numpy", numpy.__version__, "cupy", cupy.__version__, "aesara", aesara.__version__)
sys.exit(1 if bad else 0)
EOF
}

# Use the bundle where there is one; 0 when the Aesara stages can run.
prepare_aesara_stack() {
  if [ -z "$(bundle_parts)" ]; then
    if [ "$MODE" = dry-run ]; then
      skip bundle-install "no bundle in $BUNDLE (make gpu-bundle makes one)"
      return 0
    fi
    if "$PY" -c 'import aesara, cupy' >/dev/null 2>&1; then
      skip bundle-install "no bundle in $BUNDLE; $PY has Aesara and CuPy"
      return 0
    fi
    stage bundle-install "$LIMIT_bundle_install" install_bundle
    return 1
  fi
  stage bundle-install "$LIMIT_bundle_install" install_bundle || return 1
  local tag mine
  tag=$(bundle_python)
  mine=$("$PY" -c 'import sys; print("cpython-%d%d" % sys.version_info[:2])')
  if [ -n "$tag" ] && [ "$tag" != "$mine" ]; then
    if [ "$MODE" = dry-run ]; then
      skip bundle-import "the bundle is for $tag, $PY is $mine (PYTHON=<a $tag python> uses it)"
      return 0
    fi
    echo "the bundle is for $tag, $PY is $mine" | tee -a "$LOG"
    skip bundle-import "the bundle is for $tag, $PY is $mine"
    FAILED=$((FAILED + 1))
    return 1
  fi
  use_bundle
  # On the emulation the fake CuPy stays in front of the bundle's real one.
  [ "$MODE" = dry-run ] && export PYTHONPATH="$ROOT/tests/gpu_emu/fakecupy:$PYTHONPATH"
  stage bundle-import "$LIMIT_bundle_import" check_bundle
}

# main_job ARGS...: python -m aesara_bincount, which must show its GPU rows.
main_job() {
  local log rc
  log=$(mktemp)
  "$PY" -m aesara_bincount "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 0 ] && ! grep -q "GpuBincount, aesara.function" "$log"; then
    echo "the main job printed no GPU rows"
    rc=1
  fi
  rm -f "$log"
  return "$rc"
}

run_aesara() {
  if ! prepare_aesara_stack; then
    skip aesara-stages "no usable Aesara stack (see bundle-install)"
    return
  fi
  # tests/gpu/test_cuda_op.py and the GPU variant of every test of the CPU Op (the
  # kernel-layer tests ran in kernel-tests).  About 120 Aesara C modules are compiled,
  # 1.5-2.5 s each: on a GPU machine 8 pytest-xdist workers share that, each in a
  # compile directory of its own (tests/conftest.py); 8 Hypothesis examples a test.
  local workers=()
  if [ "$MODE" != dry-run ] && "$PY" -c 'import xdist' >/dev/null 2>&1; then
    workers=(-n 8)
  fi
  export HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-few}
  stage gpu-tests "$LIMIT_gpu_tests" run_pytest -m "gpu and not slow" tests \
    --ignore=tests/gpu/test_cuda_kernel_layer.py "${workers[@]}" "${PYTEST_K[@]}"
  stage aesara-benchmark "$LIMIT_aesara_benchmark" "$PY" benchmarks/bench_gpu.py "${SMALL[@]}" \
    --json "$STATE/bench-aesara.json"
  stage main-job "$LIMIT_main_job" main_job "${MAIN_ARGS[@]}"
}

plan() {
  # Each stage at its limit, plus KILL_AFTER (4 stages in standalone, 6 in aesara, 7 in sanitize).
  local standalone=$((LIMIT_machine + LIMIT_kernel_tests + LIMIT_kernel_benchmark + LIMIT_table + 4 * KILL_AFTER))
  local aesara=$((LIMIT_bundle_install + LIMIT_bundle_import + LIMIT_gpu_tests + LIMIT_aesara_benchmark + LIMIT_main_job + LIMIT_table + 6 * KILL_AFTER))
  local sanitize=$((LIMIT_bundle_install + LIMIT_bundle_import + LIMIT_sanitizer_workload + 3 * LIMIT_sanitizer + LIMIT_table + 7 * KILL_AFTER))
  echo "standalone: machine $LIMIT_machine, kernel-tests $LIMIT_kernel_tests, kernel-benchmark $LIMIT_kernel_benchmark, table $LIMIT_table"
  echo "aesara: bundle-install $LIMIT_bundle_install, bundle-import $LIMIT_bundle_import, gpu-tests $LIMIT_gpu_tests, aesara-benchmark $LIMIT_aesara_benchmark, main-job $LIMIT_main_job, table $LIMIT_table"
  echo "sanitize: bundle-install $LIMIT_bundle_install, bundle-import $LIMIT_bundle_import, sanitizer-workload $LIMIT_sanitizer_workload, 3 sanitizers x $LIMIT_sanitizer, table $LIMIT_table"
  echo "worst case: standalone ${standalone}s, aesara ${aesara}s, sanitize ${sanitize}s, all $((standalone + aesara + sanitize - 2 * LIMIT_table))s"
}

main() {
  MODE=${1:-all}
  case "$MODE" in
    all | standalone | aesara | sanitize | dry-run) ;;
    plan) plan; return 0 ;;
    *) echo "usage: $0 [all|standalone|aesara|sanitize|dry-run|plan]" >&2; return 64 ;;
  esac
  ROOT=$(pwd)
  SMALL=()
  PYTEST_K=()
  MAIN_ARGS=(--repeat 20)
  if [ "$MODE" = dry-run ]; then
    # Nothing emulated is kept beside real results: a fresh folder for results and state.
    OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/gpu-dry-run.XXXXXX")}
    STATE=${GPU_CHECK_STATE:-$OUT/state}
    SMALL=(--small --repeat 3)
    PYTEST_K=(-k "test_counts_every_dtype and int32 or test_seed_case or one_synchronization or test_strided_inputs")
    MAIN_ARGS=(-n 2000 --bins 50 --repeat 3)
    # The limits are sized for an H200; the emulation on a shared CPU (make test runs the
    # dry run beside other tests) gets GPU_CHECK_DRY_RUN_SLACK times as long (default 4).
    local limit
    for limit in ${!LIMIT_*}; do printf -v "$limit" '%d' $((${!limit} * ${GPU_CHECK_DRY_RUN_SLACK:-4})); done
    # NVRTC output is the same on the emulation: share the test-suite's kernel cache.
    export AESARA_BINCOUNT_CACHE=${AESARA_BINCOUNT_CACHE:-$ROOT/.cache/tests/kernels}
  else
    OUT=${OUT:-$ROOT/gpu-check-out}
    STATE=${GPU_CHECK_STATE:-$ROOT/.gpu-check}
    export AESARA_BINCOUNT_CACHE=${AESARA_BINCOUNT_CACHE:-$STATE/kernels}
  fi
  BUNDLE=${GPU_BUNDLE:-$ROOT/.gpu-bundle}
  PY=${PYTHON:-python3}
  LOG=$OUT/gpu_check.log
  SUMMARY=$OUT/summary.txt
  FAILED=0
  mkdir -p "$OUT" "$STATE"
  # The packages of this checkout, imported plainly (nothing needs installing).
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
  export ROOT STATE BUNDLE PY LOG MODE
  export PYTHONDONTWRITEBYTECODE=1
  echo "gpu_check.sh $MODE, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), in $ROOT, results in $OUT" | tee "$LOG"
  : > "$SUMMARY"

  if [ "$MODE" = dry-run ]; then
    stage script-syntax 10 bash -n "$0"
    if stage emulation-build 300 build_emulation; then
      # shellcheck disable=SC1091
      source "$STATE/emulation.env"
    else
      skip dry-run "the CPU emulation could not be built"
    fi
  fi
  case "$MODE" in
    standalone) run_standalone ;;
    aesara) run_aesara ;;
    sanitize) run_sanitize ;;
    all | dry-run) run_standalone; run_aesara; run_sanitize ;;
  esac

  local results=() f
  for f in "$STATE/bench-standalone.json" "$STATE/bench-aesara.json"; do
    [ -f "$f" ] && results+=("$f") && cp "$f" "$OUT/"
  done
  if [ ${#results[@]} -gt 0 ]; then
    local where=(--out "$OUT/gpu-table.md")
    [ "$MODE" = dry-run ] || where+=(--results "benchmarks/results/gpu-{gpu}.md")
    stage table "$LIMIT_table" "$PY" benchmarks/bench_gpu.py --table "${results[@]}" "${where[@]}"
  else
    skip table "no benchmark results"
  fi
  echo "=== summary ($FAILED failed, ${SECONDS}s in all)" | tee -a "$LOG"
  cat "$SUMMARY"
  echo "results in $OUT: $(ls "$OUT" | tr '\n' ' ')"
  return "$FAILED"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -u
  cd "$(dirname "$0")/.." || exit 99
  main "$@"
  exit $?
fi
