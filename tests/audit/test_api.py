"""audit / audit_pairs: arguments, given events, vector outputs, pair search and the report."""

import numpy as np
import pytest

import bayesdp
from bayesdp.audit import AuditResult, Event, audit, audit_pairs
from bayesdp.errors import DataError, InvalidParameter
from bayesdp.noise import rng_for_tests

ALPHA = 1e-6


def clamped_sum(upper, epsilon=1.0):
    """Sum of records clamped to [0, upper] plus Laplace noise for sensitivity 1."""
    laplace = bayesdp.Laplace(epsilon, sensitivity=1.0)

    def mechanism(records, size, rng):
        total = float(np.clip(np.asarray(records, dtype=float), 0.0, upper).sum())
        return laplace.release(np.full(size, total), rng=rng)

    return mechanism


def test_given_event_skips_the_search():
    mech = bayesdp.Laplace(1.0)
    event = Event("output <= 0", contains=lambda out: out <= 0)
    result = audit(mech, 0.0, 1.0, epsilon=1.0, events=[event], samples=10**5, alpha=ALPHA,
                   rng=rng_for_tests(11))
    assert isinstance(result, AuditResult)
    assert result.event == "output <= 0" and result.selection == 0 and result.candidates == 1
    assert (result.first, result.second) == (0.0, 1.0)
    assert result.passed  # false failure <= α


def test_audit_pairs_reports_the_worst_pair():
    pairs = [([], [0.5]), ([0.2], [0.2, 0.4]), ([], [2.0])]
    broken = audit_pairs(clamped_sum(2.0), pairs, epsilon=1.0, samples=10**5, alpha=ALPHA,
                         rng=rng_for_tests(12))
    # Clamping to [0, 2] with noise for sensitivity 1: the pair ([], [2.0]) has true ε = 2,
    # and thresholds at 10^5 runs bound it above 1.5 (shortfall ≈ 0.1, see test_broken).
    assert not broken.passed and broken.epsilon_lower > 1.5
    assert {repr(broken.first), repr(broken.second)} == {"[]", "[2.0]"}
    fixed = audit_pairs(clamped_sum(1.0), pairs, epsilon=1.0, samples=10**5, alpha=ALPHA,
                        rng=rng_for_tests(13))
    assert fixed.passed  # false failure <= α


def test_vector_outputs_use_columns_and_whole_rows():
    def pattern(x, size, rng):  # two coins whose agreement, not either coin, reveals x
        a = rng.integers(0, 2, size)
        return np.stack([a, np.where(rng.random(size) < 0.9, a ^ x, 1 - (a ^ x))], axis=1)

    result = audit(pattern, 0, 1, epsilon=1.0, samples=10**5, alpha=ALPHA, rng=rng_for_tests(14))
    # P(rows equal | x=0) = 0.9 vs 0.1: ε = ln 9 = 2.2; each column alone is uniform.
    assert not result.passed and result.epsilon_lower > 2.0
    assert result.event.startswith("output in {") or result.event.startswith("output == [")


def test_progress_reaches_the_total():
    seen = []
    audit(bayesdp.Laplace(1.0), 0.0, 1.0, epsilon=1.0, samples=20_000, selection=10_000,
          rng=rng_for_tests(15), progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (2 * 20_000 + 2 * 10_000,) * 2
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_report_in_words():
    result = audit(bayesdp.Laplace(1.0), 0.0, 1.0, epsilon=1.0, samples=10**4,
                   rng=rng_for_tests(16))
    text = str(result)
    assert text.startswith("PASSED") and "95% confidence" in text and result.event in text


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": 1.0, "delta": 1.0}, "delta"),
        ({"epsilon": 1.0, "samples": 0}, "samples"),
        ({"epsilon": 1.0, "alpha": 0.0}, "alpha"),
        ({"epsilon": 1.0, "events": "all"}, "events"),
        ({"epsilon": 1.0, "events": []}, "events"),
        ({"epsilon": 1.0, "selection": 1}, "selection"),
        ({"epsilon": 1.0, "grid": -1.0}, "grid"),
        ({"epsilon": 1.0, "reachable": 3}, "reachable"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, name):
    with pytest.raises(InvalidParameter, match=name):
        audit(bayesdp.Laplace(1.0), 0.0, 1.0, samples=kwargs.pop("samples", 100), **kwargs)


def test_bad_mechanisms_and_inputs():
    with pytest.raises(InvalidParameter, match="mechanism"):
        audit(42, 0, 1, epsilon=1.0)
    with pytest.raises(InvalidParameter, match="callable"):
        audit(bayesdp.Laplace(1.0), [0, 1], [0, 2], epsilon=1.0, samples=100)
    with pytest.raises(DataError, match="one output per run"):
        audit(lambda x, size, rng: np.zeros(size + 1), 0, 1, epsilon=1.0, samples=100)
    with pytest.raises(InvalidParameter, match="pairs"):
        audit_pairs(bayesdp.Laplace(1.0), [], epsilon=1.0)
    bad = Event("broken", contains=lambda out: np.zeros(3))
    with pytest.raises(DataError, match="one boolean per output"):
        audit(bayesdp.Laplace(1.0), 0, 1, epsilon=1.0, samples=100, events=[bad])


def test_several_given_events_are_searched():
    def shifted(x, size, rng):  # on the integers except input 1, which leaves them by 0.5
        return rng.integers(0, 4, size) + 0.5 * x

    useless = Event("output > 100", contains=lambda out: out > 100)
    off = Event("output is fractional", contains=lambda out: out % 1 != 0)
    result = audit(shifted, 0, 1, epsilon=1.0, events=[useless, off], samples=10**4,
                   alpha=ALPHA, rng=rng_for_tests(17))
    # "fractional" has probability 1 vs 0: ε_LB = ln(10^4/14.5) = 6.5.
    assert result.event == "output is fractional" and not result.passed
    assert (result.first, result.second) == (1, 0) and result.candidates == 4


def test_declared_grid_catches_what_other_events_cannot():
    def tenths(x, size, rng):  # multiples of 0.1; input 1 moves 30% of them half a step
        return rng.integers(0, 10**6, size) * 0.1 + np.where(rng.random(size) < 0.3 * x, 0.05, 0)

    result = audit(tenths, 0, 1, epsilon=1.0, grid=0.1, samples=10**4, alpha=ALPHA,
                   rng=rng_for_tests(18))
    # Off the 0.1 lattice with probability 0.3 vs 0: ε_LB ≈ ln(3,000/14.5) = 5.3.
    assert not result.passed and result.epsilon_lower > 4
    assert result.event == "output is not a multiple of the declared grid 0.1"


def test_none_outputs_count_as_nan_and_other_objects_are_refused():
    def refusing(x, size, rng):  # answers 1.0 w.p. 0.3 on input 0; refuses it (None) on input 1
        r = rng.random(size)
        out = np.where(r < 0.5, 1.0, 0.0).astype(object)
        out[r < 0.2 + 0.3 * x] = None
        return out

    result = audit(refusing, 0, 1, epsilon=1.0, samples=10**4, alpha=ALPHA, rng=rng_for_tests(19))
    # "output == 1.0" has probability 0.3 vs 0: ε_LB ≈ ln(3,000/14.5) = 5.3.
    assert not result.passed and result.epsilon_lower > 4 and result.counts[1] == 0
    with pytest.raises(DataError, match="numbers"):
        audit(lambda x, size, rng: np.array([{}] * size), 0, 1, epsilon=1.0, samples=100)
