"""Public programs that loop with ``scan``, ported to Aesara as a new user would port them (issue 39).

The arrays the originals keep in ``theano.shared`` live in the shared
variables of a given constructor (``aesara_bincount.gpu.shared``, or
``aesara.shared`` for the same graph on the CPU); the data the originals
pass on each call stay function inputs (NumPy arrays); everything else is
written as the originals write it (our own code, after their published
structure, at tiny sizes):

- :func:`lstm_sentiment`: the deeplearning.net LSTM sentiment tutorial
  (``lstm.py``): an embedding of word ids, the LSTM layer in a ``scan`` with
  its mask, mean pooling, dropout through ``MRG_RandomStream`` behind a
  ``switch`` on a shared flag, a softmax classifier, the cost
  ``-log(pred[arange(n), y] + 1e-8).mean()``, and Adadelta in two functions;
- :func:`rnn_ctc`: an RNN trained with CTC, as the Theano CTC of Pezeshki's
  ``CTC-Connectionist-Temporal-Classification`` writes it (the labelling
  gathered as ``y_hat[:, y, arange(B)]``, the recurrence as ``eye``
  matrices, the forward variables in a ``scan``);
- :func:`graph_conv`: a neural graph fingerprint (Duvenaud et al., 2015):
  each layer in a ``scan`` sums each atom's neighbours with a gather and a
  scatter-add over the bond list, and adds a softmax of each atom to its
  molecule's fingerprint (a scatter-add by molecule index);
- :func:`ctmc`: a continuous-time Markov model's likelihood: the generator
  ``Q`` set from rates at (row, column) indices, ``expm(Q t)`` by a Taylor
  series and repeated squaring in two ``scan`` loops, the transitions
  gathered by (interval, from, to) state indices; ``expm="slinalg"`` uses
  ``aesara.tensor.slinalg.expm`` instead;
- :func:`gru_lm`: the GRU language model of Britz's ``rnn-tutorial-gru-lstm``
  (``gru_theano.py``): a column of the embedding per word, two GRU layers
  with ``hard_sigmoid`` gates in a ``scan``, a softmax over the vocabulary,
  ``categorical_crossentropy`` with integer targets, and RMSProp.

Each returns a :class:`Program`.
"""
import collections

import numpy as np

import aesara
import aesara.tensor as at
from aesara.sandbox.rng_mrg import MRG_RandomStream
from aesara.tensor.nnet import categorical_crossentropy, hard_sigmoid, softmax

__all__ = ["LOOPS", "Program", "ctmc", "graph_conv", "gru_lm", "lstm_sentiment", "rnn_ctc"]

#: A ported program: ``functions`` maps a name to ``(inputs, outputs, updates)``
#: for ``aesara.function`` (and a dict of its other arguments: ``givens``...), ``calls`` lists ``(name, args)`` in the order the
#: original calls them, ``params`` the shared variables a step changes.
Program = collections.namedtuple("Program", "functions calls params")


def _floats(rng, *shape, scale=0.3):
    return (scale * rng.standard_normal(shape)).astype("float32")


