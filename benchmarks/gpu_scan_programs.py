"""Programs that loop with ``scan`` and must stay on the GPU (issue 39): Elman RNN, LSTM, CTC, foldl metric.

Built by :func:`elman_step`, :func:`lstm_step`, :func:`ctc_step` and :func:`foldl_metric` on
the shared variables of a given constructor (``aesara_bincount.gpu.shared``
for the GPU, ``aesara.shared`` for the host), so that the tests
(``tests/gpu/test_gpu_scan.py``) and the GPU benchmark
(:func:`scan_program_rows`, loaded by ``bench_gpu_loop.py``) compile the
same graphs.  Each is written as the public programs of issue 39 write it
(the states start from ``zeros``, the loop from ``aesara.scan``).

``rnn step``
    An Elman RNN tagger over a minibatch, trained with scan: ``h_t =
    sigmoid(dot(x_t, Wx) + dot(h_{t-1}, Wh) + bh)``, ``p_t = softmax(dot(h_t,
    W) + b)``, the mean categorical cross-entropy against one-hot targets,
    and one SGD update of every weight through the gradient of the loop (a
    second scan, backwards in time).  Sizes ``(T, B, D, H, C)``: steps,
    batch, input width, hidden units, classes.
``lstm step``
    The LSTM of the deeplearning.net sentiment tutorial: four gates from one
    product ``dot(h, U) + x_t`` cut into slices, a mask over time, the mean
    of the hidden states, a softmax classifier, one SGD update.  Sizes
    ``(T, B, D, H, C)`` (``x_t`` is already ``dot(emb, W) + b``, width ``4H``;
    ``D`` is unused).
``ctc step``
    The CTC loss of one labelling (Graves et al., 2006, the forward
    variables in log space), trained with scan: the labels with blanks
    between them, the log-softmax of the logits, and at each step a
    log-sum-exp of the forward variables shifted by 0, 1 and 2 places plus
    the log-probabilities gathered by the extended labels (a gather inside
    the loop, its indices checked with the call's status); one SGD update of
    the logits.  Sizes ``(T, C, S)``: steps, classes (0 the blank), labels.
``foldl metric``
    A few-shot metric folded over episodes (``aesara.foldl``): per episode,
    the class prototypes are the means of the support rows, each query takes
    the nearest prototype, and the accuracy is added up.  Sizes ``(E, N, K,
    Q, D)``: episodes, classes, shots, queries, width.
"""
import os

import numpy as np

__all__ = ["CTC", "ELMAN", "FOLDL", "LSTM", "SCAN_PROGRAMS", "ctc_step", "elman_step", "foldl_metric",
           "lstm_step", "scan_program_rows"]  # fmt: skip

#: The benchmark's sizes, then the tests' and the dry run's (tiny: the emulation runs the kernels on the CPU).
ELMAN = {"full": (50, 64, 128, 256, 32), "small": (3, 2, 3, 4, 3)}
CTC = {"full": (200, 64, 40), "small": (5, 4, 3)}
LSTM = {"full": (50, 64, 0, 128, 2), "small": (3, 2, 0, 3, 2)}
FOLDL = {"full": (100, 5, 5, 15, 64), "small": (3, 2, 2, 3, 2)}


def _params(shared, rng, shapes):
    return [shared((0.5 * rng.standard_normal(s)).astype("float32"), name=n) for n, s in shapes]


def _one_hot(rng, shape, classes):
    return np.eye(classes, dtype="float32")[rng.integers(0, classes, shape)]


def elman_step(shared, sizes, seed=0):
    """The Elman RNN's SGD step: ``(inputs, outputs, updates, params)`` for ``aesara.function``.

    Parameters
    ----------
    shared : callable
        ``aesara.shared`` or ``aesara_bincount.gpu.shared``.
    sizes : tuple of int
        ``(T, B, D, H, C)``.
    seed : int
        The data and the initial weights (the same for any ``shared``).

    Returns
    -------
    tuple
        ``[lr]`` (a float32 scalar input), ``[loss]``, the updates of the
        weights, and the weights ``[Wx, Wh, bh, W, b]``.
    """
    import aesara
    import aesara.tensor as at
    from aesara.tensor.nnet import categorical_crossentropy

    T, B, D, H, C = sizes
    rng = np.random.default_rng(seed)
    params = _params(shared, rng, [("Wx", (D, H)), ("Wh", (H, H)), ("bh", (H,)), ("W", (H, C)), ("b", (C,))])
    Wx, Wh, bh, W, b = params
    X = shared(rng.standard_normal((T, B, D)).astype("float32"), name="X")
    Y = shared(_one_hot(rng, (T, B), C), name="Y")
    lr = at.scalar("lr", dtype="float32")

    def recurrence(x_t, h_tm1):
        h_t = at.sigmoid(at.dot(x_t, Wx) + at.dot(h_tm1, Wh) + bh)
        return h_t, at.special.softmax(at.dot(h_t, W) + b, axis=-1)

    h0 = at.zeros((B, H), dtype="float32")
    (_, p), _ = aesara.scan(recurrence, sequences=X, outputs_info=[h0, None])
    loss = categorical_crossentropy(p.reshape((T * B, C)), Y.reshape((T * B, C))).mean()
    grads = aesara.grad(loss, params)
    return [lr], [loss], {q: q - lr * g for q, g in zip(params, grads)}, params


