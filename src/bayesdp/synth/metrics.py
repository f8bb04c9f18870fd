"""Fidelity of a synthetic table: k-way marginal total variation, and train-on-synthetic/test-on-real.

These compare against the real data, so their values are NOT private: they are for the data
holder deciding whether to release, never for publication alongside the synthetic table.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from bayesdp.errors import DataError, check_positive_int
from bayesdp.synth.encode import ColumnSpec

# Ridge penalty of the TSTR logistic regression (per record).
RIDGE = 1e-3


def binned(frame: pd.DataFrame, specs: Sequence[ColumnSpec]) -> pd.DataFrame:
    """Numeric columns replaced by their cell labels (from public bounds), so marginals are tables."""
    out = {}
    for spec in specs:
        s = frame[spec.name]
        if spec.edges is None:
            out[spec.name] = s.map(str)  # missing values become the text "nan"
        else:
            e = spec.edges
            x = pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64)
            cell = np.clip(np.searchsorted(e, x, side="right") - 1, 0, len(e) - 2)
            out[spec.name] = pd.Series(np.asarray(spec.label, dtype=object)[cell], index=s.index)
    return pd.DataFrame(out)


def _joint_codes(
    real: pd.DataFrame, synthetic: pd.DataFrame, columns: list[str]
) -> tuple[list[np.ndarray], list[np.ndarray], list[int]]:
    """Shared integer codes per column for both tables (values compared as they are)."""
    missing = [c for c in columns if c not in real.columns or c not in synthetic.columns]
    if missing:
        raise DataError(f"columns {missing} are not in both tables")
    codes_r, codes_s, sizes = [], [], []
    for c in columns:
        both = pd.concat([real[c], synthetic[c]], ignore_index=True).astype(str)
        codes, uniques = pd.factorize(both, use_na_sentinel=False)  # missing is a value too
        codes_r.append(codes[: len(real)])
        codes_s.append(codes[len(real):])
        sizes.append(len(uniques))
    return codes_r, codes_s, sizes


def marginal_tvd(
    real: pd.DataFrame, synthetic: pd.DataFrame, k: int = 2, columns: list[str] | None = None
) -> dict[tuple[str, ...], float]:
    """TVD = ½‖p − q‖₁ of every k-way marginal (the NIST SDNist k-marginal metric averages these)."""
    k = check_positive_int("k", k)
    cols = list(real.columns) if columns is None else list(columns)
    cr, cs, sizes = _joint_codes(real, synthetic, cols)
    out = {}
    for combo in itertools.combinations(range(len(cols)), k):
        fr = np.zeros(len(real), dtype=np.int64)
        fs = np.zeros(len(synthetic), dtype=np.int64)
        cells = 1
        for j in combo:
            fr = fr * sizes[j] + cr[j]
            fs = fs * sizes[j] + cs[j]
            cells *= sizes[j]
        p = np.bincount(fr, minlength=cells) / len(real)
        q = np.bincount(fs, minlength=cells) / len(synthetic)
        out[tuple(cols[j] for j in combo)] = 0.5 * float(np.abs(p - q).sum())
    return out


def _features(frames: list[pd.DataFrame], target: str) -> list[np.ndarray]:
    """One-hot categoricals and standardized numerics, with columns shared by all frames."""
    both = pd.concat(frames, ignore_index=True).drop(columns=[target])
    parts = []
    for c in both.columns:
        s = both[c]
        if pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype):
            x = s.to_numpy(dtype=np.float64)
            parts.append(((x - x.mean()) / (x.std() or 1.0))[:, None])
        else:
            parts.append(pd.get_dummies(s.astype(str)).to_numpy(dtype=np.float64))
    x = np.hstack([*parts, np.ones((len(both), 1))])
    bounds = np.cumsum([0] + [len(f) for f in frames])
    return [x[a:b] for a, b in itertools.pairwise(bounds)]


def _fit_logistic(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Ridge logistic regression by L-BFGS on the mean log-loss."""

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = x @ w
        ll = np.logaddexp(0.0, z) - y * z
        grad = x.T @ (1.0 / (1.0 + np.exp(-z)) - y) / len(y) + RIDGE * w
        return float(ll.mean() + 0.5 * RIDGE * w @ w), grad

    res = minimize(loss, np.zeros(x.shape[1]), jac=True, method="L-BFGS-B")
    w: np.ndarray = res.x
    return w


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve by the Mann–Whitney rank statistic."""
    pos = labels.astype(bool)
    n1, n0 = int(pos.sum()), int((~pos).sum())
    if n1 == 0 or n0 == 0:
        raise DataError("AUC needs both classes in the test data")
    from scipy.stats import rankdata  # scipy.stats takes 0.7 s to import: only when asked

    r = rankdata(scores)
    return float((r[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def tstr_auc(train: pd.DataFrame, test: pd.DataFrame, target: str, positive: object) -> float:
    """Train a logistic regression on `train` (synthetic), report its AUC on `test` (real).

    The standard machine-learning efficacy check of synthetic data (Tao et al. 2021).
    """
    if target not in train.columns or target not in test.columns:
        raise DataError(f"target {target!r} is not in both tables")
    x_tr, x_te = _features([train, test], target)
    y_tr = (train[target].astype(str) == str(positive)).to_numpy(dtype=np.float64)
    y_te = (test[target].astype(str) == str(positive)).to_numpy(dtype=np.float64)
    if y_tr.min() == y_tr.max():
        return 0.5  # a constant training label carries no signal: the classifier is a coin
    return auc(x_te @ _fit_logistic(x_tr, y_tr), y_te)
