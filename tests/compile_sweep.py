"""The compile sweep: every C Op built for every combination of its macros, grouped into few modules.

What a node of a C Op is compiled with is its macros; nothing else of the
node reaches the C code.  They come from two places:

- Aesara's ``ExternalCOp.get_c_macros``: ``DTYPE_``, ``TYPENUM_`` and
  ``ITEMSIZE_`` of each input and output (their dtypes, not their shapes:
  a 0-d weight and a vector weight get the same macros), and
  ``APPLY_SPECIFIC``;
- the Op's ``c_flags(node)``, derived from its props and those dtypes
  (``Bincount``: ``BC_SCATTER``, ``BC_OUT_FLOAT``; ``ScatterAdd``:
  ``SA_ONTO_ZEROS``, ``SA_INPLACE``, ``SA_OUT_FLOAT``, ``SA_IDX_SIGNED``;
  ``FusedBincount`` adds ``BC_NX``, ``BC_NIN``, ``BC_FX_T``,
  ``BC_FX_FUSED``, ``BC_WEIGHTED``, ``BC_FW_FUSED`` and the generated
  scalar code);
- and ``_OPENMP``, which ``-fopenmp`` defines for the whole module when an
  Op's ``openmp`` prop is on (Aesara's ``OpenMPOp``).

So the reachable combinations are the products of what ``make_node``
accepts: ``Bincount``: 8 dtypes of ``x`` x 10 output dtypes x weights
absent or present (their dtype is the output's) x 2 modes x OpenMP off/on
(640); ``ScatterAdd``: onto zeros, onto a base, in place x 10 dtypes x 8
index dtypes x OpenMP (480); ``FusedBincount``: computed ``x`` without
weights, computed ``x`` with plain or computed weights, plain ``x`` with
computed weights, x 8 dtypes of ``x`` x 10 output dtypes x 2 modes x OpenMP
(1280).  :func:`group_cases` builds the nodes of a group and checks that
no two have the same macros (:func:`macro_signature`), so the count printed
is the number of distinct configurations built.  Shapes, which are no
macros, vary between the nodes of a group: weights ``(N,)`` and 0-d (and
``(1,)`` in the scatter-add form, at the call), increments of rank 0, 1 and
2 for rows of 3.

A group (one Op, one variant, one OpenMP setting) is one Aesara function
with Aesara's C linker, so all its nodes are one module: one compiler run.
It is compiled at ``-O0`` (``gcc__cxxflags``, after Aesara's ``-O3``): the
compiler checks the same code, three times faster.  Each node is then
called once on a small input and compared with :func:`numpy.add.at` /
:func:`numpy.bincount` (ScatterAdd in place: the function's input stays
unchanged).  ``tests/test_compile_sweep.py`` runs the groups in
subprocesses, two at a time, each in a compile directory of its own under
Aesara's ``base_compiledir`` (``bincount-sweep/<group>``), so a second run
loads the modules from there.

Run as a script: ``python tests/compile_sweep.py GROUP`` builds and checks
one group and prints ``SWEEP <group> <configurations> <seconds>``;
``python tests/compile_sweep.py --list`` prints the groups.
"""
import itertools
import sys
import time
from typing import Callable, List, NamedTuple

import numpy as np

from aesara_bincount_core.semantics import INDEX_DTYPES, MODES, OUT_DTYPES

OPENMP = (False, True)
SCATTER_VARIANTS = ("zeros", "base", "inplace")
#: FusedBincount's kinds: (x computed, weights: None, "plain" or "computed").
FUSED_KINDS = {"fx": (True, None), "fx-w": (True, "plain"), "fx-fw": (True, "computed"), "fw": (False, "computed")}
N = 24  # elements of x and of vector weights
SCATTER_N = 40  # bins of the scatter-add form
ROWS, WIDTH = 6, 3  # the base of ScatterAdd


def groups() -> List[str]:
    """The names of the groups: ``<op>-<variant>-omp<0|1>``."""
    names = [f"bincount-{m}" for m in MODES]
    names += [f"scatteradd-{v}" for v in SCATTER_VARIANTS]
    names += [f"fused-{k}-{m}" for k in FUSED_KINDS for m in MODES]
    return [f"{n}-omp{int(o)}" for n in names for o in OPENMP]


class Case(NamedTuple):
    node_out: object  # the output variable of the node
    expected: Callable  # (values of the inputs) -> the expected array
    label: str


def x_values(dtype, rng, scatter):
    """``N`` values of ``dtype``: small, their top, and (scatter form, signed) negative ones."""
    top = min(int(np.iinfo(dtype).max), SCATTER_N - 1 if scatter else 50)
    low = -SCATTER_N if scatter and dtype.startswith("int") else 0
    x = rng.integers(max(low, int(np.iinfo(dtype).min)), top, size=N, endpoint=True)
    x[0] = top
    return x.astype(dtype)


def w_values(dtype, size, rng):
    """Small weights of ``dtype`` whose sums are exact: quarters for floats."""
    if dtype.startswith("float"):
        return (rng.integers(-8, 9, size=size) / 4).astype(dtype)
    low = 0 if dtype.startswith("uint") else -3
    return rng.integers(low, 6, size=size).astype(dtype)


