#!/usr/bin/env bash
# gpu_check.sh -- the GPU part of aesara_bincount, checked and timed on a machine with an
# NVIDIA GPU, in one run: tests, compute-sanitizer, benchmark, and ONE table.
#
# Usage:  bash scripts/gpu_check.sh [all | standalone | aesara | dry-run]
#
#   standalone  with the machine's own Python (e.g. 3.12, NumPy 2, CuPy 14, PyTorch; no
#               Aesara): report the machine; test the stand-alone kernel layer
#               (tests/gpu/test_cuda_kernel_layer.py); time it against cupy.bincount,
#               torch.bincount and numpy.bincount; run compute-sanitizer's memcheck and
#               racecheck on a small kernel-layer run, if compute-sanitizer is there.
#   aesara      install the offline bundle (NumPy 1.26, Aesara 2.9.4, CuPy 13, NVRTC 12)
#               from .gpu-bundle/part-* ($GPU_BUNDLE) into .gpu-check/site; run the whole
#               GPU test-suite (tests/gpu) and the benchmark through Aesara (end-to-end
#               function times, the seed case) and the main job.
#   all         (default) standalone, then aesara; then the table.
#   dry-run     no GPU needed: runs the same stages on the CPU emulation of
#               tests/gpu_emu (tiny sizes, a subset of the tests), to check this script;
#               DRY_RUN_BUNDLE=1 installs and uses the bundle too (PYTHON must then be
#               of the bundle's version, e.g. a Python 3.12 with NumPy 2 and pytest).
#
# Every mode ends with the table, merged from every benchmark run so far (kept in
# .gpu-check/, which survives between calls on the same machine), written to
# $OUT/gpu-table.md and benchmarks/results/gpu-<GPU name>.md; commit the latter.
#
# The bundle is made on a machine with a package index by
#   bash /work/shared/gpu-env/make_bundle.sh .gpu-bundle 3.12     (about 96 MiB, 2 parts)
# and is git-ignored.  When one transfer may carry 64 MiB at most, carry it in two calls
# of the same warm machine, one part each:
#   call 1: carry .gpu-bundle/part-aa, run  bash scripts/gpu_check.sh standalone
#   call 2: carry .gpu-bundle/part-ab, run  bash scripts/gpu_check.sh aesara
# (files carried or written in git-ignored folders stay on the machine between calls).
#
# Robustness: `set -u`, no `set -e`: every stage runs under `timeout`, its output goes to
# $OUT/gpu_check.log, a failing stage is reported in $OUT/summary.txt and the others
# still run.  Exit status: the number of failed stages (0: all passed or skipped).
# Environment: OUT (default ./gpu-check-out), PYTHON (default python3), GPU_BUNDLE.
set -u
cd "$(dirname "$0")/.." || exit 99
ROOT=$(pwd)
MODE=${1:-all}
OUT=${OUT:-$ROOT/gpu-check-out}
STATE=$ROOT/.gpu-check
BUNDLE=${GPU_BUNDLE:-$ROOT/.gpu-bundle}
PY=${PYTHON:-python3}
LOG=$OUT/gpu_check.log
SUMMARY=$OUT/summary.txt
FAILED=0
mkdir -p "$OUT" "$STATE"
export ROOT STATE BUNDLE PY LOG
export AESARA_BINCOUNT_CACHE=$STATE/kernels
export PYTHONDONTWRITEBYTECODE=1
SMALL=()
PYTEST_K=()
case "$MODE" in
  all | standalone | aesara) ;;
  dry-run)
    SMALL=(--small --repeat 3)
    PYTEST_K=(-k "test_counts_every_dtype and int32 or test_seed_case or one_synchronization")
    ;;
  *) echo "usage: $0 [all|standalone|aesara|dry-run]" >&2; exit 64 ;;
esac
echo "gpu_check.sh $MODE, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), in $ROOT" | tee "$LOG"
: > "$SUMMARY"

