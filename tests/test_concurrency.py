"""Threads, OpenMP and fork: the supported pattern, and the documented limits.

- One ``f.copy()`` per thread: 8 Python threads x 2,000 calls each, OpenMP
  off and on, valid and invalid inputs mixed, only correct results and the
  right errors.
- One function object shared by threads is *not* safe, for Aesara's own
  graph as for ours: ``Function.__call__`` keeps the call's inputs and
  outputs in the function object.  The test below reproduces the
  interleaving deterministically.
- OpenMP: ``OMP_NUM_THREADS`` is respected, the thread pool does not grow
  call after call, calls from a thread pool and from inside an OpenMP
  parallel region neither deadlock nor start nested teams, and a process
  forked after OpenMP ran can still call the function (GNU OpenMP's thread
  pool does not survive ``fork``).
"""
import os
import random
import re
import subprocess
import threading

import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.compile.mode import get_default_mode
from aesara.tensor.extra_ops import bincount

from aesara_bincount import Bincount
from backends import bincount_op_nodes
from expect import assert_same_histogram
from procs import run_python

THREADS = 8
CALLS = 2000
SCATTER_N = 50_000


def _function(openmp, mode=None):
    x = at.vector("x", dtype="int64")
    w = at.vector("w", dtype="float64")
    m = at.lscalar("m")
    outputs = [
        bincount(x, minlength=m),
        bincount(x, weights=w, minlength=m),
        at.inc_subtensor(at.zeros(SCATTER_N, dtype="float32")[x], 1.0),
    ]
    with aesara.config.change_flags(openmp=openmp):
        return aesara.function([x, w, m], outputs, mode=mode)


def _inputs(rng, count):
    """Inputs of many sizes (with and without OpenMP threads) and ranges;
    one in eight holds a negative value (a ValueError)."""
    cases = []
    for i in range(count):
        size = int(rng.choice([0, 1, 17, 300, 3000, 40_000]))
        top = int(rng.choice([1, 100, 5000, SCATTER_N]))
        x = rng.integers(0, top, size=size)
        if i % 8 == 7 and size:
            x[rng.integers(size)] = -int(rng.integers(1, 50))
        w = rng.standard_normal(size)
        m = int(rng.choice([0, 10, 2000]))
        cases.append((x, w, m))
    return cases


def _outcome(fn, case):
    try:
        return [np.array(r, copy=True) for r in fn(*case)]
    except ValueError as exc:
        return ("ValueError", str(exc).split("\n")[0])


def _same(a, b) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        return a == b
    return all(p.dtype == q.dtype and np.array_equal(p, q, equal_nan=True) for p, q in zip(a, b))


@pytest.mark.parametrize("openmp", [False, True], ids=["openmp_off", "openmp_on"])
def test_one_copy_per_thread(openmp):
    f = _function(openmp)
    assert [n.op.openmp for n in f.maker.fgraph.toposort() if isinstance(n.op, Bincount)] == [
        openmp
    ] * 3
    rng = np.random.default_rng(4)
    cases = _inputs(rng, 24)
    # Expected outcomes, from the function in this thread, checked against numpy.
    expected = [_outcome(f, c) for c in cases]
    for (x, w, m), out in zip(cases, expected):
        if isinstance(out, tuple):
            assert (x < 0).any() and out[0] == "ValueError"
            continue
        nbins = max(int(x.max()) + 1 if x.size else 0, m)
        assert_same_histogram(out[0], x, None, nbins, "int64", "counts")
        assert_same_histogram(out[1], x, w, nbins, "float64", "weights")
        assert_same_histogram(out[2], x, np.float32(1.0), SCATTER_N, "float32", "scatter")

    failures = []
    done = [0] * THREADS
    barrier = threading.Barrier(THREADS)

    def worker(t):
        g = f.copy()
        order = list(range(len(cases)))
        random.Random(t).shuffle(order)
        barrier.wait()
        for k in range(CALLS):
            i = order[k % len(order)]
            got = _outcome(g, cases[i])
            if not _same(got, expected[i]):
                failures.append((t, k, i))
            done[t] += 1

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not failures, f"{len(failures)} wrong results, first: {failures[:5]}"
    assert done == [CALLS] * THREADS


def _switch_inside_call(fn, x_mine, meanwhile):
    """Call ``fn(x_mine)``; between the moment ``Function.__call__`` has stored
    its inputs and the moment it runs the graph, run ``meanwhile()``: what
    another thread may do when the GIL switches there."""
    vm = fn.vm

    def vm_after_a_thread_switch(*args, **kwargs):
        fn.vm = vm
        try:
            meanwhile()
        finally:
            fn.vm = vm_after_a_thread_switch
        return vm(*args, **kwargs)

    fn.vm = vm_after_a_thread_switch
    try:
        return np.array(fn(x_mine), copy=True)
    finally:
        fn.vm = vm


