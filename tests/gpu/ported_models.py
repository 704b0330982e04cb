"""Public models without loops, ported to Aesara as a new user would port them (issue 39).

As in :mod:`ported_loops`: arrays in the shared variables of a given
constructor, per-call data as function inputs, the rest as the originals
write it (our own code, after their published structure, at tiny sizes):

- :func:`rugby`: PyMC3's rugby example (two team indices): the logp and its
  gradient of the free variables joined in one host vector ``q``, as
  PyMC3's sampler calls them, with ``HalfStudentT`` scales on a log
  transform, ``Normal`` team effects centred by their means, and ``Poisson``
  goals whose rates gather the effects by the home and away team indices;
  each logp term under PyMC3's ``bound`` (a ``switch``);
- :func:`skipgram`: word2vec's skip-gram with negative sampling: the rows of
  the centre words, their contexts and the sampled negatives gathered by
  index arrays passed on each call, ``log(sigmoid)`` scores, and SGD on the
  full embedding matrices (a scatter-add of rows);
- :func:`denoising_autoencoder`: the deeplearning.net ``dA.py``: a binomial
  corruption from ``RandomStream``, tied weights, the cross-entropy of the
  reconstruction, a minibatch taken from the shared data set by ``givens``;
- :func:`kmeans`: one Lloyd step: the squared distances, ``argmin``, the new
  centres from a scatter-add of the points and a ``bincount`` of the
  assignments, and the inertia;
- :func:`lasagne_mlp`: Lasagne's ``mnist.py`` MLP: dense layers with
  rectifiers, ``DropoutLayer`` (``MRG_RandomStream``), a softmax output,
  ``categorical_crossentropy`` with integer targets, the accuracy, and
  ``lasagne.updates.adam`` written out.

Each returns a :class:`ported_loops.Program`.
"""
import os
import sys

import numpy as np

import aesara
import aesara.tensor as at
from aesara.sandbox.rng_mrg import MRG_RandomStream
from aesara.tensor.extra_ops import bincount
from aesara.tensor.math import gammaln
from aesara.tensor.nnet import categorical_crossentropy, softmax
from aesara.tensor.random.utils import RandomStream

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ported_loops import Program, _floats  # noqa: E402

__all__ = ["MODELS", "denoising_autoencoder", "kmeans", "lasagne_mlp", "rugby", "skipgram"]


def _bound(logp, *conditions):  # PyMC3 3.x: switch(all conditions, logp, -inf), elementwise
    alltrue = 1
    for c in conditions:
        alltrue = alltrue * (1 * c)
    return at.switch(alltrue, logp, -np.inf)


def _normal_logp(value, mu, sigma):
    tau = sigma**-2.0
    return _bound((-tau * (value - mu) ** 2 + at.log(tau / np.pi / 2.0)) / 2.0, sigma > 0)


def _half_student_t_logp(value, nu, sigma):
    return _bound(
        at.log(2.0) + gammaln((nu + 1.0) / 2.0) - gammaln(nu / 2.0) - 0.5 * at.log(nu * np.pi * sigma**2)
        - 0.5 * (nu + 1.0) * at.log1p(value**2 / (nu * sigma**2)),
        sigma > 0, nu > 0, value >= 0,
    )  # fmt: skip


def _poisson_logp(value, mu):
    logpow = at.switch(at.eq(mu, 0), at.switch(at.eq(value, 0), 0.0, -np.inf), value * at.log(mu))
    return _bound(logpow - gammaln(value + 1) - mu, mu >= 0, value >= 0)


