"""explain() never prints a statistical distance above 1, and gives the output-level TV bound."""

import math
import re

import pytest

from bayesdp.privacy import Guarantee


@pytest.mark.parametrize("eps, delta, n", [(1.0, 1e-6, 1000), (3.0, 1e-9, 10), (0.5, 1e-8, 100)])
def test_explain_states_no_distance_above_one(eps: float, delta: float, n: int) -> None:
    text = Guarantee(eps, delta=delta).explain(n=n)
    found = re.findall(r"(?:=|at most) ([0-9.e+-]+) in (?:statistical distance|total variation)", text)
    distances = [float(m) for m in found]
    assert distances and all(0 <= v <= 1 for v in distances), text


def test_explain_gives_the_kairouz_tv_bound() -> None:
    """At ε = 1, δ = 1e-6 the neighbouring output distributions are within (e − 1 + 2δ)/(e + 1) in TV."""
    text = Guarantee(1.0, delta=1e-6).explain(n=1000)
    tv = (math.e - 1 + 2e-6) / (math.e + 1)
    assert f"= {tv:.3g} in total variation" in text
    assert "19.1" not in text
