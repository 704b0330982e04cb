"""Whole programs that must stay on the GPU: an MLP classifier's SGD step, a k-means step, a logistic regression's step.

Issue 29's graphs, built by :func:`mlp_step` and :func:`kmeans_step`, and
issue 39's, built by :func:`logreg_step`, on the
shared variables of a given constructor (``aesara_bincount.gpu.shared`` for
the GPU, ``aesara.shared`` for the host), so that the tests
(``tests/gpu/test_gpu_programs.py``) and the GPU benchmark
(:func:`program_rows`, loaded by ``bench_gpu_loop.py``) compile the same
graphs.

``mlp step``
    An embedding gather ``E[tokens]``, a hidden layer ``tanh(dot(., W1) +
    b1)``, ``softmax(dot(h, W2) + b2)``, the mean categorical cross-entropy
    and one SGD update of every parameter (the gradient of the gather is a
    scatter-add into ``E``).  Sizes ``(V, D, H, C, B)``: vocabulary,
    embedding width, hidden units, classes, batch.
``kmeans step``
    Squared distances by dot products (``|x|^2 - 2 x.c + |c|^2``), the
    nearest center by ``argmin``, the cluster sizes by ``bincount(...,
    minlength=k)``, the sums of the points of each cluster by a scatter-add
    (``inc_subtensor(zeros[a], X)``), and the new centers (an empty cluster
    keeps its center).  Sizes ``(N, D, k)``.
``logreg step``
    The minibatch logistic regression of issue 39, as DQN and Lasagne code
    write it: ``p = softmax(dot(X, W) + b)``, the cost
    ``-mean(log(p)[arange(batch_size), y])`` with the batch size a Python
    int (or ``arange(y.shape[0])``, the deeplearning.net tutorial's form),
    one SGD update of ``W`` and ``b``, and the error rate.  Sizes ``(B, D,
    K)``: batch, features, classes.
"""
import os

import numpy as np

__all__ = ["LOGREG", "MLP", "KMEANS", "kmeans_step", "logreg_step", "mlp_step", "program_rows"]

#: (V, D, H, C, B) and (N, D, k): the benchmark's sizes, then the small ones (tests, --small).
MLP = {"full": (50_000, 64, 256, 10, 4096), "small": (40, 6, 8, 4, 16)}
KMEANS = {"full": (1_000_000, 16, 64), "small": (60, 3, 4)}
#: (B, D, K): an MNIST-sized minibatch, then the small one.
LOGREG = {"full": (4096, 784, 10), "small": (8, 5, 3)}


def mlp_step(shared, sizes, seed=0):
    """The MLP's SGD step: ``(inputs, outputs, updates, params)`` for ``aesara.function``.

    Parameters
    ----------
    shared : callable
        ``aesara.shared`` or ``aesara_bincount.gpu.shared``.
    sizes : tuple of int
        ``(V, D, H, C, B)``.
    seed : int
        The data and the initial parameters (the same for any ``shared``).

    Returns
    -------
    tuple
        ``[lr]`` (a float32 scalar input), ``[loss, predicted classes]``,
        the updates of ``[E, W1, b1, W2, b2]``, and those parameters.
    """
    import aesara
    import aesara.tensor as at
    from aesara.tensor.nnet import categorical_crossentropy

    V, D, H, C, B = sizes
    rng = np.random.default_rng(seed)

    def param(name, *shape):
        return shared((0.5 * rng.standard_normal(shape)).astype("float32"), name=name)

    params = [param("E", V, D), param("W1", D, H), param("b1", H), param("W2", H, C), param("b2", C)]
    E, W1, b1, W2, b2 = params
    tokens = shared(rng.integers(0, V, B).astype("int64"), name="tokens")
    labels = shared(rng.integers(0, C, B).astype("int64"), name="labels")
    lr = at.scalar("lr", dtype="float32")
    hidden = at.tanh(at.dot(E[tokens], W1) + b1)
    scores = at.dot(hidden, W2) + b2
    loss = categorical_crossentropy(at.special.softmax(scores, axis=-1), labels).mean()
    grads = aesara.grad(loss, params)
    updates = {p: p - lr * g for p, g in zip(params, grads)}
    return [lr], [loss, at.argmax(scores, axis=1)], updates, params