def rugby(shared, seed=8, teams=6, games=10):
    rng = np.random.default_rng(seed)
    home_team = shared(rng.integers(0, teams, games).astype("int64"), name="home_team")
    away_team = shared(((home_team.get_value() + 1 + rng.integers(0, teams - 1, games)) % teams), name="away_team")
    home_goals = shared(rng.poisson(2.0, games).astype("int64"), name="home_goals")
    away_goals = shared(rng.poisson(1.5, games).astype("int64"), name="away_goals")
    # the free variables joined in q, in PyMC3's order: home, intercept, sd_att_log__, sd_def_log__,
    # atts_star (teams), defs_star (teams)
    q = at.dvector("q")
    home, intercept = q[0:1].reshape(()), q[1:2].reshape(())
    sd_att_log, sd_def_log = q[2:3].reshape(()), q[3:4].reshape(())
    atts_star, defs_star = q[4 : 4 + teams], q[4 + teams : 4 + 2 * teams]
    sd_att, sd_def = at.exp(sd_att_log), at.exp(sd_def_log)
    atts = atts_star - at.mean(atts_star)
    defs = defs_star - at.mean(defs_star)
    home_theta = at.exp(intercept + home + atts[home_team] + defs[away_team])
    away_theta = at.exp(intercept + atts[away_team] + defs[home_team])
    factors = [
        at.zeros_like(home), at.zeros_like(intercept),  # Flat
        _half_student_t_logp(sd_att, 3, 2.5) + sd_att_log,  # and the log transform's Jacobian
        _half_student_t_logp(sd_def, 3, 2.5) + sd_def_log,
        _normal_logp(atts_star, 0, sd_att), _normal_logp(defs_star, 0, sd_def),
        _poisson_logp(home_goals, home_theta), _poisson_logp(away_goals, away_theta),
    ]  # fmt: skip
    logp = at.add(*map(at.sum, factors))
    dlogp = aesara.grad(logp, q)
    q0 = rng.standard_normal(4 + 2 * teams) * 0.3
    functions = {"logp_dlogp": ([q], [logp, dlogp], []), "logp": ([q], logp, [])}
    calls = [("logp_dlogp", (q0,)), ("logp_dlogp", (q0 + 0.1,)), ("logp", (q0,))]
    return Program(functions, calls, [])


def skipgram(shared, seed=9, vocab=10, dims=3, batch=4, negatives=2):
    rng = np.random.default_rng(seed)
    W_in = shared(_floats(rng, vocab, dims, scale=0.5), name="W_in")
    W_out = shared(np.zeros((vocab, dims), "float32"), name="W_out")
    center, context = at.ivector("center"), at.ivector("context")
    negs = at.imatrix("negs")
    lr = at.scalar("lr", dtype="float32")
    c = W_in[center]  # (B, D)
    o = W_out[context]  # (B, D)
    n = W_out[negs]  # (B, K, D)
    pos = at.log(at.sigmoid((c * o).sum(axis=1)))
    neg = at.log(at.sigmoid(-(n * c[:, None, :]).sum(axis=2))).sum(axis=1)
    cost = -(pos + neg).mean()
    g_in, g_out = aesara.grad(cost, [W_in, W_out])
    updates = [(W_in, W_in - lr * g_in), (W_out, W_out - lr * g_out)]
    W_out.set_value(_floats(rng, vocab, dims, scale=0.5))
    args = (rng.integers(0, vocab, batch).astype("int32"), rng.integers(0, vocab, batch).astype("int32"),
            rng.integers(0, vocab, (batch, negatives)).astype("int32"), np.float32(0.1))  # fmt: skip
    functions = {"train": ([center, context, negs, lr], cost, updates)}
    return Program(functions, [("train", args)], [W_in, W_out])


def denoising_autoencoder(shared, seed=10, n_visible=6, n_hidden=4, batch_size=3, n_train=9):
    rng = np.random.RandomState(seed)
    train_set_x = shared(rng.random_sample((n_train, n_visible)).astype("float32"), name="train_set_x")
    theano_rng = RandomStream(rng.randint(2**30))
    bound = 4 * np.sqrt(6.0 / (n_hidden + n_visible))
    W = shared(rng.uniform(-bound, bound, (n_visible, n_hidden)).astype("float32"), name="W")
    b_prime = shared(np.zeros(n_visible, "float32"), name="bvis")
    b = shared(np.zeros(n_hidden, "float32"), name="bhid")
    W_prime = W.T
    params = [W, b, b_prime]
    x = at.matrix("x")
    corruption_level, learning_rate = 0.3, 0.1
    # Aesara's binomial is int64 whatever the dtype asked (Theano's was floatX): cast as a port must
    mask = theano_rng.binomial(size=x.shape, n=1, p=1 - corruption_level, dtype=aesara.config.floatX)
    tilde_x = mask.astype(aesara.config.floatX) * x
    y = at.sigmoid(at.dot(tilde_x, W) + b)
    z = at.sigmoid(at.dot(y, W_prime) + b_prime)
    L = -at.sum(x * at.log(z) + (1 - x) * at.log(1 - z), axis=1)
    cost = at.mean(L)
    updates = [(p, p - learning_rate * g) for p, g in zip(params, aesara.grad(cost, params))]
    index = at.lscalar()
    givens = {x: train_set_x[index * batch_size : (index + 1) * batch_size]}
    functions = {"train_da": ([index], cost, updates, {"givens": givens})}
    return Program(functions, [("train_da", (1,))], params)


