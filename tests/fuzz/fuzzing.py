"""Shared pieces of the fuzz suite: the hypothesis settings and the one property every public
entry point must have: it raises a bayesdp error or returns a finite, valid result."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from bayesdp.errors import BayesdpError

# Derandomized and bounded, so the suite is reproducible and runs in about a minute on 2 cores.
FUZZ = settings(derandomize=True, max_examples=60, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
SLOW_FUZZ = settings(FUZZ, max_examples=25)
# The CLI tests read capsys after every call, so one fixture instance serves all examples.
CLI_FUZZ = settings(SLOW_FUZZ, suppress_health_check=[HealthCheck.too_slow,
                                                      HealthCheck.function_scoped_fixture])

# Numbers at and beyond every documented edge: zero, subnormals, the ranges' ends, overflow.
EDGES = [0.0, -1.0, 5e-324, 1e-300, 1e-30, 1e-12, 1e-9, 0.5, 1.0, 2.0, 700.0, 710.0, 800.0,
         1e100, 1e200, 6.7e307, 1e308, math.inf, -math.inf, math.nan]
numbers = st.one_of(st.sampled_from(EDGES), st.floats(allow_nan=True, allow_infinity=True))
positive = st.one_of(st.sampled_from([x for x in EDGES if not x < 1e-300]),
                     st.floats(min_value=1e-15, max_value=1e15))
probabilities = st.one_of(st.sampled_from([0.0, 5e-324, 1e-300, 1e-12, 1e-6, 0.05, 0.5, 0.999999,
                                           1.0, 1.5, -0.1, math.nan]),
                          st.floats(min_value=0.0, max_value=1.0))
counts = st.one_of(st.sampled_from([0, -1, 1, 2, 3, 10**9, 2**63, 10**30]),
                   st.integers(min_value=1, max_value=50))
value_arrays = st.lists(st.one_of(st.sampled_from([0.0, 1.0, -1.0, 1e300, -1e300]),
                                  st.floats(min_value=-1e6, max_value=1e6)),
                        min_size=1, max_size=8)


def assert_finite(result: Any) -> None:
    """Every number reachable from `result` is finite (arrays, frames, dataclasses, containers)."""
    if result is None or isinstance(result, str | bool):
        return
    if isinstance(result, int | float | np.number):
        assert math.isfinite(float(result)), result
    elif isinstance(result, np.ndarray):
        if result.dtype.kind in "fc":
            assert np.all(np.isfinite(result)), result
    elif isinstance(result, pd.DataFrame):
        numeric = result.select_dtypes("number")
        assert np.all(np.isfinite(numeric.to_numpy(dtype=float))), result
    elif isinstance(result, dict):
        for v in result.values():
            assert_finite(v)
    elif isinstance(result, list | tuple):
        for v in result:
            assert_finite(v)
    elif dataclasses.is_dataclass(result) and not isinstance(result, type):
        for f in dataclasses.fields(result):
            assert_finite(getattr(result, f.name))


def error_or_finite(call: Callable[[], Any]) -> Any:
    """Run `call`: a bayesdp error is a valid refusal; anything else must be finite."""
    try:
        result = call()
    except BayesdpError as exc:
        assert str(exc), "a bayesdp error says what is wrong"
        return None
    assert_finite(result)
    return result