# stage NAME SECONDS COMMAND...: run it time-bounded, log it, record the outcome.
stage() {
  local name=$1 limit=$2 rc t0=$SECONDS
  shift 2
  echo "=== [$name] $(date +%T), at most ${limit}s: $*" | tee -a "$LOG"
  if declare -F "$1" >/dev/null; then
    # A function of this script: run it in a child bash, so that `timeout` can stop it.
    timeout --kill-after=15 "$limit" bash -c "$(declare -f "$1"); $(printf '%q ' "$@")" 2>&1 | tee -a "$LOG"
  else
    timeout --kill-after=15 "$limit" "$@" 2>&1 | tee -a "$LOG"
  fi
  rc=${PIPESTATUS[0]}
  local verdict="ok"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    verdict="TIMED OUT after ${limit}s"
  elif [ "$rc" -ne 0 ]; then
    verdict="FAILED (exit $rc)"
  fi
  [ "$verdict" = ok ] || FAILED=$((FAILED + 1))
  printf '%-28s %-26s %4ss\n' "$name" "$verdict" "$((SECONDS - t0))" | tee -a "$SUMMARY" "$LOG"
  return "$rc"
}

# run_pytest ARGS...: pytest that fails unless some test passed (all skipped is a failure:
# it means no GPU was found).
run_pytest() {
  local log
  log=$(mktemp)
  "$PY" -m pytest --noconftest -q -rs -p no:cacheprovider -W ignore "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 0 ] && ! grep -Eq '[0-9]+ passed' "$log"; then
    echo "no test passed"
    rc=5
  fi
  rm -f "$log"
  return "$rc"
}

skip() {
  printf '%-28s %-26s\n' "$1" "skipped: $2" | tee -a "$SUMMARY" "$LOG"
}

report_machine() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || echo "no nvidia-smi"
  "$PY" - <<'EOF'
import importlib, platform, sys
print("python", platform.python_version(), sys.executable)
for name in ("numpy", "cupy", "torch", "aesara", "pytest"):
    try:
        print(name, importlib.import_module(name).__version__)
    except Exception as exc:
        print(name, "absent:", str(exc).splitlines()[0][:120])
sys.path.insert(0, "benchmarks")
import kernel_layer
k = kernel_layer.load()
print("kernel layer:", k.is_available())
EOF
  command -v nvcc >/dev/null && nvcc --version | tail -1
  command -v compute-sanitizer >/dev/null && echo "compute-sanitizer: $(command -v compute-sanitizer)" \
    || echo "compute-sanitizer: absent"
  return 0
}

# The CPU emulation for dry-run: a fake libcuda running the real kernels, and a fake CuPy.
# Writes the exports that select it to $STATE/emulation.env.
build_emulation() {
  "$PY" - > "$STATE/emulation.env" <<'EOF'
import shlex, sys
sys.path.insert(0, "tests")
from gpu_emu import build
env = build.environment(build.build())
for k in ("AESARA_BINCOUNT_LIBCUDA", "AESARA_BINCOUNT_EMULATED_GPU", "PYTHONPATH", "AESARA_FLAGS"):
    print(f"export {k}={shlex.quote(env[k])}")
EOF
}

run_standalone() {
  stage machine 60 report_machine
  stage kernel-tests 300 run_pytest tests/gpu/test_cuda_kernel_layer.py "${PYTEST_K[@]}"
  stage kernel-benchmark 300 "$PY" benchmarks/bench_gpu.py --standalone "${SMALL[@]}" \
    --json "$STATE/bench-standalone.json"
  if [ "$MODE" = dry-run ]; then
    skip compute-sanitizer "not on the CPU emulation"
  elif command -v compute-sanitizer >/dev/null; then
    stage sanitizer-memcheck 240 compute-sanitizer --tool memcheck --error-exitcode 3 \
      "$PY" benchmarks/bench_gpu.py --sanitize
    stage sanitizer-racecheck 240 compute-sanitizer --tool racecheck --error-exitcode 3 \
      "$PY" benchmarks/bench_gpu.py --sanitize
  else
    skip compute-sanitizer "not installed"
  fi
}

