#!/usr/bin/env python
"""CPU benchmark of the SGD step of an embedding table (issue 41, item 5; a script, not a test).

The step most training code writes, ``updates=[(W, W - lr * aesara.grad(cost, W))]``
with ``cost = ((W[idx] - t) ** 2).sum()``, for a float32 table of V rows of
D = 64 and a batch of B indices (uniform over the rows, repeats included),
all in ``aesara.shared`` variables.  Candidates, each updating a table of its
own, interleaved call by call (:func:`aesara_bincount._timing.interleaved_times`):

- ``sparse``: the compiled function, whose rewrite ``sparse_update`` makes
  it one ``ScatterAdd`` of ``-lr`` times the gradient's rows into ``W``, in
  place: it reads and writes the touched rows only;
- ``dense``: the same with ``mode.excluding("sparse_update")``: a
  zero-filled table, the scatter-add into it, and Aesara's fused
  elementwise pass over the whole table;
- ``aesara``: the same with ``mode.excluding("bincount")``: Aesara's own
  graph;
- ``inc_subtensor``: the step written by hand,
  ``inc_subtensor(W[idx], -lr * grad(cost, W[idx]))``;
- ``numpy`` (``np.add.at(W, idx, -(g * lr))``), a numba loop for the
  scatter-add (the rows computed by NumPy) and ``torch.index_add_`` on one
  thread, where installed.

Every candidate gives the same table after one step (checked against
``np.add.at``).  Figures: the CPU time of the calling thread (every candidate
runs on it), best of 3 rounds of medians.  The sparse step's time should
not follow V at a fixed batch (the rows "V=1e6 / V=1e5"), the dense step's
does; the graph of each candidate is recorded (its Ops, in order).  The
table goes to ``benchmarks/results/sgd-<host>.md`` and ``.json``, with the
CPU model (family, model, AVX-512).  ``--quick`` runs tiny sizes (what
``make test`` runs, so that the script cannot rot).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_env  # noqa: E402,F401  (before Aesara: flags, warnings, sys.path)

import numpy as np  # noqa: E402

import aesara  # noqa: E402
import aesara.tensor as at  # noqa: E402
from aesara.compile.mode import get_default_mode  # noqa: E402

import aesara_bincount  # noqa: E402,F401
import peers  # noqa: E402
from aesara_bincount._timing import interleaved_times, load_average  # noqa: E402
from run_info import cpu_words, machine_info  # noqa: E402
from sizes import size_text  # noqa: E402

IMPLS = ["sparse", "dense", "aesara", "inc_subtensor", "numpy", "numba", "torch_1thread"]
LABELS = {
    "sparse": "W - lr * grad (ours)",
    "dense": "dense (sparse_update excluded)",
    "aesara": "Aesara's graph",
    "inc_subtensor": "inc_subtensor(W[idx], -lr * g)",
    "numpy": "np.add.at",
    "numba": "numba loop",
    "torch_1thread": "torch.index_add_ (1 thread)",
}
D = 64
LR = np.float32(0.01)


def cells(quick: bool):
    """(V, B) of every cell: two table sizes for each batch."""
    if quick:
        return [(200, 50), (2000, 50)]
    return [(10**5, 10**3), (10**6, 10**3), (10**5, 10**4), (10**6, 10**4)]


def _aesara_step(name, W0, idx_np, t_np):
    """``(table, step)``: the compiled step ``name`` on a shared copy of ``W0``."""
    W = aesara.shared(W0.copy(), name="W", borrow=True)
    idx, t = aesara.shared(idx_np, name="idx"), aesara.shared(t_np, name="t")
    rows = W[idx]
    loss = ((rows - t) ** 2).sum()
    if name == "inc_subtensor":
        update = at.inc_subtensor(rows, -LR * aesara.grad(loss, rows))
    else:
        update = W - LR * aesara.grad(loss, W)
    mode = get_default_mode()
    mode = {"dense": mode.excluding("sparse_update"), "aesara": mode.excluding("bincount")}.get(name, mode)
    return W, aesara.function([], [], updates=[(W, update)], mode=mode)


def graph_of(fn):
    """The Ops of a compiled function, in order (``Elemwise`` with its scalar op)."""
    return [str(node.op) for node in fn.maker.fgraph.toposort()]


def run_cell(extra, nrows, batch, rng, quick=False):
    W0 = rng.standard_normal((nrows, D)).astype("float32")
    idx_np = rng.integers(0, nrows, batch)
    t_np = rng.standard_normal((batch, D)).astype("float32")
    g = 2 * (W0[idx_np] - t_np)
    expected = W0.copy()
    np.add.at(expected, idx_np, -(g * LR))

    cands, tables, graphs = {}, {}, {}
    for name in ("sparse", "dense", "aesara", "inc_subtensor"):
        W, fn = _aesara_step(name, W0, idx_np, t_np)
        fn()
        tables[name] = W.get_value(borrow=True)
        cands[name], graphs[name] = fn, graph_of(fn)
    assert any("ScatterAdd{onto='base', inplace=True" in op for op in graphs["sparse"]), graphs["sparse"]
    assert not any("onto='zeros'" in op or "Alloc" in op for op in graphs["sparse"]), graphs["sparse"]

    np_table = W0.copy()

    def numpy_step():
        np.add.at(np_table, idx_np, -((2 * (np_table[idx_np] - t_np)) * LR))

    cands["numpy"] = numpy_step
    if "numba" in extra:
        nb_table = W0.copy()
        cands["numba"] = lambda: extra["numba"](nb_table, idx_np, -((2 * (nb_table[idx_np] - t_np)) * LR))
    if "torch_1thread" in extra:
        torch = extra["torch_1thread"]
        tW, ti, tt = torch.from_numpy(W0.copy()), torch.from_numpy(idx_np), torch.from_numpy(t_np)
        cands["torch_1thread"] = peers.one_thread(
            torch, lambda: tW.index_add_(0, ti, tW.index_select(0, ti).sub_(tt).mul_(-2 * float(LR)))
        )
    for name in ("numpy", "numba", "torch_1thread"):
        if name in cands:
            cands[name]()
    tables["numpy"] = np_table
    if "numba" in extra:
        tables["numba"] = nb_table
    if "torch_1thread" in extra:
        tables["torch_1thread"] = tW.numpy()
    for name, table in tables.items():
        np.testing.assert_allclose(table, expected, rtol=1e-5, atol=1e-5, err_msg=name)
    np.testing.assert_array_equal(tables["sparse"], expected)  # np.add.at's bits (one thread)

    # The dense steps take milliseconds to hundreds of them: few calls a round.
    res = interleaved_times(cands, one_thread=list(cands), rounds=1 if quick else 3,
                            budget_s=0.005 if quick else 0.3)
    return res["ms"], res["cpu_ms"], graphs


def table(rows, machine):
    desc = (
        f"Machine: {cpu_words(machine)}, {machine['cores']} cores "
        f"({machine['host']}); Python {machine['python']}, numpy {machine['numpy']}, Aesara "
        f"{machine['aesara']}, aesara_bincount {machine['aesara_bincount']}, numba "
        f"{machine.get('numba', '-')}, torch {machine.get('torch', '-')}; load average "
        f"{machine.get('load', '-')} at the start; {machine['date']}.\n\n"
        f"The SGD step `W <- W - lr * grad(((W[idx] - t) ** 2).sum(), W)` of a float32 table of V rows "
        f"of {D}, a batch of B indices. CPU time of the calling thread, median ms per step, candidates "
        "interleaved call by call, best of 3 rounds; the load average of each cell is its last column.\n\n"
    )
    names = [k for k in IMPLS if any(k in r["cpu_ms"] for r in rows)]
    lines = [
        "| V | B | " + " | ".join(f"{LABELS[k]} ms" for k in names)
        + " | dense / ours | Aesara / ours | inc_subtensor / ours | numba / ours | torch / ours | load |",
        "|---" * (2 + len(names) + 6) + "|",
    ]
    for r in rows:
        t = r["cpu_ms"]

        def ratio(a):
            return f"{t[a] / t['sparse']:.2f}" if a in t else "-"

        lines.append(
            f"| {size_text(r['nrows'])} | {size_text(r['batch'])} | "
            + " | ".join(f"{t[k]:.3f}" if k in t else "-" for k in names)
            + f" | {ratio('dense')} | {ratio('aesara')} | {ratio('inc_subtensor')} | {ratio('numba')} "
            f"| {ratio('torch_1thread')} | {r['load'][0]:.1f} |"
        )
    by = {(r["nrows"], r["batch"]): r["cpu_ms"] for r in rows}
    sizes = sorted({r["nrows"] for r in rows})
    scaling = ["", f"Time as the table grows, the batch fixed (V = {size_text(sizes[-1])} over V = "
               f"{size_text(sizes[0])}; 1 means the step reads and writes the touched rows only):", "",
               "| B | ours | dense | inc_subtensor |", "|---|---|---|---|"]
    for b in sorted({r["batch"] for r in rows}):
        if (sizes[0], b) in by and (sizes[-1], b) in by and len(sizes) > 1:
            small, big = by[sizes[0], b], by[sizes[-1], b]
            scaling.append(f"| {size_text(b)} | " + " | ".join(
                f"{big[k] / small[k]:.2f}" for k in ("sparse", "dense", "inc_subtensor")) + " |")
    graph = rows[-1]["graphs"]
    graphs = ["", "The compiled graphs (Ops in order, last cell):", ""] + [
        f"- {LABELS[k]}: " + ", ".join(f"`{op}`" for op in graph[k]) for k in graph
    ]
    return desc + "\n".join(lines + scaling + graphs) + "\n"


def write(rows, machine, out, stem):
    os.makedirs(out, exist_ok=True)
    text = table(rows, machine)
    with open(os.path.join(out, stem + ".md"), "w") as f:
        f.write(f"# The SGD step of an embedding table, CPU\n\n{text}")
    with open(os.path.join(out, stem + ".json"), "w") as f:
        json.dump({"kind": "sgd", "machine": machine, "rows": rows}, f, indent=1)
    return text


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    p.add_argument("--out", default=os.path.join(HERE, "results"), help="folder for the results")
    p.add_argument("--name", default=None, help="results file stem (default sgd-<host>)")
    p.add_argument("--from", dest="saved", metavar="JSON", default=None,
                   help="rewrite the table of a saved run, without measuring")
    args = p.parse_args(argv)
    if args.saved:
        with open(args.saved) as f:
            saved = json.load(f)
        rows, machine = saved["rows"], saved["machine"]
        text = write(rows, machine, os.path.dirname(os.path.abspath(args.saved)),
                     os.path.splitext(os.path.basename(args.saved))[0])
    else:
        rng = np.random.default_rng(41)
        extra = {}
        nb = peers.numba_peers()
        if nb is not None:
            extra["numba"] = nb.rows
        torch = peers.torch_module()
        if torch is not None:
            extra["torch_1thread"] = torch
        machine = machine_info()
        rows = []
        for i, (nrows, batch) in enumerate(cells(args.quick)):
            wall, cpu, graphs = run_cell(extra, nrows, batch, rng, args.quick)
            rows.append(dict(nrows=nrows, batch=batch, width=D, dtype="float32", ms=wall, cpu_ms=cpu,
                             graphs=graphs, load=list(load_average())))
            print(f"[{i + 1}] V={size_text(nrows)} B={size_text(batch)}: CPU ms "
                  + " ".join(f"{k}={v:.3f}" for k, v in cpu.items()), flush=True)
        text = write(rows, machine, args.out, args.name or f"sgd-{machine['host']}")
    print()
    print(text)
    return rows


if __name__ == "__main__":
    main()