def lstm_step(shared, sizes, seed=0):
    """The LSTM's SGD step: ``(inputs, outputs, updates, params)``, as :func:`elman_step`.

    Parameters
    ----------
    shared : callable
    sizes : tuple of int
        ``(T, B, D, H, C)`` (``D`` unused).
    seed : int

    Returns
    -------
    tuple
        ``[lr]``, ``[loss]``, the updates of ``[U, Wc, bc]``, and those weights.
    """
    import aesara
    import aesara.tensor as at
    from aesara.tensor.nnet import categorical_crossentropy

    T, B, _, H, C = sizes
    rng = np.random.default_rng(seed)
    params = _params(shared, rng, [("U", (H, 4 * H)), ("Wc", (H, C)), ("bc", (C,))])
    U, Wc, bc = params
    X = shared(rng.standard_normal((T, B, 4 * H)).astype("float32"), name="X")
    mask = shared((rng.random((T, B)) < 0.8).astype("float32"), name="mask")
    Y = shared(_one_hot(rng, (B,), C), name="Y")
    lr = at.scalar("lr", dtype="float32")

    def _slice(v, k):
        return v[:, k * H : (k + 1) * H]

    def step(m_t, x_t, h_tm1, c_tm1):
        preact = at.dot(h_tm1, U) + x_t
        i, f, o = (at.sigmoid(_slice(preact, k)) for k in range(3))
        c = f * c_tm1 + i * at.tanh(_slice(preact, 3))
        c = m_t[:, None] * c + (1.0 - m_t)[:, None] * c_tm1
        h = o * at.tanh(c)
        h = m_t[:, None] * h + (1.0 - m_t)[:, None] * h_tm1
        return h, c

    zeros = at.alloc(np.float32(0.0), B, H)
    (h, _), _ = aesara.scan(step, sequences=[mask, X], outputs_info=[zeros, zeros])
    proj = (h * mask[:, :, None]).sum(axis=0) / mask.sum(axis=0)[:, None]
    pred = at.special.softmax(at.dot(proj, Wc) + bc, axis=-1)
    loss = categorical_crossentropy(pred, Y).mean()
    grads = aesara.grad(loss, params)
    return [lr], [loss], {q: q - lr * g for q, g in zip(params, grads)}, params


def ctc_step(shared, sizes, seed=0):
    """The CTC step: ``(inputs, outputs, updates, params)``, as :func:`elman_step`.

    Parameters
    ----------
    shared : callable
    sizes : tuple of int
        ``(T, C, S)``.
    seed : int

    Returns
    -------
    tuple
        ``[lr]``, ``[loss]``, the update of the logits, and ``[logits]``.
    """
    import aesara
    import aesara.tensor as at

    T, C, S = sizes
    rng = np.random.default_rng(seed)
    logits = shared(rng.standard_normal((T, C)).astype("float32"), name="logits")
    labels = shared(rng.integers(1, C, S).astype("int64"), name="labels")
    lr = at.scalar("lr", dtype="float32")
    never = np.float32(-1e30)  # log(0), finite so that the gradient stays finite
    blanks = at.zeros_like(labels)
    ext = at.concatenate([blanks[:1], at.stack([labels, blanks], axis=1).reshape((-1,))])
    logp = at.special.log_softmax(logits, axis=-1)
    alpha0 = at.concatenate([logp[0, ext[:2]], at.fill(ext[2:], never).astype("float32")])

    def shifted(a, k):
        return at.concatenate([at.fill(a[:k], never), a[:-k]])

    def step(lp_t, a):
        a1, a2 = shifted(a, 1), shifted(a, 2)
        m = at.maximum(at.maximum(a, a1), a2)
        return m + at.log(at.exp(a - m) + at.exp(a1 - m) + at.exp(a2 - m)) + lp_t[ext]

    alphas, _ = aesara.scan(step, sequences=logp[1:], outputs_info=alpha0)
    end = alphas[-1][-2:]
    m = end.max()
    loss = -(m + at.log(at.exp(end - m).sum()))
    return [lr], [loss], {logits: logits - lr * aesara.grad(loss, logits)}, [logits]


