"""Ten more public programs, ported as a new user would port them, stay on the GPU (issue 39, "Done when").

The programs of ``ported_loops.py`` (the deeplearning.net LSTM, an RNN
trained with CTC, a graph-convolution fingerprint, a continuous-time Markov
model, a GRU language model) and of ``ported_models.py`` (PyMC3's rugby
model, word2vec's skip-gram, the deeplearning.net denoising autoencoder,
k-means, Lasagne's MLP with Adam), each compiled on GPU shared variables and
on host shared variables (the CPU graph).  For every function of a program:

- ``report(f)`` lists only the copies that an Op with no GPU implementation
  in CuPy 13 or in our kernels causes, and names it (:data:`EXPECTED`);
  ``inner_waits(f)`` only the nodes that wait by nature;
- on the emulation, one call waits and copies as :data:`EXPECTED` says
  (waits, device-to-host copies, host-to-device copies: the host inputs the
  original passes on each call, copied at the start of the call, plus the
  named copies);
- after the calls the original makes, twice, the outputs and every shared
  variable equal the CPU graph's.

``ctmc slinalg`` is the Markov model with ``aesara.tensor.slinalg.expm``:
its ``Expm`` and ``ExpmGrad`` stay on the host, and the report names them.

The host side of the CPU graph is compiled without Aesara's
``local_pow_specialize`` rewrites: in Aesara 2.9.4 they fail an assertion on
the LSTM's ``g ** 2`` of a ``Gemm`` of more precise static shape (a host
compile error of Aesara's own, which the GPU graph does not meet).
"""
import functools
import io
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_cases import AVAILABLE, EMULATED, WHY  # noqa: E402

aesara = pytest.importorskip("aesara")

from aesara_bincount import gpu  # noqa: E402
from lift_cases import CPU_MODE, assert_same, waits_and_copies  # noqa: E402
from ported_loops import LOOPS  # noqa: E402
from ported_models import MODELS  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}"),
    pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning", "ignore::UserWarning"),
]

PROGRAMS = {**LOOPS, **MODELS, "ctmc slinalg": functools.partial(LOOPS["ctmc"], expm="slinalg")}
MRG = "no GPU entry for mrg_uniform"
BODY = "the loop's body reads it on the host only ({}): one copy per call instead of one at every step"
#: program -> function -> (the reasons report(f) gives, the nodes inner_waits(f) names,
#: (waits, device-to-host copies, host-to-device copies) of one call on the emulation).
EXPECTED = {
    "lstm sentiment": {"f_grad_shared": ([MRG], [], (1, 1, 4)), "f_update": ([], [], (0, 0, 0)),
                       "f_pred": ([MRG], [], (1, 1, 3))},
    "rnn ctc": {"train": ([], [], (1, 1, 4))},
    "graph conv": {"train": ([], [], (1, 1, 0))},
    "ctmc": {"fit": ([], [], (1, 1, 0))},
    # CuPy 13's expm reads its norm on the host (waits) and CuPy has no general eig for ExpmGrad
    "ctmc slinalg": {"fit": ([BODY.format("Expm")] * 2 + [BODY.format("ExpmGrad")] * 2
                             + ["no GPU entry for ExpmGrad"], [], (4, 4, 4))},
    "gru lm": {"sgd_step": ([], [], (1, 1, 1)), "ce_error": ([], [], (1, 1, 1)), "predict": ([], [], (1, 1, 0))},
    "rugby": {"logp_dlogp": ([], [], (1, 1, 1)), "logp": ([], [], (1, 1, 1))},
    "skipgram": {"train": ([], [], (1, 1, 3))},
    "denoising autoencoder": {"train_da": (["no GPU entry for BinomialRV"], [], (1, 1, 1))},
    "kmeans": {"step": ([], ["GpuBincount"], (2, 2, 0))},
    "lasagne mlp": {"train_fn": ([MRG, MRG], [], (1, 1, 4)), "val_fn": ([], [], (1, 1, 2))},
}  # fmt: skip
#: The slow ones to compile (their scans), run by ``make test-long`` only.
LONG = {"lstm sentiment", "gru lm", "ctmc", "ctmc slinalg", "graph conv", "rnn ctc"}
_HOST_MODE = CPU_MODE.excluding("local_pow_specialize", "local_pow_specialize_device")


def _compile(program, mode=None):
    fs = {}
    for name, (inputs, outputs, updates, *more) in program.functions.items():
        more = dict(more[0] if more else {}, **({} if mode is None else {"mode": mode}))
        fs[name] = aesara.function(inputs, outputs, updates=updates, name=name, **more)
    return fs


def _same(got, expected):
    for g, e in zip(got if isinstance(got, list) else [got], expected if isinstance(expected, list) else [expected]):
        assert_same(g, e, float_ulps=4096)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.long) if n in LONG else n
                                  for n in sorted(PROGRAMS)])  # fmt: skip
def test_unseen_program_stays_on_the_gpu(name):
    with aesara.config.change_flags(floatX="float32"):  # as the originals ran on a GPU
        g, h = PROGRAMS[name](gpu.shared), PROGRAMS[name](aesara.shared)
        fs, refs = _compile(g), _compile(h, _HOST_MODE)
    for fname, f in fs.items():
        reasons, waiting, counts = EXPECTED[name][fname]
        found = gpu.report(f, file=io.StringIO())
        assert [t.reason for t in found] == reasons, [str(t) for t in found]
        assert [type(w.node.op).__name__ for w in gpu.inner_waits(f)] == waiting, gpu.inner_waits(f)
    calls = dict(g.calls)
    for rnd in range(2):
        for fname, args in g.calls:
            if rnd == 0 and EMULATED:
                assert waits_and_copies(fs[fname], *args) == EXPECTED[name][fname][2], fname
                refs[fname](*args)
            _same(fs[fname](*args), refs[fname](*args))
    assert set(calls) == set(EXPECTED[name])
    for p, q in zip(g.params, h.params):
        assert_same(p.get_value(), q.get_value(), float_ulps=4096)


def _shared_named(f, name):
    return [v for v in f.maker.fgraph.inputs if getattr(v, "name", None) == name][0]


def test_bad_indices_raise_as_on_the_host_and_leave_the_shared_variables_as_they_were():
    # rugby: a team out of range, read by the gathers and the scatter-adds of dlogp
    g, h = MODELS["rugby"](gpu.shared), MODELS["rugby"](aesara.shared)
    f, ref = _compile(g)["logp_dlogp"], _compile(h, _HOST_MODE)["logp_dlogp"]
    q = g.calls[0][1][0]
    bad = _shared_named(f, "away_team").get_value()
    bad[4] = 6
    for fn in (f, ref):
        _shared_named(fn, "away_team").set_value(bad)
    with pytest.raises(Exception) as expected:
        ref(q)
    with pytest.raises(expected.type):
        f(q)
    # skip-gram: a negative sample out of range; the embeddings are kept
    with aesara.config.change_flags(floatX="float32"):
        g, h = MODELS["skipgram"](gpu.shared), MODELS["skipgram"](aesara.shared)
        train, ref = _compile(g)["train"], _compile(h, _HOST_MODE)["train"]
    center, context, negs, lr = g.calls[0][1]
    before = [p.get_value() for p in g.params]
    negs = negs.copy()
    negs[1, 1] = -11
    with pytest.raises(Exception) as expected:
        ref(center, context, negs, lr)
    with pytest.raises(expected.type):
        train(center, context, negs, lr)
    for p, b in zip(g.params, before):
        assert_same(p.get_value(), b)