def add_at(length, dtype, index, weights):
    """``numpy.add.at`` onto ``zeros(length)``: the reference of both forms."""
    out = np.zeros(length, dtype=dtype)
    np.add.at(out, index.astype(np.int64), np.asarray(weights).astype(dtype))
    return out


def bincount_expected(mode, out_dtype, x, w):
    length = SCATTER_N if mode == "scatter" else max(int(x.max()) + 1, 3)
    return add_at(length, out_dtype, x, np.ones(x.size, out_dtype) if w is None else np.broadcast_to(w, x.shape))


def macro_signature(node) -> str:
    """The macros the node's C code is compiled with (all but its name), OpenMP included."""
    define, _ = node.op.get_c_macros(node, "sweep", check_input=True)
    lines = [ln for ln in define.splitlines() if ln and "APPLY_SPECIFIC" not in ln]
    if hasattr(node.op, "_codes"):  # FusedBincount: its own macros
        lines += node.op._codes(node)[0].splitlines()
    return "\n".join(lines) + f"\n_OPENMP {int(bool(node.op.openmp))}"


class Inputs:
    """The symbolic inputs of a group and their values, made on first use."""

    def __init__(self, rng):
        self.rng, self.vars, self.values = rng, [], {}

    def get(self, name, dtype, ndim, make):
        import aesara.tensor as at

        if name not in self.values:
            var = at.tensor(dtype=dtype, shape=(None,) * ndim, name=name)
            self.vars.append(var)
            self.values[name] = (var, make())
        return self.values[name][0]

    def value(self, var):
        return self.values[var.name][1]


def bincount_cases(mode, openmp, ins):
    from aesara_bincount import Bincount

    cases = []
    scatter = mode == "scatter"
    n = ins.get("n", "int64", 0, lambda: np.array(SCATTER_N if scatter else 3, dtype="int64"))
    for (i, xd), (j, od) in itertools.product(enumerate(INDEX_DTYPES), enumerate(OUT_DTYPES)):
        x = ins.get(f"x_{xd}", xd, 1, lambda: x_values(xd, ins.rng, scatter))
        op = Bincount(mode, od, openmp=openmp)
        cases.append(Case(op(x, n), lambda v, x=x, od=od: bincount_expected(mode, od, v(x), None), f"{xd}->{od}"))
        ndim = (i + j) % 2  # weights 0-d and (N,) in turn, for every dtype of x and of the output
        w = ins.get(f"w{ndim}_{od}", od, ndim, lambda: w_values(od, () if ndim == 0 else N, ins.rng))
        cases.append(Case(op(x, n, w), lambda v, x=x, w=w, od=od: bincount_expected(mode, od, v(x), v(w)),
                          f"{xd}->{od}, weights {'0-d' if ndim == 0 else '(N,)'}"))
    return cases


def scatteradd_cases(variant, openmp, ins):
    import aesara.tensor as at

    from aesara_bincount import ScatterAdd

    cases = []
    # In place: the rewrite of optdb makes it so (a graph given to aesara.function holds no in-place Op).
    op = ScatterAdd("zeros" if variant == "zeros" else "base", openmp=openmp)
    for (i, idd), (j, od) in itertools.product(enumerate(INDEX_DTYPES), enumerate(OUT_DTYPES)):
        signed = idd.startswith("int")
        idx = ins.get(f"idx_{idd}", idd, 1,
                      lambda: ins.rng.integers(-ROWS if signed else 0, ROWS, size=10).astype(idd))
        rank = (i + j) % 3  # increments (), (3,) and (10, 3) in turn
        shape = [(), (WIDTH,), (10, WIDTH)][rank]
        inc = ins.get(f"inc{rank}_{od}", od, rank, lambda: w_values(od, shape, ins.rng))
        if variant == "zeros":
            out = op(at.as_tensor_variable(np.array([ROWS, WIDTH], dtype="int64")), inc, idx)

            def expected(v, idx=idx, inc=inc, od=od):
                return add_at_rows(np.zeros((ROWS, WIDTH), od), v(idx), v(inc))
        else:
            # In place, each node adds into an input of its own (mutable).
            name = f"base_{od}_{idd}" if variant == "inplace" else f"base_{od}"
            base = ins.get(name, od, 2, lambda: w_values(od, (ROWS, WIDTH), ins.rng))
            out = op(base, inc, idx)

            def expected(v, idx=idx, inc=inc, base=base):
                return add_at_rows(v(base).copy(), v(idx), v(inc))
        cases.append(Case(out, expected, f"idx {idd}, {od}, increments of rank {rank}"))
    return cases


def add_at_rows(base, idx, inc):
    np.add.at(base, idx.astype(np.int64), inc)
    return base


