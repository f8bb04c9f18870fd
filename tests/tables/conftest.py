import numpy as np
import pandas as pd
import pytest


@pytest.fixture
def events() -> pd.DataFrame:
    """A small events table: 400 users, 1 to 6 rows each, three campaigns, revenue in [0, 150]."""
    rng = np.random.default_rng(2026)
    per_user = rng.integers(1, 7, size=400)
    users = np.repeat(np.arange(400), per_user)
    return pd.DataFrame({
        "user_id": users,
        "campaign": rng.choice(["alpha", "beta", "gamma"], size=users.size),
        "revenue": np.round(rng.exponential(30.0, size=users.size).clip(0, 150), 2),
    })
