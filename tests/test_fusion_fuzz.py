"""Differential fuzzing of the fused bincount: random scalar graphs against the unfused graph.

Hypothesis draws elementwise graphs for ``x`` (integer ops, casts to every
integer dtype, so that values wrap, go negative or reach the top of their
dtype) and for the weights (float and integer ops, float32/float64/int32
results), from vector inputs of several dtypes, 0-d inputs and constants.
Each drawn case holds three bincounts (fused x, fused weights, both) and a
scatter-add onto zeros, compiled in one function with the rewrite and in
one without it (``excluding("bincount_fusion")``); the outcomes must be the
same: results (integers bit for bit, floats up to the order of the sums) or
the exception and its message.  Each example costs two compiles, so CI
draws few of them; ``--hypothesis-profile=long`` draws more.
"""
import aesara
import aesara.tensor as at
import numpy as np
import pytest
from hypothesis import example, given, note, settings
from hypothesis import strategies as st

from aesara.tensor.extra_ops import bincount

from aesara_bincount import FusedBincount
from test_fusion import FUSED, UNFUSED, _assert_same_outcome

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")

# Inputs of the drawn graphs: vectors of several dtypes, a 0-d scalar each.
X_VECTORS = {"a": "int64", "b": "int8", "c": "uint16", "d": "int32"}
W_VECTORS = {"v": "float64", "u": "float32", "k": "int16"}


def _inputs():
    ins = {name: at.vector(name, dtype=dt) for name, dt in {**X_VECTORS, **W_VECTORS}.items()}
    ins["s"] = at.scalar("s", dtype="int32")
    ins["th"] = at.scalar("th", dtype="float64")
    return ins


#: The operations both graph strategies draw: (expr, text, other, other's text) -> (expr, text).
COMMON_OPS = {
    "add": lambda e, t, o, ot: (e + o, f"({t} + {ot})"),
    "sub": lambda e, t, o, ot: (e - o, f"({t} - {ot})"),
    "mul": lambda e, t, o, ot: (e * o, f"({t} * {ot})"),
    "max": lambda e, t, o, ot: (at.maximum(e, o), f"max({t}, {ot})"),
    "min": lambda e, t, o, ot: (at.minimum(e, o), f"min({t}, {ot})"),
    "abs": lambda e, t, o, ot: (abs(e), f"abs({t})"),
}


@st.composite
def int_graphs(draw, ins):
    """An integer elementwise graph and its text."""
    leaves = ["a", "b", "c", "d", "s"]
    name = draw(st.sampled_from(leaves[:4]))
    expr, text = ins[name], name
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["add", "sub", "mul", "floordiv", "mod", "max", "min", "abs", "cast"]))
        other_name = draw(st.sampled_from(leaves + ["const"]))
        if other_name == "const":
            other = np.array(draw(st.integers(-3, 5)), dtype=draw(st.sampled_from(["int8", "int64"])))
            other_text = f"{other!r}"
        else:
            other, other_text = ins[other_name], other_name
        if op in COMMON_OPS:
            expr, text = COMMON_OPS[op](expr, text, other, other_text)
        elif op == "floordiv":  # by a variable: may be zero (ZeroDivisionError)
            expr, text = expr // other, f"({text} // {other_text})"
        elif op == "mod":
            expr, text = expr % other, f"({text} % {other_text})"
        else:
            dt = draw(st.sampled_from(INT_DTYPES))
            expr, text = expr.astype(dt), f"{dt}({text})"
    if expr.dtype.startswith("float"):
        expr, text = expr.astype("int64"), f"int64({text})"
    return expr, text


@st.composite
def weight_graphs(draw, ins):
    """A weights graph (float32, float64 or int32 result) and its text."""
    leaves = ["v", "u", "k", "th"]
    name = draw(st.sampled_from(leaves[:3]))
    expr, text = ins[name], name
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["add", "sub", "mul", "div", "max", "min", "neg", "abs", "exp", "f32"]))
        other_name = draw(st.sampled_from(leaves + ["const"]))
        if other_name == "const":
            other = draw(st.sampled_from([np.float64(-0.0), np.float64(0.5), np.float64(3.0), np.float64(-2.25),
                                          np.float32(0.1), np.float32(1e-45)]))
            other_text = f"{other!r}"
        else:
            other, other_text = ins[other_name], other_name
        if op in COMMON_OPS:
            expr, text = COMMON_OPS[op](expr, text, other, other_text)
        elif op == "div":
            expr, text = expr / (abs(other) + 1), f"({text} / (|{other_text}| + 1))"
        elif op == "neg":
            expr, text = -expr, f"-{text}"
        elif op == "exp":
            expr, text = at.exp(at.clip(expr, -5, 5)), f"exp(clip({text}))"
        else:
            expr, text = expr.astype("float32"), f"float32({text})"
    out = draw(st.sampled_from(["float64", "float32", "int32"]))
    if out == "int32":
        expr = at.clip(expr, -1e6, 1e6)
    return expr.astype(out), f"{out}({text})"


