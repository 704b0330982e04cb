"""Three small public programs ported to Aesara as a new user would port them (issue 39).

The arrays live in the shared variables of a given constructor
(``aesara_bincount.gpu.shared``, or ``aesara.shared`` for the same graph on
the CPU); everything else is written as the originals write it, in Theano
and Keras-1 idioms (our own code, after the programs' published structure):

- :func:`dqn_update`: the Q-learning update of the DQN Atari agents written
  in Theano and Lasagne (a replay minibatch, ``q_vals[arange(n), actions]``,
  a target network behind ``disconnected_grad``, a Huber loss clipped at 1,
  RMSProp);
- :func:`latent_svm`: a latent structural SVM's hinge loss (a template per
  latent part and class, the best part chosen by ``argmax``, the true
  class's score gathered as ``scores[arange(n), :, y]``, the margin
  violations with the true class's set to zero) and a subgradient step;
- :func:`fasttext`: Keras' fastText example (``imdb_fasttext.py``): an
  embedding of token ids, their average over the sequence, a logistic
  output, binary cross-entropy and Adam.

Each returns ``(inputs, outputs, updates, params, args)`` for
``aesara.function``: ``args`` are the host values of the inputs for one call.
"""
import numpy as np

import aesara
import aesara.tensor as at
from aesara.gradient import disconnected_grad

__all__ = ["PORTED", "dqn_update", "fasttext", "latent_svm"]


def _floats(rng, *shape, scale=0.3):
    return (scale * rng.standard_normal(shape)).astype("float32")


def dqn_update(shared, seed=0, batch=8, state=6, hidden=10, actions=4):
    rng = np.random.default_rng(seed)
    params = [shared(_floats(rng, state, hidden), name="W1"), shared(np.zeros(hidden, "float32"), name="b1"),
              shared(_floats(rng, hidden, actions), name="W2"), shared(np.zeros(actions, "float32"), name="b2")]
    target_params = [shared(p.get_value() * np.float32(0.9), name=p.name + "_target") for p in params]
    states = shared(_floats(rng, batch, state, scale=1.0), name="states")
    next_states = shared(_floats(rng, batch, state, scale=1.0), name="next_states")
    acts = shared(rng.integers(0, actions, batch).astype("int32"), name="actions")
    rewards = shared(rng.standard_normal(batch).astype("float32"), name="rewards")
    terminals = shared((rng.random(batch) < 0.25).astype("int8"), name="terminals")

    def q_network(x, W1, b1, W2, b2):
        return at.dot(at.maximum(at.dot(x, W1) + b1, 0), W2) + b2

    q_vals = q_network(states, *params)
    next_q = disconnected_grad(q_network(next_states, *target_params))
    target = rewards + (1 - terminals.astype("float32")) * np.float32(0.99) * at.max(next_q, axis=1)
    diff = target - q_vals[at.arange(batch), acts]
    quadratic = at.minimum(abs(diff), np.float32(1.0))
    loss = at.mean(np.float32(0.5) * quadratic**2 + (abs(diff) - quadratic))
    lr = at.scalar("lr", dtype="float32")
    updates = {}
    for p, g in zip(params, aesara.grad(loss, params)):  # RMSProp, as Lasagne writes it
        acc = shared(np.zeros(p.get_value().shape, "float32"), name=p.name + "_acc")
        new_acc = np.float32(0.95) * acc + np.float32(0.05) * g**2
        updates[acc] = new_acc
        updates[p] = p - lr * g / at.sqrt(new_acc + np.float32(1e-6))
    return [lr], [loss, at.max(q_vals, axis=1)], updates, params, (np.float32(0.01),)


def latent_svm(shared, seed=1, n=7, features=5, parts=3, classes=4):
    rng = np.random.default_rng(seed)
    X = shared(_floats(rng, n, features, scale=1.0), name="X")
    y = shared(rng.integers(0, classes, n).astype("int64"), name="y")
    W = shared(_floats(rng, parts, features, classes), name="W")
    scores = at.dot(X, W.dimshuffle(1, 0, 2).reshape((features, parts * classes))).reshape((n, parts, classes))
    best = scores.max(axis=1)  # the best latent part of each class
    true_parts = scores[at.arange(n), :, y]  # (n, parts): the true class, every part
    h_star = at.argmax(true_parts, axis=1)  # the latent completion of the truth
    true_score = true_parts[at.arange(n), h_star]
    margins = at.maximum(0, 1 + best - true_score[:, None])
    margins = at.set_subtensor(margins[at.arange(n), y], 0)
    loss = margins.sum() / n + np.float32(0.01) * (W**2).sum()
    eta = at.scalar("eta", dtype="float32")
    return [eta], [loss, h_star], {W: W - eta * aesara.grad(loss, W)}, [W], (np.float32(0.1),)


def fasttext(shared, seed=2, batch=6, length=5, vocab=30, dims=4):
    rng = np.random.default_rng(seed)
    E = shared(_floats(rng, vocab, dims, scale=0.05), name="embeddings")
    w = shared(_floats(rng, dims), name="w")
    b = shared(np.zeros((), "float32"), name="b")
    tokens = shared(rng.integers(0, vocab, (batch, length)).astype("int32"), name="tokens")
    labels = shared(rng.integers(0, 2, batch).astype("float32"), name="labels")
    pooled = E[tokens].mean(axis=1)  # Embedding, then GlobalAveragePooling1D
    p = at.sigmoid(at.dot(pooled, w) + b)
    loss = at.mean(at.nnet.binary_crossentropy(at.clip(p, 1e-7, 1 - 1e-7), labels))
    params = [E, w, b]
    t = shared(np.float32(0), name="t")
    t_new = t + 1
    step = np.float32(0.01) * at.sqrt(1 - np.float32(0.999) ** t_new) / (1 - np.float32(0.9) ** t_new)
    updates = {t: t_new}
    for param, g in zip(params, aesara.grad(loss, params)):  # Adam, as Keras 1 writes it
        m = shared(np.zeros(param.get_value().shape, "float32"), name=param.name + "_m")
        v = shared(np.zeros(param.get_value().shape, "float32"), name=param.name + "_v")
        m_new = np.float32(0.9) * m + np.float32(0.1) * g
        v_new = np.float32(0.999) * v + np.float32(0.001) * g**2
        updates.update({m: m_new, v: v_new, param: param - step * m_new / (at.sqrt(v_new) + np.float32(1e-8))})
    return [], [loss, p > 0.5], updates, params, ()


PORTED = {"dqn update": dqn_update, "latent svm": latent_svm, "fasttext": fasttext}
