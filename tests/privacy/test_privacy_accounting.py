"""compose(): basic, advanced, zCDP, RDP and PLD, checked against formulas and dp-accounting."""

import math
from dataclasses import dataclass, field

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import rdp_privacy_accountant
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq
from scipy.stats import norm

from bayesdp.errors import InvalidParameter
from bayesdp.privacy import Guarantee, Noise, compose, zcdp_epsilon, zcdp_epsilon_simple

Rel = rdp_privacy_accountant.NeighborRel


@dataclass
class FakeNoise:
    """The mechanism interface compose() reads: noise, scale, sensitivity, guarantee."""

    noise: str
    scale: float
    sensitivity: float
    epsilon: float
    grid: float | None = None
    guarantee: Guarantee = field(init=False)

    def __post_init__(self):
        noise = Noise(self.noise, scale=self.scale, sensitivity=self.sensitivity, grid=self.grid)
        self.guarantee = Guarantee(self.epsilon, noise=(noise,))


def laplace(b, sens=1.0, grid=None):
    steps = sens if grid is None else (math.floor(sens / grid) + 1) * grid
    return FakeNoise("laplace", b, sens, steps / b, grid)


@dataclass
class FakeGaussian:
    scale: float
    sensitivity: float = 1.0
    noise: str = "gaussian"

    @property
    def guarantee(self):
        # an (ε, δ) statement; the accountants must use the noise, not these numbers
        noise = Noise(self.noise, scale=self.scale, sensitivity=self.sensitivity)
        return Guarantee(5.0, delta=1e-5, noise=(noise,))


@dataclass
class FakeRR:
    epsilon: float
    categories: int = 2
    noise: str = "randomized_response"

    @property
    def guarantee(self):
        noise = Noise(self.noise, epsilon=self.epsilon, categories=self.categories)
        return Guarantee(self.epsilon, relation="replace_one", noise=(noise,))


def gdp_delta(eps, mu):
    """δ(ε) of μ-GDP, exact for Gaussian noise (Dong, Roth & Su 2022, Cor. 2.13)."""
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def gdp_epsilon(mu, delta):
    return brentq(lambda e: gdp_delta(e, mu) - delta, 0, 100)


def test_basic_sums_and_rejects_delta():
    g = compose([Guarantee(0.1, delta=1e-7)] * 10)
    assert g.epsilon == 1.0 and g.delta == pytest.approx(1e-6, rel=1e-15)
    with pytest.raises(InvalidParameter, match="delta"):
        compose([Guarantee(1)], delta=1e-6)
    with pytest.raises(InvalidParameter, match="delta"):
        compose([Guarantee(1, delta=0.6)] * 2)


@pytest.mark.parametrize(
    ("items", "method", "delta", "name"),
    [
        ([], "basic", None, "items"),
        ([object()], "basic", None, "items"),
        ([Guarantee(1)], "fancy", 1e-6, "method"),
        ([Guarantee(1)], "advanced", None, "delta"),
        ([Guarantee(1)], "pld", 0.0, "delta"),
        ([Guarantee(1)], "zcdp", 1.5, "delta"),
        ([Guarantee(1), Guarantee(1, unit="user")], "pld", 1e-6, "unit"),
        ([Guarantee(1), Guarantee(1, relation="replace_one")], "zcdp", 1e-6, "relation"),
        ([Guarantee(1, delta=1e-6)], "zcdp", 1e-6, "zCDP"),
        ([Guarantee(1, delta=1e-6)], "rdp", 1e-6, "zCDP"),
        ([Guarantee(1, delta=1e-3)], "pld", 1e-6, "delta"),
    ],
)
def test_bad_compositions_name_the_problem(items, method, delta, name):
    with pytest.raises(InvalidParameter, match=name):
        compose(items, method, delta)


def test_advanced_matches_drv_formula_and_never_loses_to_basic():
    k, eps, slack = 100, 0.1, 1e-6
    g = compose([Guarantee(eps, delta=1e-9)] * k, "advanced", slack)
    drv = math.sqrt(2 * k * math.log(1 / slack)) * eps + k * eps * math.expm1(eps)
    assert g.epsilon == pytest.approx(drv, rel=1e-12)
    assert g.delta == pytest.approx(k * 1e-9 + slack, rel=1e-12)
    assert g.epsilon < 10.0
    few = compose([Guarantee(1.0)] * 2, "advanced", slack)
    assert (few.epsilon, few.delta) == (2.0, 0.0)


