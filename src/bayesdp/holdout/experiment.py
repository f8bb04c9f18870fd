"""The experiments of the papers, vectorized: Science 2015 Figs. 1–2 and the Ladder's boosting attack.

`science2015` follows the authors' supplementary script (Dwork et al., Science 2015): n rows
each of training, holdout and fresh data, d features x ~ N(0, 1), labels ±1; the analyst keeps
the features whose training and holdout correlations with the label agree in sign beyond 1/√n,
takes the k with the largest training correlation and classifies by the sign of
Σ sign(c_j)·x_j. Thresholdout uses T = 4/√n and noise of standard deviation 1/√n as the
script does, but with this package's mechanism: Laplace noise (scale (1/√n)/√2, the same
standard deviation) for the threshold, the comparisons and the answers, and a budget large
enough never to run out (the script has none); its ε is reported. The correlation queries are
put into [0, 1] as φ_j = clip(x_j·y, −4, 4)/8 + 1/2 (threshold and noise scaled by 1/8 to
match); clipped values are counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bayesdp.holdout.ladder import Leaderboard
from bayesdp.holdout.thresholdout import ReusableHoldout
from bayesdp.noise import Rng, resolve_rng

KS: tuple[int, ...] = (0, 10, 20, 30, 45, 70, 100, 150, 200, 250, 300, 400, 500)
SIGNAL_FEATURES = 20
CLIP = 4.0
_BLOCK = 1024


@dataclass(frozen=True)
class ScienceResult:
    """Accuracies of shape (reps, len(ks), 3): columns train, holdout (as reported), fresh."""

    ks: tuple[int, ...]
    standard: np.ndarray
    thresholdout: np.ndarray
    epsilon: np.ndarray
    clipped: int

    def mean(self, which: str) -> np.ndarray:
        """Mean over repetitions, shape (len(ks), 3)."""
        return np.asarray(getattr(self, which).mean(axis=0))

    def sd(self, which: str) -> np.ndarray:
        """Standard deviation over repetitions, shape (len(ks), 3)."""
        return np.asarray(getattr(self, which).std(axis=0, ddof=1 if len(self.epsilon) > 1 else 0))


def science2015(
    n: int = 10_000,
    d: int = 10_000,
    *,
    ks: tuple[int, ...] = KS,
    reps: int = 100,
    signal: bool = False,
    rng: Rng | None = None,
) -> ScienceResult:
    """Standard holdout vs Thresholdout on the Science 2015 experiment (Fig. 1 no signal, Fig. 2 signal)."""
    gen = resolve_rng(rng)
    std, thr, eps, clipped = [], [], [], 0
    for _ in range(reps):
        s, t, e, c = _repetition(n, d, ks, signal, gen)
        std.append(s)
        thr.append(t)
        eps.append(e)
        clipped += c
    return ScienceResult(tuple(ks), np.array(std), np.array(thr), np.array(eps), clipped)


def _repetition(
    n: int, d: int, ks: tuple[int, ...], signal: bool, rng: Rng
) -> tuple[np.ndarray, np.ndarray, float, int]:
    x = rng.standard_normal((3, n, d), dtype=np.float32)  # train, holdout, fresh
    y = np.where(rng.integers(0, 2, size=(3, n)) == 1, 1.0, -1.0).astype(np.float32)
    if signal:
        x[:, :, :SIGNAL_FEATURES] += (6 / math.sqrt(n)) * y[:, :, None]
    corr = np.einsum("snd,sn->sd", x[:2], y[:2]) / n
    tol, threshold, sd = 1 / math.sqrt(n), 4 / math.sqrt(n), 1 / math.sqrt(n)
    scale = sd / math.sqrt(2)
    budget = d + len(ks)
    phi_train, clip_t = _bounded_correlations(x[0], y[0])
    phi_hold, clip_h = _bounded_correlations(x[1], y[1])
    unit = 2 * CLIP  # φ = clip(x·y)/8 + 1/2 shrinks differences by 8
    corr_holdout = ReusableHoldout(
        None, holdout=n, threshold=threshold / unit, sigma=scale / unit, budget=budget,
        threshold_noise=scale / unit, compare_noise=scale / unit, rng=rng,
    )
    answers = corr_holdout.query_means(phi_train, phi_hold)
    assert isinstance(answers, list)
    corr_thr = (np.array([a.value for a in answers], dtype=np.float64) - 0.5) * unit
    acc_holdout = ReusableHoldout(
        None, holdout=n, threshold=threshold, sigma=scale, budget=budget,
        threshold_noise=scale, compare_noise=scale, rng=rng,
    )
    std = _accuracies(x, y, corr[0], corr[1], ks, tol)
    thr = _accuracies(x, y, corr[0], corr_thr, ks, tol)
    released = acc_holdout.query_means(thr[:, 0], thr[:, 1])
    assert isinstance(released, list)
    thr[:, 1] = [a.value for a in released]
    eps = corr_holdout.guarantee.epsilon + acc_holdout.guarantee.epsilon
    return std, thr, eps, clip_t + clip_h


def _bounded_correlations(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, int]:
    """Means of φ_j = clip(x_j·y, −4, 4)/8 + 1/2 over rows, by blocks of columns; and the clip count."""
    out = np.empty(x.shape[1])
    clipped = 0
    for start in range(0, x.shape[1], _BLOCK):
        v = x[:, start : start + _BLOCK] * y[:, None]
        clipped += int(np.count_nonzero(np.abs(v) > CLIP))
        np.clip(v, -CLIP, CLIP, out=v)
        out[start : start + _BLOCK] = v.mean(axis=0, dtype=np.float64) / (2 * CLIP) + 0.5
    return out, clipped


def _accuracies(
    x: np.ndarray, y: np.ndarray, c_train: np.ndarray, c_check: np.ndarray,
    ks: tuple[int, ...], tol: float,
) -> np.ndarray:
    """Train/holdout/fresh accuracy of the top-k sign classifier for every k (cumulative sums)."""
    keep = ((c_train > tol) & (c_check > tol)) | ((c_train < -tol) & (c_check < -tol))
    kept = np.flatnonzero(keep)
    order = kept[np.argsort(-np.abs(c_train[kept]), kind="stable")][: max(ks)]
    signs = np.sign(c_train[order]).astype(np.float32)
    scores = np.zeros((3, x.shape[1], len(ks)), dtype=np.float32)
    if order.size:
        cum = np.cumsum(x[:, :, order] * signs, axis=2)
        cols = np.minimum(np.asarray(ks), order.size) - 1
        scores = np.where(np.asarray(ks) > 0, cum[:, :, np.maximum(cols, 0)], 0.0)
    pred = np.where(scores >= 0, 1.0, -1.0)
    return np.asarray((pred == y[:, :, None]).mean(axis=1).T, dtype=np.float64)


@dataclass(frozen=True)
class AttackResult:
    """Holdout loss of the boosted submission and the score the board released for it."""

    holdout_loss: float
    reported: float
    selected: int


def boosting_attack(board: Leaderboard, submissions: int, *, rng: Rng | None = None) -> AttackResult:
    """Blum & Hardt 2015 §4 boosting attack: submit random 0/1 vectors, keep those the board scored
    as better (below 1/2 for the naive board, lowering the score for the Ladder), and submit their
    majority vote. Every vector is independent of the labels, so the true loss is 1/2."""
    gen = resolve_rng(rng)
    u = gen.integers(0, 2, size=(board.n, submissions), dtype=np.int8)
    previous = math.inf
    good = np.zeros(submissions, dtype=bool)
    for i in range(submissions):
        score = board.submit(u[:, i])
        good[i] = score < previous if hasattr(board, "best") else score <= 0.5
        previous = score
    chosen = int(good.sum())
    votes = u[:, good].sum(axis=1, dtype=np.int64)
    boosted = (2 * votes >= chosen).astype(np.int8)
    holdout_loss = float(board.losses(boosted).mean())
    return AttackResult(holdout_loss, board.submit(boosted), chosen)
