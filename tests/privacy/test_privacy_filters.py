"""Privacy filters: each admission rule against hand-computed values, PLD refused for adaptive
budgets, and the exact law of an adaptive adversary's transcript kept within the budget."""

import math

import numpy as np
import pytest

from bayesdp.errors import BudgetExceeded, InvalidParameter
from bayesdp.privacy import Guarantee, Noise, compose
from bayesdp.privacy.filters import (
    AdvancedFilter,
    BasicFilter,
    Filter,
    GdpFilter,
    ZcdpFilter,
    filter_for,
    gdp_delta,
    gdp_epsilon,
)
from bayesdp.privacy.ledger import Ledger


def gauss(sigma, sensitivity=1.0, repetitions=1):
    noise = Noise("gaussian", scale=sigma, sensitivity=sensitivity, repetitions=repetitions)
    return Guarantee(1.0, delta=1e-6, noise=(noise,))  # the stated (ε, δ) plays no part in gdp


def laplace(epsilon):
    return Guarantee(epsilon, noise=(Noise("laplace", scale=1 / epsilon, sensitivity=1.0),))


def test_basic_filter_adds_epsilon_and_delta():
    f = BasicFilter(Guarantee(1.0, delta=1e-6))
    assert f.admits([Guarantee(0.5, delta=5e-7), Guarantee(0.5, delta=5e-7)])
    assert not f.admits([Guarantee(0.5), Guarantee(0.5), Guarantee(1e-9)])
    assert not f.admits([Guarantee(0.1, delta=6e-7), Guarantee(0.1, delta=5e-7)])
    assert f.remaining([Guarantee(0.75, delta=2.5e-7)]) == Guarantee(0.25, delta=7.5e-7)


def test_zcdp_filter_adds_rho():
    f = ZcdpFilter(Guarantee.zcdp(0.5))
    assert f.rho == 0.5
    parts = [Guarantee.zcdp(0.25), Guarantee.zcdp(0.125), Guarantee.zcdp(0.125)]
    assert f.admits(parts)  # 0.5 exactly
    assert not f.admits([*parts, Guarantee.zcdp(2.0**-40)])
    # Laplace ε = 0.6 is ε²/2 = 0.18-zCDP, a Gaussian σ = 2, Δ = 1 is 1/8: 0.18 + 0.18 + 0.125 + 1/64
    assert f.admits([laplace(0.6), laplace(0.6), gauss(2.0), gauss(8.0)])
    assert not f.admits([laplace(0.6), laplace(0.6), gauss(2.0), gauss(2.0)])
    assert f.remaining([Guarantee.zcdp(0.375)]).rho == 0.125
    with pytest.raises(InvalidParameter, match=r"zcdp filter.*'advanced' or 'basic'"):
        f.check(Guarantee(0.1, delta=1e-9))


def test_gdp_filter_adds_mu_squared_against_the_budgets_mu():
    # 1-GDP is (1, δ)-DP for δ = Φ(−1/2) − e·Φ(−3/2) = 0.126936737... (Dong, Roth & Su, Cor. 2.13)
    budget = Guarantee(1.0, delta=0.1269367375066439)
    f = GdpFilter(budget)
    assert f.mu == pytest.approx(1.0, abs=1e-9)
    assert gdp_delta(1.0, 1.0) == pytest.approx(0.1269367375066439, rel=1e-12)
    three = [gauss(2.0)] * 3  # μ² = 3/4
    assert f.admits([*three, gauss(math.sqrt(5.0))])  # + 1/5 = 0.95
    assert not f.admits([*three, gauss(1 / 0.6)])  # + 0.36 = 1.11
    assert GdpFilter.mu_squared(gauss(4.0, sensitivity=2.0, repetitions=3)) == 0.75
    assert f.remaining(three).bound.startswith("μ=0.5-GDP")
    for refused in (laplace(0.1), Guarantee(0.1, delta=1e-9),
                    Guarantee(1.0, noise=(Noise("discrete_gaussian", scale=3.0, sensitivity=1.0),)),
                    Guarantee(1.0, noise=(Noise("gaussian", scale=3.0, sensitivity=1.0, grid=0.5),))):
        with pytest.raises(InvalidParameter, match="not allowed under the gdp filter"):
            f.check(refused)