def kmeans_step(shared, sizes, seed=0):
    """The k-means step: ``(inputs, outputs, updates, params)`` for ``aesara.function``.

    Parameters
    ----------
    shared : callable
    sizes : tuple of int
        ``(N, D, k)``.
    seed : int

    Returns
    -------
    tuple
        ``[]``, ``[assignments, cluster sizes]``, the update of the centers,
        and ``[centers]``.
    """
    import aesara.tensor as at
    from aesara.tensor.extra_ops import bincount

    N, D, k = sizes
    rng = np.random.default_rng(seed)
    points = rng.standard_normal((N, D))
    X = shared(points, name="X")
    centers = shared(points[:k].copy(), name="centers")
    dist = (X**2).sum(axis=1)[:, None] - 2 * at.dot(X, centers.T) + (centers**2).sum(axis=1)[None, :]
    assign = at.argmin(dist, axis=1)
    counts = bincount(assign, minlength=k)
    sums = at.inc_subtensor(at.zeros_like(centers)[assign], X)
    new = at.switch(counts[:, None] > 0, sums / at.maximum(counts, 1)[:, None], centers)
    return [], [assign, counts], {centers: new}, [centers]


def logreg_step(shared, sizes, seed=0, form="constant"):
    """The logistic regression's SGD step: ``(inputs, outputs, updates, params)`` for ``aesara.function``.

    Parameters
    ----------
    shared : callable
        ``aesara.shared`` or ``aesara_bincount.gpu.shared``.
    sizes : tuple of int
        ``(B, D, K)``.
    seed : int
    form : {"constant", "shape"}
        The rows of the gather: ``arange(B)`` (a host constant) or
        ``arange(y.shape[0])``.

    Returns
    -------
    tuple
        ``[]``, ``[cost, error rate]``, the updates of ``W`` and ``b`` (learning
        rate 0.1), and ``[W, b, y]``.
    """
    import aesara
    import aesara.tensor as at

    B, D, K = sizes
    rng = np.random.default_rng(seed)
    X = shared(rng.standard_normal((B, D)).astype("float32"), name="X")
    y = shared(rng.integers(0, K, B).astype("int64"), name="y")
    W = shared(np.zeros((D, K), "float32"), name="W")
    b = shared(np.zeros(K, "float32"), name="b")
    p = at.special.softmax(at.dot(X, W) + b, axis=-1)
    rows = at.arange(B) if form == "constant" else at.arange(y.shape[0])
    cost = -at.mean(at.log(p)[rows, y])
    errors = at.mean(at.neq(at.argmax(p, axis=1), y))
    gW, gb = aesara.grad(cost, [W, b])
    lr = np.float32(0.1)
    return [], [cost, errors], {W: W - lr * gW, b: b - lr * gb}, [W, b, y]


PROGRAMS = {
    "mlp step": (mlp_step, MLP, (np.float32(0.05),)),
    "kmeans step": (kmeans_step, KMEANS, ()),
    "logreg step": (logreg_step, LOGREG, ()),
}


def program_rows(cp, small, repeat, wall_ms, transfers):
    """Rows of the GPU benchmark: each program compiled on GPU shared variables and on the host.

    ``aesara_ms`` is the GPU function, ``cpu_ms`` the same graph on
    ``aesara.shared`` (host) variables, both timed by ``wall_ms`` (one call
    and a synchronization of the device); ``transfers`` counts the GPU
    function's transfer nodes (0 is the target); ``correct``: after one step
    from the same start, the GPU parameters equal the host's to 1e-4
    (float32) relative.
    """
    import aesara

    from aesara_bincount import gpu

    sync = cp.cuda.get_current_stream().synchronize
    rows = []
    for name, (build, sizes, args) in PROGRAMS.items():
        chosen = sizes["small" if small else "full"]
        g_in, g_out, g_upd, g_params = build(gpu.shared, chosen)
        h_in, h_out, h_upd, h_params = build(aesara.shared, chosen)
        # the results stay on the GPU: no transfer at all (as the seed row's)
        f = aesara.function(g_in, [gpu.gpu_from_host(o) for o in g_out], updates=g_upd)
        ref = aesara.function(h_in, h_out, updates=h_upd)
        row = {"row": name, "N": chosen[-1] if name == "mlp step" else chosen[0]}
        row["load"] = f"{os.getloadavg()[0]:.1f}"
        row["transfers"] = transfers(f)
        f(*args)
        ref(*args)
        row["correct"] = all(
            np.allclose(g.get_value(), h.get_value(), rtol=1e-4, atol=1e-4) for g, h in zip(g_params, h_params)
        )
        row["aesara_ms"] = wall_ms(sync, lambda: f(*args), repeat)
        row["cpu_ms"] = wall_ms(lambda: None, lambda: ref(*args), max(1, repeat // 4))
        rows.append(row)
    return rows
