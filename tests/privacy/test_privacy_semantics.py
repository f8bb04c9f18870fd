"""Semantics of seed 000: the §1.5 table, the converse, posteriors, tests, explain, bayes_check."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bayesdp import rng_for_tests
from bayesdp.errors import DataError, InvalidParameter
from bayesdp.mechanisms import DiscreteLaplace, RandomizedResponse
from bayesdp.privacy import Guarantee, bayes_check, dp_from_semantic, product_prior
from bayesdp.privacy.semantics import ks_formula, rare_output_mass

# semantics-audit.md §1.5: ε, δ, n, precondition, ε′, δ′, posterior at prior 1% and 50%,
# min α+β. Printed to 3-4 significant figures; "vacuous" rows (≥ 1) are kept as printed.
TABLE = [
    (0.1, 0, 1, True, 0.105, 0, 0.0110, 0.5250, 0.950042),
    (0.1, 1e-6, 1e3, True, 0.413, 0.126, 0.0110, 0.5250, 0.950041),
    (0.1, 1e-6, 1e6, False, 2.35, 4, 0.0110, 0.5250, 0.950041),
    (0.5, 0, 1, True, 0.649, 0, 0.0164, 0.6225, 0.755081),
    (0.5, 1e-6, 1e3, True, 3.54, 0.126, 0.0164, 0.6225, 0.755081),
    (0.5, 1e-6, 1e6, False, 5.48, 4, 0.0164, 0.6225, 0.755081),
    (1, 0, 1, True, 1.72, 0, 0.0267, 0.7311, 0.537883),
    (1, 1e-6, 1e3, True, 19.1, 0.126, 0.0267, 0.7311, 0.537882),
    (1, 1e-6, 1e6, False, 21.1, 4, 0.0267, 0.7311, 0.537882),
    (2, 0, 1, True, 6.39, 0, 0.0695, 0.8808, 0.238406),
    (2, 1e-6, 1e3, True, 402, 0.126, 0.0695, 0.8808, 0.238406),
    (2, 1e-6, 1e6, False, 404, 4, 0.0695, 0.8808, 0.238406),
    (5, 0, 1, True, 147, 0, 0.5999, 0.9933, 0.013386),
    (5, 1e-6, 1e3, True, 3.27e6, 0.126, 0.5999, 0.9933, 0.013386),
    (5, 1e-6, 1e6, False, 3.27e6, 4, 0.5999, 0.9933, 0.013386),
]


def sig(x, digits):
    """Round to the printed number of significant figures."""
    return float(f"{x:.{digits}g}")


@pytest.mark.parametrize(("eps", "delta", "n", "ok", "e1", "d1", "p01", "p50", "mab"), TABLE)
def test_semantics_table(eps, delta, n, ok, e1, d1, p01, p50, mab):
    g = Guarantee(eps, delta=delta)
    n = int(n)
    formula_eps, formula_delta, pre = ks_formula(eps, delta, n)
    assert pre is ok
    assert sig(formula_eps, 3) == e1 and sig(formula_delta, 3) == d1
    s = g.semantic(n)
    assert s.holds is ok
    if ok:
        assert (s.epsilon, s.delta) == (formula_eps, formula_delta)
        assert s.informative is (formula_eps < 1 and formula_delta < 1)
    else:  # the formula's numbers are never reported as a guarantee
        assert (s.epsilon, s.delta, s.informative) == (1.0, 1.0, False)
        assert "no semantic guarantee" in s.reason
    assert round(g.posterior(0.01), 4) == p01 and round(g.posterior(0.5), 4) == p50
    assert round(g.min_total_error(), 6) == mab


def test_semantic_precondition_boundary_and_bad_n():
    # δ < (1 − e^{−ε})²/n is strict
    eps, n = 0.5, 100
    thr = math.expm1(-eps) ** 2 / n
    assert Guarantee(eps, delta=thr * (1 - 1e-9)).semantic(n).holds
    assert not Guarantee(eps, delta=thr).semantic(n).holds
    assert not Guarantee(0.0, delta=1e-12).semantic(1).holds
    for bad in (0, -3, 2.5, "x"):
        with pytest.raises(InvalidParameter, match="n"):
            Guarantee(1).semantic(bad)


@pytest.mark.parametrize(
    ("sp_eps", "sp_delta", "dp"),
    [
        (0.1, 0.0, (0.6, 0.0)),  # Thm 2.2: ε/2-SP ⇒ 3ε-DP with ε = 0.2
        (0.225, 0.0, (1.35, 0.0)),  # the edge ε = 0.45
        (0.45, 1e-3, (1.35, 2e-3)),  # Thm 2.4: (ε, δ)-SP ⇒ (3ε, 2δ)-DP
        (0.1, 1e-6, (0.3, 2e-6)),
    ],
)
def test_converse(sp_eps, sp_delta, dp):
    g = dp_from_semantic(sp_eps, sp_delta)
    assert (g.epsilon, g.delta) == pytest.approx(dp, rel=1e-14)
    assert g.relation == "replace_one"


@pytest.mark.parametrize(("e", "d"), [(0.3, 0), (0, 0), (0.5, 1e-3), (0.1, 0.6), (-1, 0)])
def test_converse_outside_its_range(e, d):
    with pytest.raises(InvalidParameter, match=r"epsilon|delta"):
        dp_from_semantic(e, d)


@pytest.mark.parametrize("prior", [0, 1, -0.5, 2, math.nan])
def test_prior_must_be_a_probability(prior):
    with pytest.raises(InvalidParameter, match="prior"):
        Guarantee(1).posterior(prior)


@settings(max_examples=80, deadline=None)
@given(st.floats(0, 20), st.floats(0, 20), st.floats(1e-6, 1 - 1e-6))
def test_posterior_at_most_one_and_increasing_in_epsilon(e1, e2, p):
    lo, hi = sorted((e1, e2))
    a, b = Guarantee(lo).posterior(p), Guarantee(hi).posterior(p)
    assert p * (1 - 1e-12) <= a <= b <= 1.0


@settings(max_examples=80, deadline=None)
@given(st.floats(0, 5), st.floats(0, 0.5), st.floats(0, 1), st.floats(0, 1))
def test_tradeoff_is_convex_symmetric_and_bounded(eps, delta, a1, a2):
    g = Guarantee(eps, delta=delta)
    f = g.tradeoff
    mid = (a1 + a2) / 2
    assert f(mid) <= (f(a1) + f(a2)) / 2 + 1e-12  # convex
    assert 0 <= f(a1) <= 1 - a1 + 1e-12  # never better than the trivial test
    if f(a1) > 0:  # symmetric: the curve is its own inverse
        assert f(f(a1)) == pytest.approx(a1, abs=1e-9)
    # the smallest α + β over the curve is min_total_error
    alphas = np.linspace(0, 1, 2001)
    total = min(x + f(x) for x in alphas)
    assert total >= g.min_total_error() - 1e-12
    assert total <= g.min_total_error() + 1e-3


def test_rare_output_mass_is_lemma_3_3_part_2():
    assert rare_output_mass(Guarantee(1.0)) == 0.0
    assert rare_output_mass(Guarantee(0.5, delta=1e-6)) == pytest.approx(2e-6 / (1 - math.exp(-0.5)))
    assert rare_output_mass(Guarantee(0.0, delta=1e-6)) == math.inf


def test_huge_epsilon_gives_vacuous_figures_not_overflow():
    g = Guarantee(1000.0, delta=1e-9)
    # e^{3ε} overflows: the trivial bound 1 is reported, never inf (issue: outputs are finite).
    assert g.semantic(10).epsilon == 1.0 and not g.semantic(10).informative
    assert g.posterior(0.01) == 1.0 and g.min_total_error() == 0.0
    assert g.tradeoff(0.0) == 1 - 1e-9 and g.tradeoff(0.5) == 0.0
    assert "says nothing" in g.explain(n=10)
    assert Guarantee(1000.0).group(3).epsilon == 3000.0


def test_tradeoff_rejects_alpha_outside_unit_interval():
    with pytest.raises(InvalidParameter, match="alpha"):
        Guarantee(1).tradeoff(1.5)


def test_explain_states_the_delta_rule_and_composition():
    pure = Guarantee(0.5).explain()
    assert "0.649" in pure and "Thm 2.2" in pure and "adds up" in pure
    assert "ten releases like this one: ε=5;" in pure
    assert "50%" in pure and "62.2%" in pure
    ok = Guarantee(0.1, delta=1e-6).explain(n=1000, prior=0.2)
    assert "δ ≪ ε²/n" in ok and "0.413" in ok and "0.216" in ok
    assert "ε=1, δ=1e-05;" in ok
    bad = Guarantee(0.1, delta=1e-6).explain(n=10**6)
    assert "no semantic guarantee follows" in bad and "δ ≪ ε²/n" in bad
    unknown = Guarantee(0.1, delta=1e-6, unit="patient").explain()
    assert "ε²/n" in unknown and "9.06e+03 privacy units (each one patient)" in unknown
    assert "no number of records" in Guarantee(0.0, delta=1e-6).explain()
    assert "nothing bounds how often" in Guarantee(0.0, delta=1e-6).explain()
    # the rare-output caveat: Lemma 3.3(2) mass and the posterior at 2ε
    assert "2.1e-05" in ok and "giving 0.234," in ok
    assert "says nothing" in Guarantee(2).explain()
    with pytest.raises(InvalidParameter, match="n"):
        Guarantee(1).explain(n=0)
    with pytest.raises(InvalidParameter, match="prior"):
        Guarantee(1).explain(prior=1.0)


# -- bayes_check: seed 000 made exact on small worlds -----------------------------------


RR = RandomizedResponse
DLapCount = DiscreteLaplace  # releasing the sum of the records


def random_joint_prior(rng, k, n):
    """A random joint pmf over k^n databases: records are correlated in general."""
    return rng.dirichlet(np.full(k**n, 0.3)).reshape((k,) * n)


@pytest.mark.parametrize(
    ("mech", "k", "n"),
    [
        (RR(0.1), 2, 3),
        (RR(0.5), 2, 4),
        (RR(1.0, categories=3), 3, 3),
        (DLapCount(0.5), 2, 4),
        (DLapCount(1.0, sensitivity=2), 3, 3),
    ],
)
def test_theorem_2_2_holds_for_random_correlated_priors(mech, k, n):
    rng = rng_for_tests(7)
    eps = mech.epsilon if isinstance(mech, RR) else mech.sensitivity / mech.scale
    worst = 0.0
    for _ in range(15):
        res = bayes_check(mech, list(range(k)), random_joint_prior(rng, k, n))
        worst = max(worst, res.distance)
        assert res.distance <= math.expm1(eps) + 1e-12
    assert worst > 0.05 * math.expm1(eps)  # the check is not trivially zero


def test_correlated_prior_moves_beliefs_but_not_the_posterior_to_posterior_distance():
    # Smoking-study effect: if everyone's record is the same bit, the others' reports move the
    # adversary's belief about person i far, whether or not i's record is used.
    eps, n = 0.1, 8
    corr = np.zeros((2,) * n)
    corr[(0,) * n] = corr[(1,) * n] = 0.5
    corr = 0.999 * corr + 0.001 / 2**n
    indep = product_prior([[0.5, 0.5]] * n)  # same marginals, independent records
    c, i = bayes_check(RR(eps), [0, 1], corr), bayes_check(RR(eps), [0, 1], indep)
    bound = math.expm1(eps)
    assert c.distance <= bound and i.distance <= bound
    assert c.prior_shift > bound  # beyond anything DP bounds
    assert i.prior_shift <= Guarantee(eps).posterior(0.5) - 0.5 + 1e-12


def test_a_leaky_mechanism_fails_the_check():
    # publishes record 0 in the clear: not DP for any ε. Output 1 never occurs once record 0
    # is replaced by the default 0, so the two posteriors are as far apart as possible.
    def leak(dbs):
        return np.stack([dbs[:, 0] == 0, dbs[:, 0] == 1], axis=1).astype(float)

    res = bayes_check(leak, [0, 1], product_prior([[0.5, 0.5]] * 3))
    assert res.distance == 1.0 and res.record == 0 and res.transcript == 1


def test_callable_pmf_matches_the_built_in_randomized_response():
    eps, n = 0.7, 3
    t = math.exp(eps) / (math.exp(eps) + 1)
    outs = np.indices((2,) * n).reshape(n, -1).T

    def rr_pmf(dbs):
        return np.where(dbs[:, None, :] == outs[None], t, 1 - t).prod(axis=2)

    prior = random_joint_prior(rng_for_tests(3), 2, n)
    a, b = bayes_check(rr_pmf, [0, 1], prior), bayes_check(RR(eps), [0, 1], prior)
    assert a.distance == pytest.approx(b.distance, rel=1e-12)
    assert a.prior_shift == pytest.approx(b.prior_shift, rel=1e-12)


def test_the_library_mechanisms_can_be_checked():
    from bayesdp.mechanisms import DiscreteLaplace, RandomizedResponse

    prior = random_joint_prior(rng_for_tests(11), 2, 3)
    for mech, eps in ((RandomizedResponse(0.4), 0.4), (DiscreteLaplace(0.4), 0.4)):
        assert 0 < bayes_check(mech, [0, 1], prior).distance <= math.expm1(eps)


def test_bayes_check_bad_input():
    p3 = product_prior([[0.5, 0.5]] * 3)
    with pytest.raises(InvalidParameter, match="prior"):
        bayes_check(RR(1), [0, 1], np.full((2,) * 9, 2.0**-9))
    with pytest.raises(InvalidParameter, match="prior"):
        bayes_check(RR(1), [0, 1], p3 * 2)
    with pytest.raises(InvalidParameter, match="smaller world"):  # 3^8 × 3^8 cells
        bayes_check(RR(1, categories=3), [0, 1, 2], np.full((3,) * 8, 3.0**-8))
    with pytest.raises(InvalidParameter, match="records"):
        bayes_check(RR(1), [0], np.ones(1))
    with pytest.raises(InvalidParameter, match="records"):
        bayes_check(DLapCount(1.0), [0, 5], p3)  # range 5 exceeds the sensitivity 1
    with pytest.raises(InvalidParameter, match="default"):
        bayes_check(RR(1), [0, 1], p3, default=7)
    with pytest.raises(InvalidParameter, match="mechanism"):
        bayes_check(object(), [0, 1], p3)
    with pytest.raises(DataError, match="pmf"):
        bayes_check(lambda dbs: np.ones((len(dbs), 2)), [0, 1], p3)
    with pytest.raises(InvalidParameter, match="marginals"):
        product_prior([[0.5, 0.6]])