def lstm_sentiment(shared, seed=3, T=4, B=3, vocab=12, dim=4, classes=2):
    rng = np.random.default_rng(seed)

    def ortho(n):
        u, _, _ = np.linalg.svd(rng.standard_normal((n, n)))
        return u.astype("float32")

    tparams = collections.OrderedDict()
    tparams["Wemb"] = shared((0.01 * rng.random((vocab, dim))).astype("float32"), name="Wemb")
    tparams["lstm_W"] = shared(np.concatenate([ortho(dim) for _ in range(4)], axis=1), name="lstm_W")
    tparams["lstm_U"] = shared(np.concatenate([ortho(dim) for _ in range(4)], axis=1), name="lstm_U")
    tparams["lstm_b"] = shared(np.zeros(4 * dim, "float32"), name="lstm_b")
    tparams["U"] = shared(_floats(rng, dim, classes, scale=0.01), name="U")
    tparams["b"] = shared(np.zeros(classes, "float32"), name="b")
    trng = MRG_RandomStream(123)
    use_noise = shared(np.float32(0.0), name="use_noise")

    x = at.matrix("x", dtype="int64")
    mask = at.matrix("mask", dtype="float32")
    y = at.vector("y", dtype="int64")
    n_timesteps, n_samples = x.shape[0], x.shape[1]
    emb = tparams["Wemb"][x.flatten()].reshape([n_timesteps, n_samples, dim])

    def _slice(_x, n):
        return _x[:, n * dim : (n + 1) * dim]

    def _step(m_, x_, h_, c_):
        preact = at.dot(h_, tparams["lstm_U"])
        preact += x_
        i = at.sigmoid(_slice(preact, 0))
        f = at.sigmoid(_slice(preact, 1))
        o = at.sigmoid(_slice(preact, 2))
        c = at.tanh(_slice(preact, 3))
        c = f * c_ + i * c
        c = m_[:, None] * c + (1.0 - m_)[:, None] * c_
        h = o * at.tanh(c)
        h = m_[:, None] * h + (1.0 - m_)[:, None] * h_
        return h, c

    state_below = at.dot(emb, tparams["lstm_W"]) + tparams["lstm_b"]
    zeros = at.alloc(np.float32(0.0), n_samples, dim)
    rval, _ = aesara.scan(_step, sequences=[mask, state_below], outputs_info=[zeros, zeros],
                          n_steps=n_timesteps)  # fmt: skip
    proj = (rval[0] * mask[:, :, None]).sum(axis=0)
    proj = proj / mask.sum(axis=0)[:, None]
    proj = at.switch(use_noise, proj * trng.binomial(proj.shape, p=0.5, n=1, dtype=proj.dtype), proj * 0.5)
    pred = softmax(at.dot(proj, tparams["U"]) + tparams["b"])
    cost = -at.log(pred[at.arange(n_samples), y] + 1e-8).mean()
    grads = aesara.grad(cost, wrt=list(tparams.values()))

    # Adadelta, as lstm.py writes it: one function stores the gradients, another applies them
    lr = at.scalar(name="lr", dtype="float32")
    zipped = [shared(p.get_value() * np.float32(0.0), name=f"{k}_grad") for k, p in tparams.items()]
    up2 = [shared(p.get_value() * np.float32(0.0), name=f"{k}_rup2") for k, p in tparams.items()]
    grads2 = [shared(p.get_value() * np.float32(0.0), name=f"{k}_rgrad2") for k, p in tparams.items()]
    zgup = [(zg, g) for zg, g in zip(zipped, grads)]
    rg2up = [(rg2, 0.95 * rg2 + 0.05 * (g**2)) for rg2, g in zip(grads2, grads)]
    updir = [-at.sqrt(ru2 + 1e-6) / at.sqrt(rg2 + 1e-6) * zg for zg, ru2, rg2 in zip(zipped, up2, grads2)]
    ru2up = [(ru2, 0.95 * ru2 + 0.05 * (ud**2)) for ru2, ud in zip(up2, updir)]
    param_up = [(p, p + ud) for p, ud in zip(tparams.values(), updir)]
    use_noise.set_value(np.float32(1.0))

    x0 = rng.integers(0, vocab, (T, B)).astype("int64")
    mask0 = np.ones((T, B), "float32")
    mask0[T - 1 :, 0] = 0  # a shorter sentence
    y0 = rng.integers(0, classes, B).astype("int64")
    functions = {
        "f_grad_shared": ([x, mask, y], cost, zgup + rg2up),
        "f_update": ([lr], [], ru2up + param_up, {"on_unused_input": "ignore"}),
        "f_pred": ([x, mask], pred.argmax(axis=1), []),
    }
    calls = [("f_grad_shared", (x0, mask0, y0)), ("f_update", (np.float32(0.0001),)), ("f_pred", (x0, mask0))]
    return Program(functions, calls, list(tparams.values()) + zipped + up2 + grads2)


