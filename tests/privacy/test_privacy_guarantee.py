"""Guarantee: validation, printing, group privacy, neighbour relations, `+`."""

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bayesdp.errors import InvalidParameter
from bayesdp.privacy import Dependence, Guarantee, Noise, compose

LAP = Noise("laplace", scale=1.0, sensitivity=1.0)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"epsilon": -0.1}, "epsilon"),
        ({"epsilon": math.nan}, "epsilon"),
        ({"epsilon": math.inf}, "epsilon"),
        ({"epsilon": "abc"}, "epsilon"),
        ({"epsilon": 1, "delta": 1.0}, "delta"),
        ({"epsilon": 1, "delta": -1e-9}, "delta"),
        ({"epsilon": 1, "delta": math.nan}, "delta"),
        ({"epsilon": 1, "relation": "swap"}, "relation"),
        ({"epsilon": 1, "unit": ""}, "unit"),
        ({"epsilon": 1, "rho": -1}, "rho"),
    ],
)
def test_bad_input_names_the_parameter(kwargs, name):
    with pytest.raises(InvalidParameter, match=name):
        Guarantee(**kwargs)


def test_printable_and_equal_ignoring_noise():
    g = Guarantee(0.5, delta=1e-6, unit="user")
    assert str(g) == "ε=0.5, δ=1e-06 per user (add/remove neighbours)"
    assert str(Guarantee(1)) == "ε=1 per row (add/remove neighbours)"
    assert str(Guarantee(1, relation="replace_one")) == "ε=1 per row (replace-one neighbours)"
    z = Guarantee.zcdp(0.125, delta=1e-6)
    assert str(z).startswith("ρ=0.125-zCDP (ε=")
    assert Guarantee(1, noise=(LAP,)) == Guarantee(1)
    assert "noise" not in repr(Guarantee(1, noise=(LAP,)))


def test_zcdp_states_epsilon_by_bun_steinke():
    z = Guarantee.zcdp(0.5, delta=1e-6)
    assert z.epsilon == pytest.approx(0.5 + 2 * math.sqrt(0.5 * math.log(1e6)), rel=1e-15)
    assert z.rho == 0.5 and not z.is_pure
    with pytest.raises(InvalidParameter, match="delta"):
        Guarantee.zcdp(0.5, delta=0)


def test_addition_is_basic_composition():
    a, b = Guarantee(0.5, delta=1e-7), Guarantee(0.25, delta=2e-7)
    c = a + b
    assert (c.epsilon, c.delta) == (0.75, pytest.approx(3e-7, rel=1e-15))
    total = sum([a, b, a])
    assert (total.epsilon, total.delta) == (1.25, pytest.approx(4e-7, rel=1e-15))
    z = Guarantee.zcdp(0.1, delta=1e-6) + Guarantee.zcdp(0.2, delta=1e-6)
    assert z.rho == pytest.approx(0.3, rel=1e-15)
    assert (a + Guarantee(1.0, noise=(LAP,))).noise == ()


def test_adding_different_relations_or_units_is_refused():
    with pytest.raises(InvalidParameter, match="relation"):
        Guarantee(1) + Guarantee(1, relation="replace_one")
    with pytest.raises(InvalidParameter, match="unit"):
        Guarantee(1) + Guarantee(1, unit="user")


def test_group_privacy():
    g = Guarantee(0.5, delta=1e-6, noise=(LAP,))
    g3 = g.group(3)
    assert g3.epsilon == 1.5
    # δ(1 + e^ε + e^{2ε}), below the textbook k·e^{(k−1)ε}·δ
    assert g3.delta == pytest.approx(1e-6 * (1 + math.exp(0.5) + math.exp(1.0)), rel=1e-13)
    assert g3.delta <= 3 * math.exp(1.0) * 1e-6
    assert g3.unit == "group of 3 rows" and g3.noise == ()
    assert g.group(4, unit="household").unit == "household"
    person = replace(g, unit="person")
    assert person.group(3, plural="people").unit == "group of 3 people"
    assert person.group(3).unit == "person group of size 3"  # no plural guessed ("persons")
    assert replace(g, unit="family").group(2).unit == "family group of size 2"
    with pytest.raises(InvalidParameter, match="plural"):
        person.group(3, plural="")
    assert g.group(1) == g
    assert Guarantee.zcdp(0.1, delta=1e-6).group(3).rho == pytest.approx(0.9, rel=1e-15)
    assert Guarantee(0.0, delta=1e-3).group(5).delta == pytest.approx(5e-3, rel=1e-15)
    with pytest.raises(InvalidParameter, match="k"):
        g.group(0)
    with pytest.raises(InvalidParameter, match="k=40"):
        Guarantee(1, delta=1e-3).group(40)


def test_relation_conversion_follows_dwork_remark_2_1():
    g = Guarantee(0.7, delta=1e-6)
    r = g.to_relation("replace_one")
    assert r.relation == "replace_one"
    assert r.epsilon == pytest.approx(1.4, rel=1e-15)
    assert r.delta == pytest.approx((1 + math.exp(0.7)) * 1e-6, rel=1e-13)
    assert Guarantee(1).to_relation("replace_one") == Guarantee(2, relation="replace_one")
    assert r.to_relation("replace_one") is r
    with pytest.raises(InvalidParameter, match="relation='add_remove'"):
        r.to_relation("add_remove")
    with pytest.raises(InvalidParameter, match="relation"):
        g.to_relation("hamming")


@settings(deadline=None)
@given(
    st.floats(0, 3),
    st.floats(0, 1e-9),
    st.integers(1, 6),
    st.integers(1, 6),
)
def test_group_is_monotone_in_k(eps, delta, j, k):
    g = Guarantee(eps, delta=delta)
    lo, hi = g.group(min(j, k)), g.group(max(j, k))
    assert lo.epsilon <= hi.epsilon and lo.delta <= hi.delta


CHAIN = Dependence("pufferfish", model="a 2-state Markov chain", fingerprint="c0ffee", length=100)


def test_guarantees_under_different_dependence_assumptions_never_compose():
    correlated = Guarantee(1.0, relation="replace_one", unit="record", dependence=CHAIN)
    independent = Guarantee(1.0, relation="replace_one", unit="record")
    other = Guarantee(1.0, relation="replace_one", unit="record",
                      dependence=Dependence("pufferfish", model="a 2-state Markov chain",
                                            fingerprint="beef", length=100))
    for a, b in [(correlated, independent), (independent, correlated), (correlated, other)]:
        with pytest.raises(InvalidParameter, match=r"dependence=.*dependence=") as err:
            compose([a, b])
        assert str(a.dependence or "independent") in str(err.value)
        assert str(b.dependence or "independent") in str(err.value)
    both = correlated + correlated
    assert both.epsilon == 2.0 and both.dependence == CHAIN
    assert str(both).endswith(", Pufferfish privacy under a 2-state Markov chain")
    with pytest.raises(InvalidParameter, match="method"):
        compose([correlated] * 2, "pld", 1e-6)
    with pytest.raises(InvalidParameter, match="k=2"):
        correlated.group(2)
    with pytest.raises(InvalidParameter, match="dependence"):
        Guarantee(1.0, dependence="a Markov chain")