def foldl_metric(shared, sizes, seed=0):
    """The few-shot accuracy folded over episodes: ``(inputs, outputs, updates, params)``.

    Parameters
    ----------
    shared : callable
    sizes : tuple of int
        ``(E, N, K, Q, D)``.
    seed : int

    Returns
    -------
    tuple
        ``[]``, ``[accuracy summed over the episodes]``, no updates, no weights.
    """
    import aesara
    import aesara.tensor as at

    E, N, K, Q, D = sizes
    rng = np.random.default_rng(seed)
    support = shared(rng.standard_normal((E, N * K, D)).astype("float32"), name="support")
    queries = shared(rng.standard_normal((E, Q, D)).astype("float32"), name="queries")
    labels = shared(rng.integers(0, N, (E, Q)).astype("int64"), name="labels")

    def episode(s, q, y, total):
        protos = s.reshape((N, K, D)).mean(axis=1)
        dist = (q**2).sum(axis=1)[:, None] - 2 * at.dot(q, protos.T) + (protos**2).sum(axis=1)[None, :]
        return total + at.eq(at.argmin(dist, axis=1), y).mean(dtype="float32")

    zero = at.constant(np.float32(0))
    total = aesara.foldl(episode, sequences=[support, queries, labels], outputs_info=zero)[0]
    return [], [total], {}, []


#: name -> (builder, sizes, call arguments).
SCAN_PROGRAMS = {
    "rnn step": (elman_step, ELMAN, (np.float32(0.1),)),
    "lstm step": (lstm_step, LSTM, (np.float32(0.1),)),
    "ctc step": (ctc_step, CTC, (np.float32(0.1),)),
    "foldl metric": (foldl_metric, FOLDL, ()),
}


def _loop_transfers(fgraph):
    """The transfer nodes of the inner graphs of the loops of ``fgraph`` (and of their loops)."""
    from aesara.scan.op import Scan

    count = 0
    for node in fgraph.apply_nodes:
        if isinstance(node.op, Scan):
            inner = node.op.fn.maker.fgraph
            names = [type(n.op).__name__ for n in inner.apply_nodes]
            count += names.count("HostFromGpu") + names.count("GpuFromHost") + _loop_transfers(inner)
    return count


def scan_program_rows(cp, small, repeat, wall_ms, transfers, names=("rnn step",)):
    """Rows of the GPU benchmark, as ``gpu_programs.program_rows``: the GPU function
    (``aesara_ms``, its results kept on the GPU) against the same graph on host
    shared variables (``cpu_ms``); ``transfers``: the GPU function's transfer
    nodes, its loops' inner graphs included (0 is the target); ``correct``:
    after one step the GPU weights equal the host's to 1e-3 relative."""
    import aesara

    from aesara_bincount import gpu

    sync = cp.cuda.get_current_stream().synchronize
    rows = []
    for name in names:
        build, sizes, args = SCAN_PROGRAMS[name]
        chosen = sizes["small" if small else "full"]
        g_in, g_out, g_upd, g_params = build(gpu.shared, chosen)
        h_in, h_out, h_upd, h_params = build(aesara.shared, chosen)
        f = aesara.function(g_in, [gpu.gpu_from_host(o) for o in g_out], updates=g_upd)
        ref = aesara.function(h_in, h_out, updates=h_upd)
        row = {"row": name, "N": chosen[0], "load": f"{os.getloadavg()[0]:.1f}"}
        row["transfers"] = transfers(f) + _loop_transfers(f.maker.fgraph)
        f(*args)
        ref(*args)
        row["correct"] = all(
            np.allclose(g.get_value(), h.get_value(), rtol=1e-3, atol=1e-4)
            for g, h in zip(g_params, h_params)
        )
        row["aesara_ms"] = wall_ms(sync, lambda: f(*args), repeat)
        row["cpu_ms"] = wall_ms(lambda: None, lambda: ref(*args), max(1, repeat // 4))
        rows.append(row)
    return rows
