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


def test_a_ledger_says_what_share_of_its_budget_each_filter_has_used(tmp_path):
    # The share is in the filter's own sums, which add up where ε does not (zCDP: Σρ).
    basic = Ledger(tmp_path / "b.db", budget=Guarantee(1.0, delta=1e-6))
    assert basic.used() == 0.0 and basic.count() == 0
    basic.spend(Guarantee(0.25), "a")
    assert basic.used() == 0.25
    basic.spend(Guarantee(0.25, delta=6e-7), "b")
    assert basic.used() == pytest.approx(0.6, rel=1e-12) and basic.count() == 2  # δ: 0.6 of it
    zcdp = Ledger(tmp_path / "z.db", budget=Guarantee.zcdp(1.0, delta=1e-6), accounting="zcdp")
    zcdp.spend(Guarantee.zcdp(0.3, delta=1e-6), "a")
    assert zcdp.used() == pytest.approx(0.3, rel=1e-12)
    assert zcdp.spent().epsilon / zcdp.budget.epsilon > 0.45  # ε would say almost half is gone
    gdp = Ledger(tmp_path / "g.db", budget=Guarantee(1.0, delta=0.1269367375066439), accounting="gdp")
    gdp.spend(gauss(2.0), "a")  # μ = 0.5 of a budget μ = 1: a quarter of Σμ²
    assert gdp.used() == pytest.approx(0.25, rel=1e-9)
    advanced = Ledger(tmp_path / "a.db", budget=Guarantee(1.0, delta=1e-6), accounting="advanced")
    advanced.spend(Guarantee(0.1), "a")
    assert advanced.used() == pytest.approx(0.01 / advanced.filter.variance, rel=1e-12)
    with pytest.raises(BudgetExceeded):
        while True:
            advanced.spend(Guarantee(0.1), "more")
    assert 1 - 0.01 / advanced.filter.variance < advanced.used() <= 1
    assert advanced.count() == len(advanced.history())
    assert filter_for("basic", Guarantee(1.0)).used_of((0.0, 1e-9, 0.0, 1.0)) == 1.0  # δ of a pure budget


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


# -- the papers' statements on concrete figures ------------------------------------------


def _rruv_halts(spends, budget, log_in_h):
    """Rogers, Roth, Ullman & Vadhan 2016, Thm 5.1, their advanced-composition filter: halt if
    Σδ > δ_g/2 or K > ε_g, K = Σε(e^ε − 1)/2 + √((Σε² + H)(2 + ln(Σε²/H + 1)) ln(2/δ_g)), H =
    ε_g²/(28.04 ln(c/δ_g)); the conference version has c = 1, arXiv v2 c = 2 (both checked)."""
    eg, dg = budget.epsilon, budget.delta
    squares = math.fsum(g.epsilon ** 2 for g in spends)
    h = eg * eg / (28.04 * math.log(log_in_h / dg))
    k = (math.fsum(g.epsilon * math.expm1(g.epsilon) / 2 for g in spends)
         + math.sqrt((squares + h) * (2 + math.log(squares / h + 1)) * math.log(2 / dg)))
    return math.fsum(g.delta for g in spends) > dg / 2 or k > eg


def _steps(admits, e0, limit=100_000):
    """How many ε₀-DP steps a halting rule lets through (it only grows with the steps)."""
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if admits([Guarantee(e0)] * mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


@pytest.mark.parametrize("e0", [0.2, 0.05, 0.01, 0.001])
def test_whitehouse_et_al_filter_admits_more_than_rogers_et_al_and_basic_only_for_many_steps(e0):
    """Whitehouse, Ramdas, Rogers & Wu 2023 (Thm 3.2) improve on the advanced-composition filter
    of Rogers, Roth, Ullman & Vadhan 2016 (Thm 5.1): at the same budget it lets through at least
    as many ε₀-DP steps. Against the basic filter (RRUV 2016: k·ε₀ ≤ ε_g) both pay a √ln(1/δ)
    factor, so basic wins for a few large steps and loses for many small ones: under (1, 1e-6)
    basic admits 5 steps of 0.2, Thm 3.2 none (one step alone is bound to 1.0974); 20 of 0.05
    against 13; at 0.001 basic admits 1,000 and Thm 3.2 33,323 (Σε₀² ≤ 0.0333234)."""
    budget = Guarantee(1.0, delta=1e-6)
    whitehouse = _steps(AdvancedFilter(budget).admits, e0)
    basic = _steps(BasicFilter(budget).admits, e0)
    for c in (1, 2):
        rruv = _steps(lambda spends, c=c: not _rruv_halts(spends, budget, c), e0)
        assert rruv <= whitehouse
    assert basic == round(1 / e0)
    expected = {0.2: 0, 0.05: 13, 0.01: 333, 0.001: 33_323}[e0]
    assert whitehouse == expected
    assert (whitehouse > basic) == (e0 <= 0.01)
    assert AdvancedFilter(budget).bound(0.04) == pytest.approx(1.0974, abs=1e-4)


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 0.99])
@pytest.mark.parametrize("k", [10, 1000, 100_000])
def test_advanced_filter_admits_what_dwork_roth_corollary_3_21_allows_in_advance(epsilon, k):
    """Dwork & Roth 2014, Cor. 3.21: for 0 < ε < 1, k mechanisms each (ε', δ')-DP with ε' =
    ε/(2√(2k ln(1/δ))) compose to (ε, kδ' + δ)-DP when k is fixed in advance. The filter of
    Whitehouse et al. 2023 (Thm 3.2) with budget (ε, kδ' + δ), δ = kδ' = 1e-6, admits the same
    k steps chosen adaptively, and refuses k steps of 2ε': the corollary sits within a factor 2
    of the filter's edge."""
    slack = 1e-6
    step = epsilon / (2 * math.sqrt(2 * k * math.log(1 / slack)))
    f = AdvancedFilter(Guarantee(epsilon, delta=2 * slack))
    assert f.slack == slack
    assert f.admits([Guarantee(step, delta=slack / k)] * k)
    assert not f.admits([Guarantee(2 * step)] * k)


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("epsilon", [0.0, 0.5, 1.0, 3.0])
def test_gdp_delta_is_dong_roth_su_corollary_2_13_as_dp_accounting_computes_it(mu, epsilon):
    """δ(ε) of μ-GDP (Dong, Roth & Su 2022, Cor. 2.13) is the Gaussian mechanism's with σ/Δ =
    1/μ (their Thm 2.7): dp-accounting's closed form for that mechanism, an independent code."""
    from dp_accounting.pld.privacy_loss_mechanism import GaussianPrivacyLoss

    loss = GaussianPrivacyLoss(standard_deviation=1 / mu, sensitivity=1.0)
    assert gdp_delta(epsilon, mu) == pytest.approx(loss.get_delta_for_epsilon(epsilon), rel=1e-9)