def test_advanced_filter_is_whitehouse_et_al_bound():
    # δ'' = δ/2 = 5e-7, ln(1/δ'') = 14.5086577385; √(2·14.5087·Σε²) + Σε²/2 ≤ 1 iff Σε² ≤ 0.0333234
    f = AdvancedFilter(Guarantee(1.0, delta=1e-6))
    assert f.variance == pytest.approx(0.0333233534, rel=1e-9)
    assert f.bound(0.0325) == pytest.approx(0.98736418, rel=1e-8)
    assert f.admits([Guarantee(0.05)] * 13)  # Σε² = 0.0325, where basic would need ε ≥ 0.65
    assert not f.admits([Guarantee(0.05)] * 14)  # 0.035: bound 1.0253
    assert f.admits([Guarantee(0.05, delta=2.5e-7)] * 2)
    assert not f.admits([Guarantee(0.05, delta=2.5e-7)] * 3)  # Σδ = 7.5e-7 > δ' = 5e-7
    assert f.remaining([Guarantee(0.05)] * 13).epsilon == pytest.approx(math.sqrt(0.0333233534 - 0.0325))


def test_advanced_filter_has_the_constants_of_advanced_composition():
    """Whitehouse, Ramdas, Rogers & Wu 2023 (Thm 3.2) match, adaptively, the bound k fixed ε₀-DP
    steps get in advance through zCDP: ε₀-DP is ε₀²/2-zCDP (Bun & Steinke 2016, Prop. 3.3), ρ
    adds up (Lemma 2.3), and ρ-zCDP is (ρ + 2√(ρ ln 1/δ''), δ'')-DP (Prop. 1.3); and at least
    as tight as Dwork, Rothblum & Vadhan's √(2k ln 1/δ'')ε₀ + kε₀(e^ε₀ − 1) (Dwork & Roth 2014,
    Thm 3.20)."""
    f = AdvancedFilter(Guarantee(1.0, delta=1e-6))
    log_inv = math.log(1 / 5e-7)
    for k, e0 in ((1, 0.2), (13, 0.05), (100, 0.01), (333, 0.01), (10_000, 0.001)):
        rho = k * e0 * e0 / 2
        assert f.bound(k * e0 * e0) == pytest.approx(rho + 2 * math.sqrt(rho * log_inv), rel=1e-12)
        assert f.bound(k * e0 * e0) <= math.sqrt(2 * k * log_inv) * e0 + k * e0 * math.expm1(e0)
    # ε₀ = 0.01 under (1, 1e-6): k·1e-4 ≤ 0.0333233 admits 333 steps, where basic admits 100
    assert f.admits([Guarantee(0.01)] * 333) and not f.admits([Guarantee(0.01)] * 334)


def test_gdp_filter_composes_as_dong_roth_su_and_converts_as_the_analytic_gaussian():
    """Four Gaussian spends with Δ/σ = 1/2 are √(4 · 1/4) = 1-GDP (Dong, Roth & Su 2022, Cor.
    3.3), adaptively too (Smith & Thakurta 2022, Thm 1); 1-GDP is the Gaussian mechanism with
    σ = Δ, whose exact δ(ε) is Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ) (Balle & Wang 2018, Thm 8),
    and μ-GDP is μ²/2-zCDP (its Rényi divergences are the Gaussian pair's, αμ²/2)."""
    from scipy.stats import norm

    delta = 1e-5
    f = GdpFilter(Guarantee(gdp_epsilon(1.0, delta), delta=delta))
    assert f.mu == pytest.approx(1.0, rel=1e-9)
    four = [gauss(2.0)] * 4
    total = f.total(four)
    assert total.bound.startswith("μ=1-GDP") and total.rho == 0.5
    eps = total.epsilon
    assert float(norm.cdf(0.5 - eps) - math.exp(eps) * norm.cdf(-0.5 - eps)) == pytest.approx(delta, rel=1e-6)
    assert f.admits([*[gauss(2.0)] * 3, gauss(2.01)]) and not f.admits([*four, gauss(100.0)])