@pytest.mark.parametrize("graph", ["aesara", "aesara_bincount"])
def test_one_function_object_shared_by_threads_is_not_safe(graph):
    """The documented limitation.  Aesara's ``Function`` keeps each call's
    inputs (and outputs) in the function object, and clears the inputs when a
    call ends.  So when the GIL switches between two threads inside
    ``__call__`` of one shared object, a thread either computes on the other
    thread's input or finds its input gone.  It is so for Aesara's own graph
    and for ours alike; one ``f.copy()`` per thread is immune."""
    x = at.vector("x", dtype="int64")
    mode = get_default_mode()
    if graph == "aesara":
        mode = mode.excluding("bincount")
    f = aesara.function([x], bincount(x), mode=mode)
    assert bool(bincount_op_nodes(f)) == (graph == "aesara_bincount")
    mine = np.array([0, 0, 1])
    other = np.array([2, 2, 2, 2])

    def other_thread_stores_its_input():
        # the first thing other's call does: fill the input storage
        f.input_storage[0].storage[0] = f.input_storage[0].type.filter(other)

    # 1. the other thread has stored its input: this call computes on it
    got = _switch_inside_call(f, mine, other_thread_stores_its_input)
    np.testing.assert_array_equal(got, np.bincount(other))

    # 2. the other thread's whole call ran: this call's input is gone
    with pytest.raises(Exception):
        _switch_inside_call(f, mine, lambda: f(other))

    # One copy per thread: the same switches are harmless.
    g = f.copy()

    def copy_stores_its_input():
        g.input_storage[0].storage[0] = g.input_storage[0].type.filter(other)

    for meanwhile in (copy_stores_its_input, lambda: g(other)):
        np.testing.assert_array_equal(_switch_inside_call(f, mine, meanwhile), np.bincount(mine))
    np.testing.assert_array_equal(g(other), np.bincount(other))


