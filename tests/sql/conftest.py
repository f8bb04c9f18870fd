import numpy as np
import pandas as pd
import pytest


@pytest.fixture(scope="session")
def events() -> pd.DataFrame:
    """600 users with 1 to 6 rows, three campaigns, two countries, two integer regions,
    revenue in [0, 150] (some above the bounds of 100), no nulls."""
    rng = np.random.default_rng(17)
    users = np.repeat(np.arange(600), rng.integers(1, 7, size=600))
    n = users.size
    return pd.DataFrame({
        "user_id": users,
        "campaign": rng.choice(["spring", "summer", "fall"], size=n),
        "country": rng.choice(["FR", "DE"], size=n),
        "region": rng.integers(1, 3, size=n),
        "revenue": np.round(rng.exponential(40.0, size=n).clip(0, 150), 2),
    })


@pytest.fixture
def meta() -> dict:
    """Metadata for `events`: the unit, contribution bounds, revenue's bounds, public keys."""
    return {"tables": {"events": {
    "privacy_unit": "user_id", "max_groups_per_unit": 3, "max_rows_per_group": 2, "delta": 1e-6,
    "columns": {"revenue": {"bounds": [0, 100]}, "country": {"public": True},
                "campaign": {"keys": ["spring", "summer", "fall", "winter"], "bounds": [0, 1]},
                "region": {"keys": [1, 2]}}}}}
