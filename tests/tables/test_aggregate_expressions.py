"""Aggregates of row expressions (`bdp.sum("price * qty")`, `bdp.share(...)`), checked by
`bayesdp.expressions` and computed in the engine."""

import numpy as np
import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp.errors import DataError, InvalidParameter
from bayesdp.noise import rng_for_tests


@pytest.fixture
def sales() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    n = 4000
    return pd.DataFrame({"person": np.arange(n), "shop": rng.choice(["a", "b"], n),
                         "price": rng.integers(1, 20, n).astype(float), "qty": rng.integers(1, 5, n),
                         "union": rng.choice(["yes", "no", None], n, p=[0.3, 0.6, 0.1])})


def test_expressions_release_what_they_compute(sales):
    """At ε = 175 per aggregate the sum's Laplace noise has scale 100/175 = 0.57, below 9 except
    with probability 2e^-15 < 1e-6 over both groups; the means' noise is below 1e-3 with far
    higher probability (about 1,800 values per group). So the released values equal the exact
    ones to the stated tolerances."""
    q = bdp.table(sales, "person").group_by("shop", keys=["a", "b"]).agg(
        revenue=bdp.sum("price * qty", bounds=(0, 100)),
        members=bdp.share('"union" = \'yes\''),
        also=bdp.mean("union = 'yes'", bounds=(0, 1)),  # a column named like a keyword, unquoted
        rows=bdp.count())
    out = q.release(700.0, max_groups_per_unit=1, rng=rng_for_tests(1)).to_pandas().set_index("shop")
    truth = sales.assign(rev=sales.price * sales.qty, u=sales["union"].map({"yes": 1.0, "no": 0.0}))
    exact = truth.groupby("shop").agg(rev=("rev", "sum"), u=("u", "mean"))
    assert np.allclose(out["revenue"], exact["rev"], atol=9.0)
    assert np.allclose(out["members"], exact["u"], atol=1e-3)  # nulls are left out of a share
    assert np.allclose(out["also"], exact["u"], atol=1e-3)
    assert q.aggregates["members"].describe() == "share(" + repr('"union" = \'yes\'') + ")"


def test_expressions_are_checked_before_anything_runs(sales):
    t = bdp.table(sales, "person")
    with pytest.raises(InvalidParameter, match=r"aggregate 'x': function rand .* not allowed"):
        t.agg(x=bdp.mean("price * random()", bounds=(0, 1)))
    with pytest.raises(InvalidParameter, match=r"aggregate 'x': aggregate sum .* not allowed"):
        t.agg(x=bdp.sum("sum(price)", bounds=(0, 1)))
    with pytest.raises(DataError, match="did you mean 'price'"):
        t.agg(x=bdp.sum("prices", bounds=(0, 1)))
    with pytest.raises(DataError, match="'upper\\(shop\\)' of x does not give numbers"):
        t.agg(x=bdp.sum("upper(shop)", bounds=(0, 1)))
    with pytest.raises(DataError, match="share 's': 'price \\* 2' is not true/false"):
        t.agg(s=bdp.share("price * 2"))


def test_share_in_the_cli_spec(sales, tmp_path, capsys):
    from bayesdp.cli import main

    sales.to_csv(tmp_path / "s.csv", index=False)
    (tmp_path / "spec.toml").write_text(
        'privacy_unit = "person"\nepsilon = 1.0\n[aggregates]\n'
        'big = { kind = "share", condition = "price * qty > 20" }\n')
    assert main(["release", str(tmp_path / "s.csv"), "--spec", str(tmp_path / "spec.toml")]) == 0
    assert "big" in capsys.readouterr().out