@pytest.mark.parametrize("k", [1, 10, 100])
def test_gdp_filter_admits_exactly_the_smallest_gaussian_noise_dp_accounting_finds(k):
    """Under a budget (1, 1e-5) the GDP filter (Smith & Thakurta 2022, Thm 1; μ composes as
    √Σμ², Dong, Roth & Su 2022, Cor. 3.3) admits k Gaussian spends at the smallest σ for which
    dp-accounting finds k non-adaptive queries (1, 1e-5)-DP, σ = 3.7306·√k (the analytic
    Gaussian of Balle & Wang 2018 for k = 1), and refuses them 1e-6 below it."""
    from dp_accounting.pld import accountant, common

    budget = Guarantee(1.0, delta=1e-5)
    sigma = accountant.get_smallest_gaussian_noise(common.DifferentialPrivacyParameters(1.0, 1e-5), k)
    assert sigma / math.sqrt(k) == pytest.approx(3.7306, abs=1e-4)
    f = GdpFilter(budget)
    assert f.admits([gauss(sigma * (1 + 1e-9))] * k)
    assert not f.admits([gauss(sigma * (1 - 1e-6))] * k)


def test_gdp_filter_total_is_dp_accounting_pld_of_the_same_gaussians_fixed_in_advance():
    """Heterogeneous Gaussian spends, Δ/σ = 1/2, 1/2, 1/4: √Σμ² = √(9/16) = 0.75
    (Dong, Roth & Su 2022, Cor. 3.3); its ε at δ = 1e-6 (Cor. 2.13) is what dp-accounting's PLD
    composition of the same mechanisms gives when they are fixed in advance (within the PLD's
    discretization, which errs up)."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    sigmas = [2.0, 2.0, 4.0]
    spends = [gauss(s) for s in sigmas]
    f = GdpFilter(Guarantee(3.0, delta=1e-6))
    total = f.total(spends)
    assert total.bound.startswith("μ=0.75-GDP") and total.rho == 0.75**2 / 2
    pld = None
    for s in sigmas:
        part = pld_lib.from_gaussian_mechanism(s, value_discretization_interval=1e-5)
        pld = part if pld is None else pld.compose(part)
    eps = pld.get_epsilon_for_delta(1e-6)
    assert eps - 1e-3 <= total.epsilon <= eps


@pytest.mark.parametrize("rho", [0.01, 0.125, 0.5, 2.0])
def test_zcdp_filter_total_is_the_renyi_conversion_of_feldman_zrnic_at_its_best_order(rho):
    """A ρ-zCDP interaction is (α, αρ)-RDP at every order α (Feldman & Zrnic 2021, Thm 3.1, the
    filter at each α), hence (αρ + ln(1/δ)/(α − 1), δ)-DP (Mironov 2017, Prop. 3), whose best α
    gives ρ + 2√(ρ ln 1/δ) (Bun & Steinke 2016, Prop. 1.3); the filter reports the tighter
    ε of CKS 2020 (Prop. 12), which dp-accounting's RDP accountant reproduces on a fine grid of
    orders from the same Gaussian spends (RDP α/2σ², Mironov 2017, Prop. 7)."""
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    delta = 1e-6
    sigma = math.sqrt(1 / (2 * rho / 4))  # four spends of ρ/4 each
    total = ZcdpFilter(Guarantee(10.0, delta=delta)).total([gauss(sigma)] * 4)
    assert total.rho == pytest.approx(rho, rel=1e-12)
    mironov = min(a * rho + math.log(1 / delta) / (a - 1) for a in np.linspace(1.001, 2000, 400_000))
    assert mironov == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1 / delta)), rel=1e-5)
    acc = rdp.RdpAccountant(orders=list(np.linspace(1.001, 400, 200_000)))
    acc.compose(dp_event.GaussianDpEvent(sigma), 4)
    assert total.epsilon < mironov
    assert total.epsilon == pytest.approx(acc.get_epsilon(delta), rel=1e-6)
