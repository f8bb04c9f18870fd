"""Every candidate event counts, when rebuilt alone, exactly what its family counted."""

import numpy as np
import pytest

from bayesdp.audit.events import auto_families, interval_family, point_family, precision_family


def assert_consistent(family, s0, s1):
    for m in range(family.size):
        event = family.build(m)
        assert event.count(s0) == family.counts0[m], event.description
        assert event.count(s1) == family.counts1[m], event.description


@pytest.fixture
def floats():
    rng = np.random.default_rng(0)
    special = np.array([-np.inf, np.inf, np.nan, 0.0, 0.5])
    draw = lambda: np.concatenate([np.round(rng.normal(size=200), 1), special])  # noqa: E731
    return draw(), draw(), draw(), draw()


def test_intervals_points_and_precision_on_floats_with_specials(floats):
    b0, b1, s0, s1 = floats
    for make in (interval_family, point_family, precision_family):
        assert_consistent(make(b0, b1, s0, s1, None), s0, s1)


def test_point_masses_on_strings_and_whole_rows():
    rng = np.random.default_rng(1)
    words = np.array(["yes", "no", "maybe"])
    b0, b1, s0, s1 = (words[rng.integers(0, 3, 100)] for _ in range(4))
    assert_consistent(point_family(b0, b1, s0, s1, None), s0, s1)
    r0, r1, t0, t1 = (rng.integers(0, 2, (100, 3)) for _ in range(4))
    rows = point_family(r0, r1, t0, t1, None, rows=True)
    assert_consistent(rows, t0, t1)
    assert rows.build(0).description.startswith("output == [")


def test_all_distinct_values_give_no_point_family_and_columns_are_named():
    b = np.arange(10.0)
    assert point_family(b, b + 0.5, b, b, None) is None
    x = np.random.default_rng(2).integers(0, 3, (50, 2))
    described = {f.build(0).description.split(" ")[0] for f in auto_families(x, x, x, x)}
    assert described >= {"output[0]", "output[1]"}