@st.composite
def cases(draw, make_inputs=_inputs):
    """(inputs, outputs, size, seed, openmp); ``make_inputs()`` gives the input
    variables by name (tests/gpu/test_cuda_fused_fuzz.py: GPU vectors)."""
    ins = make_inputs()
    texts = []

    def xg():
        expr, text = draw(int_graphs(ins))
        texts.append(f"x = {text}")
        return expr

    def wg():
        expr, text = draw(weight_graphs(ins))
        texts.append(f"w = {text}")
        return expr

    def cap(e, top):  # in e's own dtype: uint64 with an int constant would be float64
        return at.minimum(e, np.array(min(top, np.iinfo(e.dtype).max), dtype=e.dtype))

    n = draw(st.sampled_from([0, 10]))
    w_scatter = wg()
    outs = [
        bincount(cap(xg(), 3000), minlength=n),   # fused x (counts); no huge output
        bincount(ins["a"], weights=wg()),                # fused weights
        bincount(cap(xg(), 3000), weights=wg()),  # both
        at.inc_subtensor(at.zeros(50, dtype=w_scatter.dtype)[cap(xg(), 49)], w_scatter),
    ]
    note("; ".join(texts))
    size = draw(st.sampled_from([0, 1, 7, 1000, 120_000]))
    seed = draw(st.integers(0, 2**32 - 1))
    openmp = draw(st.booleans())
    return ins, outs, size, seed, openmp


def _values(ins, size, seed):
    rng = np.random.default_rng(seed)
    vals = {}
    for name, dt in X_VECTORS.items():
        lo = -3 if np.dtype(dt).kind == "i" and rng.random() < 0.3 else 0
        vals[name] = rng.integers(lo, 60, size).astype(dt)
    vals["v"] = rng.standard_normal(size)
    if size:
        vals["v"][0] = -0.0
    vals["u"] = rng.standard_normal(size).astype("float32")
    vals["k"] = rng.integers(-50, 50, size).astype("int16")
    vals["s"] = np.int32(rng.integers(0, 4))
    vals["th"] = np.float64(rng.standard_normal())
    return [vals[name] for name in ins]


def _negative_x_and_modulo_by_zero():
    """The case a cold CI run drew (2026-12-05): the third bincount's x = a * b goes
    negative and the scatter's index (max(|a|, b) % c) * s divides by a zero c, so the
    fused and the unfused function raise different errors (each an output's own)."""
    ins = _inputs()
    a, b, c, v, u, k, s, th = (ins[n] for n in ("a", "b", "c", "v", "u", "k", "s", "th"))

    def cap(e, top):
        return at.minimum(e, np.array(min(top, np.iinfo(e.dtype).max), dtype=e.dtype))

    def int32(e):
        return at.clip(e, -1e6, 1e6).astype("int32")

    w_scatter = int32(at.exp(at.clip(((v + v) + 3.0) - th, -5, 5)))
    outs = [
        bincount(cap(abs(a), 3000), minlength=0),
        bincount(a, weights=int32(at.minimum(at.maximum(u / (abs(k) + 1), th), th))),
        bincount(cap(a * b, 3000), weights=int32((abs(v + u) / (abs(k) + 1)).astype("float32"))),
        at.inc_subtensor(at.zeros(50, dtype="int32")[cap((at.maximum(abs(a), b) % c) * s, 49)], w_scatter),
    ]
    return ins, outs, 1000, 22645, False


@settings(max_examples=100 if settings.default.max_examples >= 500 else 3)
@given(cases())
@example(case=_negative_x_and_modulo_by_zero())
def test_random_scalar_graphs_match_the_unfused_graph(case):
    ins, outs, size, seed, openmp = case
    inputs = list(ins.values())
    with aesara.config.change_flags(openmp=openmp):
        fused = aesara.function(inputs, outs, mode=FUSED, on_unused_input="ignore")
        unfused = aesara.function(inputs, outs, mode=UNFUSED, on_unused_input="ignore")
    ops = [type(n.op) for n in fused.maker.fgraph.toposort()]
    note(f"fused nodes: {ops.count(FusedBincount)}")
    assert ops.count(FusedBincount) >= 1, ops  # merged sub-graphs have other clients
    assert FusedBincount not in [type(n.op) for n in unfused.maker.fgraph.toposort()]
    _assert_same_outcome(fused, unfused, *_values(ins, size, seed), outputs=(inputs, outs))