# Unpack the bundle into $STATE/site (once per set of parts) and put it in front.
install_bundle() {
  local parts stamp
  parts=$(ls "$BUNDLE"/part-* 2>/dev/null)
  [ -n "$parts" ] || { echo "no bundle parts in $BUNDLE"; return 1; }
  stamp=$(ls -l $parts | awk '{print $5, $NF}' | md5sum | cut -c1-16)
  if [ -f "$STATE/site/.stamp" ] && [ "$(cat "$STATE/site/.stamp")" = "$stamp" ]; then
    echo "bundle already unpacked ($stamp)"
    return 0
  fi
  echo "parts: $parts"
  if ! cat $parts | xz -t 2>/dev/null; then
    echo "the bundle is incomplete or damaged (carry every part-* of make_bundle.sh)"
    return 1
  fi
  rm -rf "$STATE/site" && mkdir -p "$STATE/site"
  cat $parts | xz -dc | tar xf - -C "$STATE/site" || return 1
  echo "$stamp" > "$STATE/site/.stamp"
  du -sh "$STATE/site"
}

# Put the unpacked bundle in front of the machine's packages (in this shell).
use_bundle() {
  export PYTHONPATH="$STATE/site:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
  export LD_LIBRARY_PATH="$STATE/site/_nvrtc${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # Aesara's BLAS probe needs numpy.distutils, absent on Python 3.12.
  export AESARA_FLAGS="blas__ldflags=${AESARA_FLAGS:+,$AESARA_FLAGS}"
  if ! "$PY" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
    echo "WARNING: no Python.h for $PY: Aesara runs without C code (GpuBincount uses perform)" | tee -a "$LOG"
    export AESARA_FLAGS="$AESARA_FLAGS,cxx="
  fi
}

run_aesara() {
  # A dry run uses the bundle only when asked (DRY_RUN_BUNDLE=1, with a PYTHON of the
  # bundle's version), then with the fake CuPy first.
  if [ "$MODE" != dry-run ] || [ "${DRY_RUN_BUNDLE:-0}" = 1 ]; then
    if ! stage bundle-install 180 install_bundle; then
      skip aesara-stages "no usable bundle in $BUNDLE"
      return
    fi
    use_bundle
    [ "$MODE" = dry-run ] && export PYTHONPATH="$ROOT/tests/gpu_emu/fakecupy:$PYTHONPATH"
    if ! stage bundle-import 120 "$PY" -c \
      'import numpy, cupy, aesara; print("bundle:", numpy.__version__, cupy.__version__, aesara.__version__)'; then
      skip aesara-stages "the bundle does not import"
      return
    fi
  fi
  stage gpu-tests 420 run_pytest tests/gpu "${PYTEST_K[@]}"
  stage aesara-benchmark 300 "$PY" benchmarks/bench_gpu.py "${SMALL[@]}" --json "$STATE/bench-aesara.json"
  if [ "$MODE" = dry-run ]; then
    skip main-job "the main job's GPU rows need a GPU"
  else
    stage main-job 180 "$PY" -m aesara_bincount --repeat 20
  fi
}

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
  all | dry-run) run_standalone; run_aesara ;;
esac

results=()
for f in "$STATE/bench-standalone.json" "$STATE/bench-aesara.json"; do
  [ -f "$f" ] && results+=("$f") && cp "$f" "$OUT/"
done
if [ ${#results[@]} -gt 0 ]; then
  target="benchmarks/results/gpu-{gpu}.md"
  [ "$MODE" = dry-run ] && target="$STATE/dry-run-{gpu}.md"
  stage table 60 "$PY" benchmarks/bench_gpu.py --table "${results[@]}" --out "$OUT/gpu-table.md" \
    --results "$target"
else
  skip table "no benchmark results"
fi
echo "=== summary ($FAILED failed)" | tee -a "$LOG"
cat "$SUMMARY"
echo "results in $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit "$FAILED"