def kmeans(shared, seed=11, points=12, dims=2, k=3):
    rng = np.random.default_rng(seed)
    X = shared(rng.standard_normal((points, dims)).astype("float32"), name="X")
    C = shared(X.get_value()[:k].copy(), name="centroids")
    d = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
    assign = at.argmin(d, axis=1)
    counts = bincount(assign, minlength=k)
    sums = at.inc_subtensor(at.zeros_like(C)[assign], X)
    new_C = sums / at.maximum(counts, 1)[:, None].astype("float32")
    inertia = d.min(axis=1).sum()
    functions = {"step": ([], [inertia, assign], [(C, new_C)])}
    return Program(functions, [("step", ())], [C])


def lasagne_mlp(shared, seed=12, n_in=6, n_hidden=5, n_out=3, batch=4):
    rng = np.random.default_rng(seed)

    def glorot(n_a, n_b):  # lasagne.init.GlorotUniform, with the rectifier's gain
        bound = np.sqrt(2.0) * np.sqrt(6.0 / (n_a + n_b))
        return shared(rng.uniform(-bound, bound, (n_a, n_b)).astype("float32"))

    W1, b1 = glorot(n_in, n_hidden), shared(np.zeros(n_hidden, "float32"))
    W2, b2 = glorot(n_hidden, n_out), shared(np.zeros(n_out, "float32"))
    params = [W1, b1, W2, b2]
    input_var, target_var = at.matrix("inputs"), at.ivector("targets")
    srng = MRG_RandomStream(int(rng.integers(1, 2147462579)))

    def dropout(input, p, deterministic):
        if deterministic:
            return input
        retain_prob = 1 - p
        input /= retain_prob
        return input * srng.binomial(input.shape, p=retain_prob, dtype=input.dtype)

    def network(deterministic):
        hidden = at.maximum(at.dot(dropout(input_var, 0.2, deterministic), W1) + b1, 0)
        return softmax(at.dot(dropout(hidden, 0.5, deterministic), W2) + b2)

    prediction = network(False)
    loss = categorical_crossentropy(prediction, target_var).mean()
    all_grads = aesara.grad(loss, params)
    # lasagne.updates.adam
    learning_rate, beta1, beta2, epsilon = 0.001, 0.9, 0.999, 1e-8
    t_prev = shared(np.float32(0.0))
    updates = {}
    one = at.constant(1)
    t = t_prev + 1
    a_t = learning_rate * at.sqrt(one - beta2**t) / (one - beta1**t)
    for param, g_t in zip(params, all_grads):
        value = param.get_value(borrow=True)
        m_prev = shared(np.zeros(value.shape, dtype=value.dtype), broadcastable=param.broadcastable)
        v_prev = shared(np.zeros(value.shape, dtype=value.dtype), broadcastable=param.broadcastable)
        m_t = beta1 * m_prev + (one - beta1) * g_t
        v_t = beta2 * v_prev + (one - beta2) * g_t**2
        step = a_t * m_t / (at.sqrt(v_t) + epsilon)
        updates[m_prev], updates[v_prev], updates[param] = m_t, v_t, param - step
    updates[t_prev] = t
    test_prediction = network(True)
    test_loss = categorical_crossentropy(test_prediction, target_var).mean()
    test_acc = at.mean(at.eq(at.argmax(test_prediction, axis=1), target_var), dtype=aesara.config.floatX)
    inputs = rng.random((batch, n_in)).astype("float32")
    targets = rng.integers(0, n_out, batch).astype("int32")
    functions = {"train_fn": ([input_var, target_var], loss, updates),
                 "val_fn": ([input_var, target_var], [test_loss, test_acc], {})}  # fmt: skip
    return Program(functions, [("train_fn", (inputs, targets)), ("val_fn", (inputs, targets))], params)


MODELS = {"rugby": rugby, "skipgram": skipgram, "denoising autoencoder": denoising_autoencoder,
          "kmeans": kmeans, "lasagne mlp": lasagne_mlp}  # fmt: skip