def test_a_ledger_refuses_pld_and_says_why(tmp_path):
    with pytest.raises(InvalidParameter, match=r"'pld' is not allowed.*not a valid privacy filter.*"
                                               r"'zcdp' \(Rényi filter.*compose\(\.\.\., method='pld'\)"):
        Ledger(tmp_path / "p.db", budget=Guarantee(2.9, delta=1e-5), accounting="pld")
    assert not (tmp_path / "p.db").exists()
    with pytest.raises(InvalidParameter, match="not a valid privacy filter"):
        filter_for("pld", Guarantee(1.0, delta=1e-6))


def test_the_natural_pld_filter_fails_on_an_adaptive_analyst_and_every_filter_refuses_it(tmp_path):
    """Randomized response with ε₁ = 0.0015 on one person's bit; after a 1 the analyst asks for
    RR with ε = 1.0005, after a 0 for a (0, 9e-4) release (it shows the bit with probability
    9e-4). Each path composes under (1, 1e-3) by PLD, which the former ledger checked, yet the
    adaptive transcript is not (1, 1e-3)-DP."""
    def rr(eps):
        noise = Noise("randomized_response", epsilon=eps, categories=2)
        return Guarantee(eps, relation="replace_one", noise=(noise,))

    e1, e2, shown, budget = 0.0015, 1.0005, 9e-4, Guarantee(1.0, delta=1e-3, relation="replace_one")
    after_one, after_zero = [rr(e1), rr(e2)], [rr(e1), Guarantee(0.0, delta=shown, relation="replace_one")]
    assert compose(after_one, "pld", 1e-3).epsilon <= 1.0  # 0.99946: the natural filter admits it
    assert compose(after_zero, "pld", 1e-3).epsilon <= 1.0
    # the exact transcript law: P on D (the bit is 1), Q on D' (it is 0)
    p1, p2 = (math.exp(e) / (1 + math.exp(e)) for e in (e1, e2))
    laws = [(p1 * p2, (1 - p1) * (1 - p2)), (p1 * (1 - p2), (1 - p1) * p2),  # 1, then RR
            ((1 - p1) * shown, 0.0), (0.0, p1 * shown), ((1 - p1) * (1 - shown), p1 * (1 - shown))]
    delta = math.fsum(max(0.0, p - math.e * q) for p, q in laws)
    assert delta == pytest.approx(0.00118064, rel=1e-5) and delta > budget.delta
    with pytest.raises(InvalidParameter, match="not a valid privacy filter"):
        Ledger(tmp_path / "pld.db", budget=budget, accounting="pld")
    for accounting in ("basic", "zcdp", "advanced"):
        led = Ledger(tmp_path / f"{accounting}.db", budget=budget, accounting=accounting)
        with pytest.raises(BudgetExceeded):
            for i, g in enumerate(after_one):
                led.spend(g, f"rr{i}")
    with pytest.raises(InvalidParameter, match="gdp filter"):
        Ledger(tmp_path / "gdp.db", budget=budget, accounting="gdp").spend(rr(e1), "rr")


def test_a_ledger_names_its_filter_in_what_it_reports(tmp_path):
    led = Ledger(tmp_path / "g.db", budget=Guarantee(1.0, delta=0.1269367375066439), accounting="gdp")
    led.spend(gauss(2.0), "first")
    assert "Gaussian DP filter (Smith & Thakurta 2022" in str(led.spent())
    assert str(led.spent()).startswith("ρ=0.125-zCDP") and "μ=0.5-GDP" in str(led.spent())
    assert "μ=0.866025-GDP" in str(led.remaining())
    assert led.history()[0].bound == led.filter.title
    assert "Gaussian DP filter" in led.spent().explain()
    with pytest.raises(InvalidParameter, match="gdp filter"):
        led.spend(laplace(0.01), "laplace")
    with pytest.raises(BudgetExceeded, match=r"remaining: .*μ=0\.866025-GDP"):
        led.spend(gauss(1.0), "too much")
    assert len(led.history()) == 1
    basic = Ledger(tmp_path / "b.db", budget=Guarantee(1.0))
    assert "basic composition filter (Rogers, Roth, Ullman & Vadhan 2016)" in str(basic.spent())


