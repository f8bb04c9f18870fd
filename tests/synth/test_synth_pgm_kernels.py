"""The compiled calibration (`pgm.Flat`, `kernels`) against brute force: clique marginals on
random junction trees (forests and a single clique included), and mirror-descent fits step for
step against a plain dense implementation of Private-PGM (McKenna et al. 2019, Alg. 1)."""

from __future__ import annotations

import numpy as np
import pytest

from bayesdp import rng_for_tests
from bayesdp.synth.pgm import _LINE_SEARCH, Measurement, calibrate, fit, junction_tree


def dense(sizes: tuple[int, ...], theta: dict[tuple[int, ...], np.ndarray]) -> np.ndarray:
    """P(x) ∝ exp Σ_r θ_r(x_r) on the full table."""
    log = np.zeros(sizes)
    for r, t in theta.items():
        log = log + t.reshape([sizes[a] if a in r else 1 for a in range(len(sizes))])
    p = np.exp(log - log.max())
    return p / p.sum()


def on(joint: np.ndarray, r: tuple[int, ...]) -> np.ndarray:
    return joint.sum(axis=tuple(a for a in range(joint.ndim) if a not in r))


def random_cliques(rng: np.random.Generator, d: int, parts: int) -> list[tuple[int, ...]]:
    """Random cliques of up to 3 columns inside `parts` disjoint groups of columns (a forest when
    parts > 1), every column among them."""
    group = rng.integers(0, parts, d)
    out = {(a,) for a in range(d)}
    for _ in range(2 * d):
        g = rng.integers(0, parts)
        cols = np.flatnonzero(group == g)
        if len(cols) > 1:
            k = int(rng.integers(2, min(3, len(cols)) + 1))
            out.add(tuple(sorted(int(c) for c in rng.choice(cols, k, replace=False))))
    return sorted(out)


CASES = [(seed, parts) for seed in range(6) for parts in (1, 2, 3)]


@pytest.mark.parametrize(("seed", "parts"), CASES)
def test_calibration_equals_brute_force(seed: int, parts: int) -> None:
    rng = rng_for_tests(300 + seed)
    sizes = tuple(int(s) for s in rng.integers(1, 5, 7))
    cliques = random_cliques(rng, len(sizes), parts)
    theta = {r: rng.normal(0, 2.0, [sizes[a] for a in r]) for r in cliques}
    jt = junction_tree(sizes, cliques)
    joint = dense(sizes, theta)
    for c, b in zip(jt.cliques, calibrate(jt, theta), strict=True):
        np.testing.assert_allclose(b, on(joint, c), rtol=1e-11, atol=1e-15)
    if parts > 1 and seed == 0:  # the case is a forest: some separators are empty
        assert () in jt.separators[1:]


def test_calibration_of_a_single_clique() -> None:
    rng = rng_for_tests(310)
    sizes = (3, 4, 2)
    theta = {(0, 1, 2): rng.normal(0, 3.0, sizes), (1,): rng.normal(0, 1.0, 4)}
    jt = junction_tree(sizes, list(theta))
    assert jt.cliques == ((0, 1, 2),)
    np.testing.assert_allclose(calibrate(jt, theta)[0], dense(sizes, theta), rtol=1e-12, atol=1e-16)


def reference_fit(sizes: tuple[int, ...], meas: list[Measurement],
                  iters: int) -> dict[tuple[int, ...], np.ndarray]:
    """Private-PGM's mirror descent with `fit`'s step rule, on the dense joint: θ after `iters` steps."""
    cl = sorted({m.clique for m in meas} | {(a,) for a in range(len(sizes))})
    theta = {r: np.zeros([sizes[a] for a in r]) for r in cl}
    w = np.array([1.0 / float(np.sum(np.broadcast_to(m.var, m.y.shape))) for m in meas])
    n_hat = max(float(np.dot(w, [m.y.sum() for m in meas]) / w.sum()), 1.0)

    def loss(th: dict[tuple[int, ...], np.ndarray]) -> tuple[float, dict[tuple[int, ...], np.ndarray],
                                                              dict[tuple[int, ...], np.ndarray]]:
        joint = dense(sizes, th)
        mus = {m.clique: on(joint, m.clique) for m in meas}
        value, grad = 0.0, {r: np.zeros_like(mu) for r, mu in mus.items()}
        for m in meas:
            diff = n_hat * mus[m.clique] - m.y
            value += 0.5 * float(np.sum(diff**2 / m.var))
            grad[m.clique] += n_hat * diff / m.var
        return value, grad, mus

    value, grad, mus = loss(theta)
    alpha, grow = 1.0 / sum(float(np.max(n_hat**2 / np.asarray(m.var))) for m in meas), True
    for _ in range(iters):
        alpha *= 2.0 if grow else 1.0
        grow = True
        for _ in range(_LINE_SEARCH):
            trial = {r: t - alpha * grad[r] if r in grad else t for r, t in theta.items()}
            v_new, g_new, new = loss(trial)
            if value - v_new >= 0.5 * sum(float(np.vdot(grad[r], mus[r] - new[r])) for r in grad):
                break
            alpha *= 0.5
            grow = False
        theta, value, grad, mus = trial, v_new, g_new, new
    return theta


def test_fit_follows_dense_mirror_descent() -> None:
    # Noisy marginals of a random table on cycles, two measurements of one clique with per-cell
    # variances: 30 steps of `fit` equal the dense computation's (line-search choices included).
    rng = rng_for_tests(311)
    sizes = (3, 2, 4, 3, 2, 3)
    x = rng.integers(0, 2, (3000, len(sizes))) * np.array(sizes) // 2
    cliques = [(0, 1), (1, 2), (2, 3), (0, 3), (3, 4), (4, 5), (0, 5), (2,), (5,)]
    meas = []
    for r in [*cliques, (1, 2)]:
        t = np.zeros([sizes[a] for a in r])
        np.add.at(t, tuple(x[:, a] for a in r), 1)
        var = rng.uniform(20.0, 60.0, t.shape)
        meas.append(Measurement(r, t + rng.normal(0, 1, t.shape) * np.sqrt(var), var))
    est = fit(sizes, meas, iters=30)
    theta = reference_fit(sizes, meas, 30)
    joint = dense(sizes, theta)
    for c, b in zip(est.jt.cliques, est.beliefs, strict=True):
        np.testing.assert_allclose(b, on(joint, c), rtol=1e-9, atol=1e-14)
    for r, t in theta.items():
        np.testing.assert_allclose(est.theta[r], t, rtol=1e-9, atol=1e-9)