@pytest.mark.parametrize("rho", [1e-6, 1e-3, 0.1, 1.0, 30.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-6, 1e-2])
def test_tight_zcdp_conversion(rho, delta):
    tight, simple = zcdp_epsilon(rho, delta), zcdp_epsilon_simple(rho, delta)
    assert tight <= simple
    # against dp-accounting's conversion of the same RDP curve on a dense grid of orders
    orders = 1 + np.geomspace(1e-3, 1e6, 20000)
    ref, _ = rdp_privacy_accountant.compute_epsilon(orders, rho * orders, delta)
    assert tight <= ref + 1e-12
    assert tight == pytest.approx(ref, rel=1e-4, abs=1e-9)
    # the Gaussian with Δ/σ = √(2ρ) is exactly ρ-zCDP: its true δ at the reported ε is <= δ
    assert gdp_delta(tight, math.sqrt(2 * rho)) <= delta * (1 + 1e-9)


def test_zcdp_composition_adds_rho():
    items = [FakeGaussian(2.0), FakeGaussian(4.0, 2.0), Guarantee(0.2), Guarantee.zcdp(0.05)]
    g = compose(items, "zcdp", 1e-6)
    rho = 1 / 8 + 4 / 32 + 0.02 + 0.05
    assert g.rho == pytest.approx(rho, rel=1e-14)
    assert g.epsilon == pytest.approx(zcdp_epsilon(rho, 1e-6), rel=1e-14)
    assert g.delta == 1e-6


def test_rdp_agrees_with_dp_accounting():
    items = [FakeGaussian(3.0)] * 5 + [laplace(2.0)] * 3
    g = compose(items, "rdp", 1e-6)
    acc = rdp_privacy_accountant.RdpAccountant()
    acc.compose(dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(3.0), 5))
    acc.compose(dp_event.SelfComposedDpEvent(dp_event.LaplaceDpEvent(2.0), 3))
    assert g.epsilon == pytest.approx(acc.get_epsilon(1e-6), rel=1e-12)
    rr = compose([FakeRR(0.3, 3)] * 40, "rdp", 1e-6)
    acc = rdp_privacy_accountant.RdpAccountant(neighboring_relation=Rel.REPLACE_ONE)
    acc.compose(dp_event.RandomizedResponseDpEvent(3 / (math.exp(0.3) + 2), 3), 40)
    assert rr.epsilon == pytest.approx(acc.get_epsilon(1e-6), rel=1e-12)
    assert rr.epsilon < 12.0
    assert rr.relation == "replace_one"


def test_pld_agrees_with_dp_accounting_and_the_exact_gaussian():
    g = compose([FakeGaussian(10.0)] * 20, "pld", 1e-6)
    acc = pld_privacy_accountant.PLDAccountant()
    acc.compose(dp_event.GaussianDpEvent(10.0), 20)
    assert g.epsilon == pytest.approx(acc.get_epsilon(1e-6), rel=1e-5)
    exact = gdp_epsilon(math.sqrt(20) / 10.0, 1e-6)  # Gaussian composition is exact in GDP
    assert exact <= g.epsilon <= exact + 0.01
    lap = compose([laplace(10.0)] * 30, "pld", 1e-6)
    acc = pld_privacy_accountant.PLDAccountant()
    acc.compose(dp_event.LaplaceDpEvent(10.0), 30)
    assert lap.epsilon == pytest.approx(acc.get_epsilon(1e-6), rel=1e-5)
    assert lap.epsilon < compose([laplace(10.0)] * 30, "advanced", 1e-6).epsilon <= 3.0
    rr = compose([FakeRR(0.2)] * 40, "pld", 1e-6)
    acc = pld_privacy_accountant.PLDAccountant(Rel.REPLACE_ONE)
    for _ in range(40):  # dp-accounting 0.6.0's PLDAccountant ignores `count` for RR events
        acc.compose(dp_event.RandomizedResponseDpEvent(2 / (math.exp(0.2) + 1), 2))
    assert rr.epsilon == pytest.approx(acc.get_epsilon(1e-6), rel=1e-5)
    assert rr.epsilon < 8.0


def test_plain_guarantees_enter_pld_through_their_parameters():
    g = compose([Guarantee(0.1, delta=1e-8)] * 50, "pld", 1e-6)
    assert g.epsilon < compose([Guarantee(0.1, delta=1e-8)] * 50, "advanced", 1e-6 - 5e-7).epsilon
    assert g.delta == 1e-6


def test_lattice_noise_is_accounted_in_grid_steps():
    # values rounded to a grid of 0.5 move by up to floor(1/0.5) + 1 = 3 steps, not 2
    m = laplace(3.0, sens=1.0, grid=0.5)
    assert m.guarantee.epsilon == pytest.approx(0.5)
    steps = m.guarantee.noise[0].steps
    assert steps == (6.0, 3.0)
    two = compose([m, m], "pld", 1e-12)
    assert two.epsilon == pytest.approx(1.0, abs=2e-3)  # the full 2ε: a lower value would be wrong