# -- an adaptive adversary, exactly ------------------------------------------------------

UNIT = 0.01  # the adversary asks for ε = 0.01 or 0.02, so privacy losses are exact multiples
SPAN = 800  # losses from −8 to 8 (in UNITs): beyond what any case here reaches


def _loss_laws(rule: Filter | None, rounds: int) -> np.ndarray:
    """The exact law under D of the privacy loss L = ln(P_D(t)/P_D'(t)) of the transcript t.

    The adversary runs ε-DP randomized response on one person's bit (1 in D, 0 in D'): after
    a 1 (and at first) it proposes ε = 0.02, else 0.01, and when `rule` refuses it proposes
    0.01; it halts when both are refused, or after `rounds` (with no rule, it runs them all).
    Transcripts with the same spends, last answer and loss behave alike from then on, so they
    are merged into one state (without a rule, only the last answer matters)."""
    live = {(0, 0, 1): np.zeros(2 * SPAN + 1)}
    live[0, 0, 1][SPAN] = 1.0
    done = np.zeros(2 * SPAN + 1)
    for _ in range(rounds):
        nxt: dict = {}
        for (twos, ones, last), law in live.items():
            offers = (2, 1) if last == 1 else (1,)
            fits = [e for e in offers
                    if rule is None or _admits(rule, twos + (e == 2), ones + (e == 1))]
            if not fits:
                done += law
                continue
            e = fits[0]
            keep = math.exp(e * UNIT) / (1 + math.exp(e * UNIT))  # the true bit is answered
            key = (twos + (e == 2), ones + (e == 1)) if rule else (0, 0)
            for bit, prob, step in ((1, keep, e), (0, 1 - keep, -e)):
                target = nxt.setdefault((*key, bit), np.zeros(2 * SPAN + 1))
                target += prob * np.roll(law, step)
        live = nxt
    return done + sum(live.values(), np.zeros(2 * SPAN + 1))


_ADMITS: dict = {}


def _admits(rule, twos, ones):
    key = (id(rule), twos, ones)
    if key not in _ADMITS:
        _ADMITS[key] = rule.admits([Guarantee(2 * UNIT)] * twos + [Guarantee(UNIT)] * ones)
    return _ADMITS[key]


def _delta(law: np.ndarray, epsilon: float) -> float:
    """The exact δ at ε of the two transcript laws (Dwork & Roth 2014, Def. 2.4), both ways:
    Σ_t max(0, P − e^ε Q) with Q = P·e^−L, and Σ_t max(0, Q − e^ε P)."""
    loss = (np.arange(law.size) - SPAN) * UNIT
    forward = np.sum(law * np.maximum(0.0, -np.expm1(epsilon - loss)))
    backward = np.sum(law * np.maximum(0.0, np.exp(-loss) - math.exp(epsilon)))
    return float(max(forward, backward))


@pytest.mark.parametrize(("rule", "budget", "rounds"), [
    (BasicFilter, Guarantee(0.5), 150),
    (AdvancedFilter, Guarantee(1.0, delta=1e-6), 400),
    (ZcdpFilter, Guarantee(0.5, delta=1e-6), 400),
])
def test_the_halting_rule_keeps_the_budget_for_an_adaptive_adversary(rule, budget, rounds):
    law = _loss_laws(rule(budget), 10**4)
    assert law.sum() == pytest.approx(1.0, abs=1e-9) and law[0] == law[-1] == 0
    reached = np.flatnonzero(law)
    top = (reached.max() - SPAN) * UNIT  # basic reaches its ε; the others let losses pass it
    assert top >= 0.99 * budget.epsilon if rule is BasicFilter else top > 1.2 * budget.epsilon
    assert _delta(law, budget.epsilon) <= budget.delta
    # the same adversary unfiltered for as many rounds breaks the budget: the check can fail
    assert _delta(_loss_laws(None, rounds), budget.epsilon) > budget.delta + 1e-8