# -- OpenMP in a fresh process ---------------------------------------------------------
_SETUP = """
import os
import numpy as np, aesara, aesara.tensor as at
from aesara.tensor.extra_ops import bincount
import aesara_bincount

def threads():
    return len(os.listdir("/proc/self/task"))

x = at.vector("x", dtype="int64")
with aesara.config.change_flags(openmp=True):
    f = aesara.function([x], bincount(x))
big = np.random.default_rng(0).integers(0, 1000, size=1_000_000)
expected = np.bincount(big)
"""
_QUIET = {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_WAIT_POLICY": None}


@pytest.mark.parametrize("omp_threads", [1, 2, 3])
def test_omp_num_threads_is_respected(omp_threads):
    """A call starts OMP_NUM_THREADS - 1 worker threads once, not per call."""
    out = run_python(
        _SETUP
        + """
before = threads()
assert (f(big) == expected).all()
after_one = threads()
for _ in range(50):
    assert (f(big) == expected).all()
print(before, after_one, threads())
""",
        env=dict(_QUIET, OMP_NUM_THREADS=str(omp_threads)),
        timeout=300,
    )
    before, after_one, after_many = map(int, out.stdout.split()[-3:])
    assert after_one - before == omp_threads - 1
    assert after_many == after_one


def test_calls_from_a_thread_pool():
    """8 pool threads, each with its own copy: correct, no deadlock, and at
    most one OpenMP team per calling thread (the call holds the GIL, so one
    team runs at a time)."""
    out = run_python(
        _SETUP
        + """
from concurrent.futures import ThreadPoolExecutor
local = __import__("threading").local()

def call(_):
    if not hasattr(local, "f"):
        local.f = f.copy()
    return bool((local.f(big) == expected).all())

base = threads()
with ThreadPoolExecutor(8) as pool:
    ok = all(pool.map(call, range(400)))
    peak = threads()
print(ok, base, peak)
""",
        env=dict(_QUIET, OMP_NUM_THREADS="2"),
        timeout=300,
    )
    ok, base, peak = out.stdout.split()[-3:]
    assert ok == "True"
    # the pool's 8 threads, each the master of at most one team of 2
    assert int(peak) - int(base) <= 8 + 8 * (2 - 1)


_NESTED_C = r"""
#include <omp.h>
typedef int (*callback_t)(int);
int run_in_parallel_region(callback_t cb, int nthreads)
{
    int rc = -1;
#pragma omp parallel num_threads(nthreads)
    {
#pragma omp master
        rc = cb(omp_get_num_threads());
    }
    return rc;
}
"""


def test_call_from_inside_an_openmp_region(tmp_path):
    """Called from an OpenMP parallel region (here a C loop that calls back
    into Python), Bincount runs on one thread: even with nesting allowed
    (OMP_MAX_ACTIVE_LEVELS=2) it starts no nested team."""
    src = tmp_path / "nested.c"
    lib = tmp_path / "libnested.so"
    src.write_text(_NESTED_C)
    cc = subprocess.run(
        ["gcc", "-shared", "-fPIC", "-fopenmp", "-o", str(lib), str(src)],
        capture_output=True,
        text=True,
    )
    if cc.returncode != 0:
        pytest.skip(f"cannot build the OpenMP helper: {cc.stderr[-500:]}")
    out = run_python(
        _SETUP
        + f"""
import ctypes
assert (f(big) == expected).all()  # the top-level team exists from now on
helper = ctypes.CDLL({str(lib)!r})
CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)
seen = {{}}

def inside(team):
    seen["team"] = team
    seen["before"] = threads()
    seen["ok"] = bool((f(big) == expected).all())
    seen["after"] = threads()
    return 0

helper.run_in_parallel_region.argtypes = [CB, ctypes.c_int]
assert helper.run_in_parallel_region(CB(inside), 2) == 0
print(seen["team"], seen["ok"], seen["before"], seen["after"])
""",
        env=dict(_QUIET, OMP_NUM_THREADS="2", OMP_MAX_ACTIVE_LEVELS="2"),
        timeout=300,
    )
    team, ok, before, after = out.stdout.split()[-4:]
    assert team == "2" and ok == "True"
    assert after == before, "a nested OpenMP team was started"


def test_forked_worker_after_openmp_ran():
    """A worker process forked after the parent ran an OpenMP region gets
    correct results and does not hang.  GNU OpenMP's thread pool does not
    survive fork, so aesara_bincount makes OpenMP single-threaded in a forked
    child (multiprocessing's default start method on Linux)."""
    out = run_python(
        _SETUP
        + """
import multiprocessing as mp

def child(q):
    q.put((bool((f(big) == expected).all()), threads()))

assert (f(big) == expected).all()  # the parent's OpenMP team exists
ctx = mp.get_context("fork")
q = ctx.Queue()
p = ctx.Process(target=child, args=(q,))
p.start()
p.join(30)
if p.is_alive():
    p.kill()
    print("HUNG")
else:
    ok, child_threads = q.get(timeout=10)
    print(ok, p.exitcode)
""",
        env=dict(_QUIET, OMP_NUM_THREADS="2"),
        timeout=300,
    )
    assert out.stdout.split()[-2:] == ["True", "0"], out.stdout


def _static_data(text: str):
    """Variables that outlive a call in C text: declarations at file scope
    (outside any braces), and ``static`` locals of functions."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    # preprocessor lines, with their continuation lines
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*$", "", text, flags=re.M)
    found = [
        " ".join(m.split())
        for m in re.findall(r"\bstatic\s+(?:APPLY_SPECIFIC\(\w+\)\s*)?[^;{}()]*;", text)
    ]
    depth, stmt = 0, ""
    for ch in text:
        if ch == "{":
            if depth == 0 and "(" in stmt:
                stmt = ""  # a function body: its locals live in the call
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            stmt += ch
            if ch == ";":
                s = " ".join(stmt.split())
                stmt = ""
                # a function prototype or a typedef is not data
                if s and "(" not in s and not s.startswith("typedef") and s not in found:
                    found.append(s)
    return found


#: Process-wide state of the GPU host code.  The launcher
#: (cuda_host/driver.h, also run without the GIL by the kernel layer's
#: library) publishes its two caches once with an atomic compare-and-swap (the
#: driver API table loaded with dlopen; the page-locked status slots) and
#: hands out a slot with atomic bit operations, one call per slot.  The Op's
#: glue (written only under the GIL, which it holds but while it waits): the
#: kernels of each CUDA context, of which every call takes its own copy, and
#: the cupy module and its attributes (imported once).
GIL_GUARDED_GPU_CACHES = {
    "cuda_host/driver.h": [
        "static bc_cuda_api *published = NULL;",
        "static void *published = NULL;",
        "static unsigned long long taken = 0;",
    ],
    "cuda_host/gpu_bincount_op.c": [
        "static APPLY_SPECIFIC(bc_gpu_entry) table[BC_GPU_CONTEXTS];",
        "static int oldest = 0;",
    ],
    "cuda_host/gpu_scatter_add_op.c": [
        "static bc_rows_kernels table[SA_GPU_CONTEXTS];",
        "static int oldest = 0;",
    ],
    # The cupy module and a few of its attributes, imported once.
    "cuda_host/gpuarray_type.h": ["static PyObject *cupy = NULL;"],
}


def test_c_sources_hold_no_mutable_static_data():
    """The CPU code keeps all its state in the call (the context on the stack
    and heap buffers freed before returning), so copies of a function, and
    threads, share nothing through it; the GPU host code holds only the listed
    caches, written under the GIL."""
    from aesara_bincount_core._c_code import c_code_dir, source_files

    files = source_files((".c", ".h"))
    assert "cpu/bincount.c" in files
    for name in files:
        with open(os.path.join(c_code_dir(), name), encoding="utf-8") as fh:
            data = [d for d in _static_data(fh.read()) if not d.startswith("static const")]
        assert data == GIL_GUARDED_GPU_CACHES.get(name, []), (
            f"{name}: variables that outlive a call: {data}"
        )
    assert _static_data(
        "typedef struct { int a; } T;\nstatic int calls = 0;\n"
        "int f(void) { static int n; return n; }\nstatic T t = {1};"
    ) == ["static int calls = 0;", "static int n;", "static T t = ;"]
    # A macro of several lines is not file-scope code, whatever it holds.
    assert _static_data("#define LOOP(X) \\\n    for (i = 0; i < n; i++) { \\\n        X; \\\n    }\nstatic int s;") == [
        "static int s;"
    ]