@dataclass
class LatticeGaussian:
    scale: float
    sensitivity: float
    grid: float = 1.0
    noise: str = "gaussian"

    @property
    def guarantee(self):
        noise = Noise(self.noise, scale=self.scale, sensitivity=self.sensitivity, grid=self.grid)
        return Guarantee(5.0, delta=1e-5, noise=(noise,))


@pytest.mark.parametrize(
    ("mech", "exact"),
    [
        # values on a grid of 1 that move by floor(Δ) + 1 = 10,000 steps, b = 40,000 steps
        (
            laplace(40000.0, sens=9999.0, grid=1.0),
            lambda: pld_lib.from_discrete_laplace_mechanism(
                1 / 40000.0, 10000, value_discretization_interval=1e-4, use_connect_dots=True
            ),
        ),
        (
            LatticeGaussian(2000.0, 99.0),
            lambda: pld_lib.from_discrete_gaussian_mechanism(
                2000.0, 100, value_discretization_interval=1e-4, use_connect_dots=True
            ),
        ),
    ],
    ids=["laplace", "gaussian"],
)
def test_fine_lattices_match_the_exact_discrete_pld(mech, exact):
    # Privacy losses on these lattices are < 1e-4 apart, finer than the PLD's discretization,
    # so compose() uses the continuous law in grid steps; dp-accounting's exact discrete PLD
    # (costly for the real, much finer grids) gives the same ε, never a larger one.
    ours = compose([mech] * 10, "pld", 1e-6).epsilon
    reference = exact().self_compose(10).get_epsilon_for_delta(1e-6)
    assert reference - 1e-9 <= ours <= reference + 1e-4


def test_mixed_items_and_real_mechanisms():
    from bayesdp.mechanisms import DiscreteGaussian, DiscreteLaplace, Gaussian, Laplace

    items = [Laplace(0.3), DiscreteLaplace(0.3), Gaussian(rho=0.02), DiscreteGaussian(rho=0.02)]
    for method in ("basic", "zcdp", "rdp", "pld"):
        g = compose([*items, Guarantee(0.1)], method, None if method == "basic" else 1e-6)
        assert 0 < g.epsilon <= compose([*items, Guarantee(0.1)]).epsilon
    # a fine lattice is accounted like its continuous law in grid units: same figures
    assert compose([Laplace(0.3)] * 4, "pld", 1e-9).epsilon == pytest.approx(
        compose([laplace(1 / 0.3)] * 4, "pld", 1e-9).epsilon, abs=1e-3
    )


finite_eps = st.floats(0.0, 2.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(finite_eps, min_size=1, max_size=8), finite_eps)
def test_composition_is_monotone(eps, extra):
    gs = [Guarantee(e) for e in eps]
    more = [*gs, Guarantee(extra)]
    for method, delta in (("basic", None), ("advanced", 1e-6), ("zcdp", 1e-6)):
        assert compose(gs, method, delta).epsilon <= compose(more, method, delta).epsilon + 1e-12
    assert compose(more).epsilon >= max(eps)


def test_a_guarantee_of_several_noises_composes_as_all_of_them():
    """(laplace ×3, gaussian) in one guarantee accounts exactly as the four items apart."""
    lap = Noise("laplace", scale=5.0, sensitivity=1.0, repetitions=3)
    gauss = Noise("gaussian", scale=4.0, sensitivity=1.0)
    composite = Guarantee(0.6 + 5.0, delta=1e-5, noise=(lap, gauss))  # as the items apart state
    apart = [laplace(5.0)] * 3 + [FakeGaussian(4.0)]
    for method in ("zcdp", "rdp", "pld"):
        assert compose([composite], method, 1e-6).epsilon == pytest.approx(
            compose(apart, method, 1e-6).epsilon, rel=1e-9), method
    # a noise the accountants do not know makes the guarantee count by its stated ε, δ
    selection = Guarantee(1.0, noise=(Noise("exponential", scale=2.0, sensitivity=1.0), lap))
    assert compose([selection] * 2, "pld", 1e-6).epsilon == pytest.approx(2.0, abs=2e-3)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"family": "cauchy", "scale": 1.0, "sensitivity": 1.0}, "family"),
        ({"family": "laplace", "scale": 0.0, "sensitivity": 1.0}, "scale"),
        ({"family": "gaussian", "scale": 1.0, "sensitivity": -1.0}, "sensitivity"),
        ({"family": "laplace", "scale": 1.0, "sensitivity": 1.0, "repetitions": 0}, "repetitions"),
        ({"family": "randomized_response", "epsilon": 1.0, "categories": 1}, "categories"),
    ],
)
def test_bad_noise_descriptions_name_the_parameter(kwargs, name):
    with pytest.raises(InvalidParameter, match=name):
        Noise(**kwargs)
    with pytest.raises(InvalidParameter, match="noise"):
        Guarantee(1.0, noise=Noise("laplace", scale=1.0, sensitivity=1.0))