def rnn_ctc(shared, seed=4, T=5, B=2, D=3, H=4, C=3, L=5):
    rng = np.random.default_rng(seed)
    W_in, W_h = shared(_floats(rng, D, H), name="W_in"), shared(_floats(rng, H, H), name="W_h")
    b_h, W_out = shared(np.zeros(H, "float32"), name="b_h"), shared(_floats(rng, H, C), name="W_out")
    b_out = shared(np.zeros(C, "float32"), name="b_out")
    params = [W_in, W_h, b_h, W_out, b_out]
    X = at.tensor3("X", dtype="float32")  # (T, B, D)
    X_mask = at.matrix("X_mask", dtype="float32")  # (T, B)
    y = at.matrix("y", dtype="int64")  # (L, B): the labels with blanks between them
    y_mask = at.matrix("y_mask", dtype="float32")  # (L, B)
    blank_symbol = 0

    def rnn_step(x_t, h_tm1):
        h_t = at.tanh(at.dot(x_t, W_in) + at.dot(h_tm1, W_h) + b_h)
        return h_t, softmax(at.dot(h_t, W_out) + b_out)

    (_, probs), _ = aesara.scan(rnn_step, sequences=X, outputs_info=[at.zeros((X.shape[1], H)), None])
    y_hat = probs.dimshuffle(0, 2, 1)  # (T, C, B)

    def class_batch_to_labeling_batch(y, y_hat, y_hat_mask):
        y_hat = y_hat * y_hat_mask.dimshuffle(0, "x", 1)
        batch_size = y_hat.shape[2]
        return y_hat[:, y.astype("int32"), at.arange(batch_size)]  # (T, L, B)

    def recurrence_relation(y, y_mask):
        n_y = y.shape[0]
        blanks = at.zeros((2, y.shape[1]), dtype="int64") + blank_symbol
        ybb = at.concatenate((y, blanks), axis=0).T
        sec_diag = at.neq(ybb[:, :-2], ybb[:, 2:]) * at.eq(ybb[:, 1:-1], blank_symbol) * y_mask.T
        r2 = at.eye(n_y, k=1)
        r3 = at.eye(n_y, k=2).dimshuffle(0, 1, "x") * sec_diag.dimshuffle(1, "x", 0)
        return r2, r3

    pred_y = class_batch_to_labeling_batch(y, y_hat, X_mask)
    r2, r3 = recurrence_relation(y, y_mask)

    def step(p_curr, p_prev):
        dotproduct = p_prev + at.dot(p_prev, r2) + (p_prev.dimshuffle(1, "x", 0) * r3).sum(axis=0).T
        return p_curr.T * dotproduct * y_mask.T  # (B, L)

    probabilities, _ = aesara.scan(step, sequences=[pred_y[1:]],
                                   outputs_info=[at.eye(y.shape[0])[0] * pred_y[0].T])  # fmt: skip
    y_len = y_mask.sum(axis=0).astype("int32")
    batch = at.arange(probabilities.shape[1])
    labels_probab = probabilities[-1, batch, y_len - 1] + probabilities[-1, batch, y_len - 2]
    cost = -at.log(labels_probab).mean()
    lr = at.scalar("lr", dtype="float32")
    updates = [(p, p - lr * g) for p, g in zip(params, aesara.grad(cost, params))]

    labels = rng.integers(1, C, (L // 2, B))
    y0 = np.zeros((L, B), "int64")
    y0[1::2] = labels
    y_mask0 = np.ones((L, B), "float32")
    y_mask0[L - 2 :, 1] = 0  # a shorter labelling
    X0 = rng.standard_normal((T, B, D)).astype("float32")
    args = (X0, np.ones((T, B), "float32"), y0, y_mask0, np.float32(0.05))
    functions = {"train": ([X, X_mask, y, y_mask, lr], cost, updates)}
    return Program(functions, [("train", args)], params)


def graph_conv(shared, seed=5, atoms=7, features=3, width=4, fp_len=5, layers=2, molecules=2):
    rng = np.random.default_rng(seed)
    W_self = shared(_floats(rng, layers, width, width), name="W_self")
    W_nb = shared(_floats(rng, layers, width, width), name="W_nb")
    W_fp = shared(_floats(rng, layers, width, fp_len), name="W_fp")
    W_in = shared(_floats(rng, features, width), name="W_in")
    w_out = shared(_floats(rng, fp_len), name="w_out")
    params = [W_in, W_self, W_nb, W_fp, w_out]
    # the data: atom features, a bond list (both directions), each atom's molecule, the targets
    bonds = np.array([[0, 1], [1, 2], [2, 3], [1, 3], [4, 5], [5, 6]])
    atom_features = shared(rng.standard_normal((atoms, features)).astype("float32"), name="atom_features")
    src = shared(np.concatenate([bonds[:, 0], bonds[:, 1]]).astype("int32"), name="src")
    dst = shared(np.concatenate([bonds[:, 1], bonds[:, 0]]).astype("int32"), name="dst")
    molecule = shared(np.array([0, 0, 0, 0, 1, 1, 1], "int32"), name="molecule")
    targets = shared(rng.standard_normal(molecules).astype("float32"), name="targets")

    def layer(W_s, W_n, W_f, h, fp):
        neighbours = at.inc_subtensor(at.zeros_like(h)[dst], h[src])  # each atom's neighbours summed
        h_new = at.maximum(at.dot(h, W_s) + at.dot(neighbours, W_n), 0)
        fp_new = at.inc_subtensor(fp[molecule], softmax(at.dot(h_new, W_f)))
        return h_new, fp_new

    h0 = at.tanh(at.dot(atom_features, W_in))
    fp0 = at.zeros((molecules, fp_len), dtype="float32")
    (_, fps), _ = aesara.scan(layer, sequences=[W_self, W_nb, W_fp], outputs_info=[h0, fp0])
    prediction = at.dot(fps[-1], w_out)
    loss = at.mean((prediction - targets) ** 2)
    lr = at.scalar("lr", dtype="float32")
    updates = [(p, p - lr * g) for p, g in zip(params, aesara.grad(loss, params))]
    functions = {"train": ([lr], [loss, prediction], updates)}
    return Program(functions, [("train", (np.float32(0.05),))], params)


def ctmc(shared, seed=6, states=3, observations=9, terms=6, squarings=3, expm="scan"):
    rng = np.random.default_rng(seed)
    rows, cols = np.nonzero(1 - np.eye(states))
    log_rates = shared(rng.standard_normal(len(rows)).astype("float64") - 1, name="log_rates")
    dts = shared(np.array([0.5, 1.0, 2.0]), name="dts")
    # the observed transitions: (interval index, from state, to state)
    interval = shared(rng.integers(0, 3, observations).astype("int64"), name="interval")
    s_from = shared(rng.integers(0, states, observations).astype("int64"), name="s_from")
    s_to = shared(rng.integers(0, states, observations).astype("int64"), name="s_to")
    Q = at.zeros((states, states), dtype="float64")
    Q = at.set_subtensor(Q[rows, cols], at.exp(log_rates))
    Q = Q - at.diag(Q.sum(axis=1))

    def expm_scan(A):
        # exp(A) = (exp(A / 2**s))**(2**s), exp(A / 2**s) by its Taylor series
        A = A / 2.0**squarings
        k = at.arange(1, terms + 1, dtype="float64")

        def term(k, prev, total):
            nxt = at.dot(prev, A) / k
            return nxt, total + nxt

        eye = at.eye(states, dtype="float64")
        (_, totals), _ = aesara.scan(term, sequences=k, outputs_info=[eye, eye])
        square, _ = aesara.scan(lambda P: at.dot(P, P), outputs_info=totals[-1], n_steps=squarings)
        return square[-1]

    if expm == "scan":
        P, _ = aesara.scan(lambda dt: expm_scan(Q * dt), sequences=dts)
    else:
        from aesara.tensor.slinalg import expm as slinalg_expm

        P, _ = aesara.scan(lambda dt: slinalg_expm(Q * dt), sequences=dts)
    loglik = at.log(P[interval, s_from, s_to]).sum()
    lr = at.scalar("lr", dtype="float64")
    g = aesara.grad(loglik, log_rates)
    functions = {"fit": ([lr], [loglik, g], [(log_rates, log_rates + lr * g)])}
    return Program(functions, [("fit", (np.float64(0.05),))], [log_rates])


def gru_lm(shared, seed=7, vocab=8, hidden=4, words=5, bptt_truncate=-1):
    rng = np.random.default_rng(seed)
    E = shared(_floats(rng, hidden, vocab), name="E")
    U = shared(_floats(rng, 6, hidden, hidden), name="U")
    W = shared(_floats(rng, 6, hidden, hidden), name="W")
    V = shared(_floats(rng, vocab, hidden), name="V")
    b = shared(np.zeros((6, hidden), "float32"), name="b")
    c = shared(np.zeros(vocab, "float32"), name="c")
    params = [E, U, W, V, b, c]
    caches = [shared(np.zeros(p.get_value().shape, "float32"), name="m" + p.name) for p in params]
    x = at.ivector("x")
    y = at.ivector("y")

    def forward_prop_step(x_t, s_t1_prev, s_t2_prev):
        x_e = E[:, x_t]
        z_t1 = hard_sigmoid(U[0].dot(x_e) + W[0].dot(s_t1_prev) + b[0])
        r_t1 = hard_sigmoid(U[1].dot(x_e) + W[1].dot(s_t1_prev) + b[1])
        c_t1 = at.tanh(U[2].dot(x_e) + W[2].dot(s_t1_prev * r_t1) + b[2])
        s_t1 = (at.ones_like(z_t1) - z_t1) * c_t1 + z_t1 * s_t1_prev
        z_t2 = hard_sigmoid(U[3].dot(s_t1) + W[3].dot(s_t2_prev) + b[3])
        r_t2 = hard_sigmoid(U[4].dot(s_t1) + W[4].dot(s_t2_prev) + b[4])
        c_t2 = at.tanh(U[5].dot(s_t1) + W[5].dot(s_t2_prev * r_t2) + b[5])
        s_t2 = (at.ones_like(z_t2) - z_t2) * c_t2 + z_t2 * s_t2_prev
        o_t = softmax(V.dot(s_t2) + c)  # Theano's softmax of a vector was a row: [0] there
        return [o_t, s_t1, s_t2]

    [o, _, _], _ = aesara.scan(forward_prop_step, sequences=x, truncate_gradient=bptt_truncate,
                               outputs_info=[None, dict(initial=at.zeros(hidden)),
                                             dict(initial=at.zeros(hidden))])  # fmt: skip
    prediction = at.argmax(o, axis=1)
    cost = at.sum(categorical_crossentropy(o, y))
    grads = aesara.grad(cost, params)
    learning_rate = at.scalar("learning_rate")
    decay = at.scalar("decay")
    updates = []
    for p, m, g in zip(params, caches, grads):  # RMSProp, as gru_theano.py writes it
        m_new = decay * m + (1 - decay) * g**2
        updates += [(p, p - learning_rate * g / at.sqrt(m_new + 1e-6)), (m, m_new)]
    x0 = rng.integers(0, vocab, words).astype("int32")
    y0 = np.roll(x0, -1)
    functions = {
        "sgd_step": ([x, y, learning_rate, aesara.In(decay, value=np.float32(0.9))], [], updates),
        "predict": ([x], prediction, []),
        "ce_error": ([x, y], cost, []),
    }
    calls = [("sgd_step", (x0, y0, np.float32(0.005))), ("ce_error", (x0, y0)), ("predict", (x0,))]
    return Program(functions, calls, params + caches)


LOOPS = {"lstm sentiment": lstm_sentiment, "rnn ctc": rnn_ctc, "graph conv": graph_conv, "ctmc": ctmc,
         "gru lm": gru_lm}  # fmt: skip
