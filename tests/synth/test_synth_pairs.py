"""`synthesize` on neighbouring tables (one row added): it spends first, and then the outcome
(an error or not, its kind and message, the guarantee, the columns and their levels, what the
ledger holds) is the same on both; only DP values (the fitted model, the noisy count, the
sample) and the data holder's diagnostics (`dropped`, `clipped`) may differ."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from bayesdp import rng_for_tests
from bayesdp.errors import DataError
from bayesdp.privacy import Guarantee
from bayesdp.privacy.ledger import Ledger
from bayesdp.synth import synthesize
from bayesdp.synth.tabular import METHODS, check_fit

ARGS: dict[str, Any] = {"bounds": {"x": (0, 10)}, "domain": {"y": ["a", "b"]}}


def frame(x: list[float], y: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"x": pd.Series(x, dtype=float), "y": pd.Series(y, dtype=object)})


# Each pair: a table, and the same table with one row added that changes what a fit reads.
PAIRS = {
    "no rows, then one": (frame([], []), frame([1.0], ["a"])),
    "every row outside the domain, then one inside": (frame([1.0, 2.0], ["z", "z"]),
                                                     frame([1.0, 2.0, 3.0], ["z", "z", "b"])),
    "a missing number added": (frame([1.0, 2.0], ["a", "b"]), frame([1.0, 2.0, np.nan], ["a", "b", "a"])),
}


def outcome(data: pd.DataFrame, method: str, path: Path) -> tuple[Any, ...]:
    """What an observer sees besides DP values, and whether the spend came first."""
    ledger = Ledger(path, budget=Guarantee(10.0, delta=1e-6))
    try:
        syn = synthesize(data, 1.0, 1e-9, method=method, ledger=ledger, rng=rng_for_tests(7), **ARGS)
        seen: tuple[Any, ...] = ("fitted", syn.guarantee, syn.columns,
                                 [None if s.levels is None else list(s.levels) for s in syn.specs],
                                 list(syn.sample(3, rng=rng_for_tests(8)).columns))
    except Exception as exc:  # an error is an outcome too: it must be the same on both
        seen = ("failed", type(exc).__name__, str(exc))
    return (*seen, [(e.label, e.guarantee) for e in ledger.history()])


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("pair", list(PAIRS))
def test_neighbouring_tables_give_the_same_outcome(tmp_path: Path, pair: str, method: str) -> None:
    small, large = PAIRS[pair]
    one, other = outcome(small, method, tmp_path / "a.db"), outcome(large, method, tmp_path / "b.db")
    assert one == other
    assert one[0] == "fitted" and len(one[-1]) == 1  # spent once, then a defined result


def test_the_data_holder_still_learns_at_start_up_that_nothing_can_be_fitted() -> None:
    for data in (frame([], []), frame([1.0, np.nan], ["z", "a"])):
        with pytest.raises(DataError, match=r"no rows|every row"):
            check_fit(data, **ARGS)
    check_fit(frame([1.0, np.nan], ["a", "b"]), **ARGS)  # one row left to fit