def fused_cases(kind, mode, openmp, ins):
    import aesara.scalar as aes

    from aesara_bincount import FusedBincount

    x_fused, weights = FUSED_KINDS[kind]
    scatter = mode == "scatter"
    n = ins.get("n", "int64", 0, lambda: np.array(SCATTER_N if scatter else 3, dtype="int64"))
    cases = []
    for (i, xd), (j, od) in itertools.product(enumerate(INDEX_DTYPES), enumerate(OUT_DTYPES)):
        # x = a + b: a vector and a 0-d scalar (0) of x's dtype; or x itself.
        a = ins.get(f"x_{xd}", xd, 1, lambda: x_values(xd, ins.rng, scatter))
        x_op = None
        x_ins = [a]
        if x_fused:
            b = ins.get(f"zero_{xd}", xd, 0, lambda: np.zeros((), xd))
            sa, sb = aes.get_scalar_type(xd)(), aes.get_scalar_type(xd)()
            x_op, x_ins = aes.Composite([sa, sb], [sa + sb]), [a, b]
        w_op, w_ins, out_dtype = None, [], od
        if weights is not None:
            # Plain weights 0-d and (N,) in turn; computed ones need a vector.
            ndim = 1 if weights == "computed" else (i + j) % 2
            c = ins.get(f"w{ndim}_{od}", od, ndim, lambda: w_values(od, () if ndim == 0 else N, ins.rng))
            w_ins = [c]
            if weights == "computed":
                # weights = c * s: c 0-d or (N,), s a 0-d one.
                s = ins.get(f"one_{od}", od, 0, lambda: np.ones((), od))
                sc, ss = aes.get_scalar_type(od)(), aes.get_scalar_type(od)()
                w_op, w_ins = aes.Composite([sc, ss], [sc * ss]), [c, s]
        op = FusedBincount(mode, out_dtype, openmp=openmp, x_op=x_op, w_op=w_op, weighted=weights is not None)
        out = op(*x_ins, n, *w_ins)

        def expected(v, a=a, c=(w_ins[0] if w_ins else None), od=od):
            return bincount_expected(mode, od, v(a), None if c is None else v(c))
        cases.append(Case(out, expected, f"{kind}: {xd}->{od}"))
    return cases


def group_cases(group, rng):
    """``(cases, inputs)`` of a group; raises if two nodes share their macros."""
    name, omp = group.rsplit("-omp", 1)
    openmp = bool(int(omp))
    ins = Inputs(rng)
    op, *rest = name.split("-")
    if op == "bincount":
        cases = bincount_cases(rest[0], openmp, ins)
    elif op == "scatteradd":
        cases = scatteradd_cases(rest[0], openmp, ins)
    else:
        cases = fused_cases("-".join(rest[:-1]), rest[-1], openmp, ins)
    signatures = [macro_signature(c.node_out.owner) for c in cases]
    assert len(set(signatures)) == len(signatures), f"{group}: two nodes with the same macros"
    return cases, ins


def run_group(group) -> int:
    """Build the group's module, call it, compare each node; returns the configurations built."""
    import aesara
    from aesara.compile import In, optdb
    from aesara.compile.mode import Mode
    from aesara.graph.rewriting.db import RewriteDatabaseQuery

    cases, ins = group_cases(group, np.random.default_rng(32))
    inplace = group.startswith("scatteradd-inplace")
    optimizer = None
    if inplace:  # only what makes ScatterAdd add into its (mutable) base
        optimizer = optdb.query(RewriteDatabaseQuery(include=["add_destroy_handler", "local_inplace_scatter_add"]))
    inputs = [In(v, mutable=inplace and v.name.startswith("base_")) for v in ins.vars]
    with aesara.config.change_flags(gcc__cxxflags="-O0"):
        fn = aesara.function(inputs, [c.node_out for c in cases], mode=Mode(linker="c", optimizer=optimizer))
    ops = [node.op for node in fn.maker.fgraph.apply_nodes]
    assert len(ops) == len(cases) and all(getattr(op, "inplace", False) == inplace for op in ops), ops
    values = {name: val for name, (_, val) in ins.values.items()}
    calls = [values]
    if group.startswith("bincount-scatter"):
        # The scatter-add form broadcasts weights typed (1,) as well.
        calls.append({k: (v[:1] if k.startswith("w1_") else v) for k, v in values.items()})
    for call in calls:
        inputs = [np.array(call[v.name], copy=True) for v in ins.vars]
        outs = fn(*inputs)

        def value(var, call=call):
            return call[var.name]

        for case, got in zip(cases, outs):
            want = case.expected(value)
            assert got.dtype == want.dtype, (group, case.label, got.dtype, want.dtype)
            np.testing.assert_array_equal(got, want, err_msg=f"{group}: {case.label}")
        for v, after in zip(ins.vars, inputs):  # the inputs are unchanged, but those given to add into
            if not (inplace and v.name.startswith("base_")):
                np.testing.assert_array_equal(after, call[v.name], err_msg=f"{group}: input {v.name} changed")
    return len(cases)


def main(argv):
    if argv[1:] == ["--list"]:
        print("\n".join(groups()))
        return
    for group in argv[1:]:
        start = time.perf_counter()
        count = run_group(group)
        print(f"SWEEP {group} {count} {time.perf_counter() - start:.1f}", flush=True)


if __name__ == "__main__":
    import aesara_bincount  # noqa: F401

    main(sys.argv)
