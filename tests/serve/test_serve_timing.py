"""Time is an output: paired timings of the same request when a row matches and when none does,
through the service in process (holdout queries, spec releases, SQL releases).

Each test times 30 pairs, in an order shuffled by a fixed seed, and fails when a two-sided
Mann-Whitney test separates the two arms at p < 1e-6. On the code before the deadlines the
attacks below separate completely (p about 3e-11 for 30 against 30). When both arms' times come
from one distribution, as the padding intends, p < 1e-6 happens with probability at most 1e-6
(the test's level), so that is the false-failure probability; a residual difference smaller
than the jitter makes failing more likely, which is what the test is for.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy.stats import mannwhitneyu
from serve_helpers import add_analyst
from starlette.testclient import TestClient

from bayesdp.serve.app import create_app
from bayesdp.serve.config import load_config

PAIRS = 30
LEVEL = 1e-6
ROWS = 400
TOP = 90_000  # the largest wage: `wage >= TOP` matches one row, `wage >= TOP + 1` none
NAME = "a" * 1000

CONFIG = """
state = "state"
rate_per_minute = 100000
timing = { slack = 0.05 }

[datasets.pay]
source = "pay.csv"
privacy_unit = false
budget = { epsilon = 100.0, delta = 1e-6 }
[datasets.pay.columns]
wage = { bounds = [0, 100000] }
name = { domain = ["NAME"] }

[holdouts.model]
train = "train.csv"
holdout = "holdout.csv"
threshold = 0.04
sigma = 0.01
budget = 1000
"""

# A string grown 100,000-fold by nested replace (100 MB) on the row that matches.
GROWN = "length(" + "replace(" * 5 + "name" + ", 'a', 'aaaaaaaaaa')" * 5 + ")"
# Within the checker's limits (16 times the column): admitted, so the padding must hide it.
CAPPED = "length(" + "replace(" * 4 + "name" + ", 'a', 'aa')" * 4 + ")"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    root = tmp_path_factory.mktemp("timing")
    rng = np.random.default_rng(11)
    wage = rng.integers(1_000, 60_000, ROWS)
    wage[-3] = TOP  # in the holdout half
    frame = pd.DataFrame({"wage": wage, "name": NAME})
    frame.to_csv(root / "pay.csv", index=False)
    frame.iloc[: ROWS // 2].to_csv(root / "train.csv", index=False)
    frame.iloc[ROWS // 2:].to_csv(root / "holdout.csv", index=False)
    (root / "service.toml").write_text(CONFIG.replace("NAME", NAME))
    token = add_analyst(root / "service.toml", "ann")
    app = create_app(load_config(root / "service.toml"))
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as c:
        yield c


def paired(client: TestClient, path: str, body: Any) -> tuple[list[float], list[float], set[int]]:
    """Times of `body(TOP)` (a row matches) and `body(TOP + 1)` (none), alternated in a shuffled
    order, after one untimed request of each; and the statuses seen."""
    for v in (TOP, TOP + 1):
        client.post(path, json=body(v))
    order = np.random.default_rng(5).permutation([0, 1] * PAIRS)
    times: tuple[list[float], list[float]] = ([], [])
    statuses = set()
    for arm in order:
        start = time.perf_counter()
        r = client.post(path, json=body(TOP + int(arm)))
        times[arm].append(time.perf_counter() - start)
        statuses.add(r.status_code)
    return *times, statuses


def assert_not_separable(match: list[float], none: list[float]) -> None:
    p = mannwhitneyu(match, none, alternative="two-sided").pvalue
    assert p >= LEVEL, (f"the time tells whether a row matches: p = {p:.2g}; median "
                        f"{np.median(match) * 1e3:.1f} ms (a row matches) vs {np.median(none) * 1e3:.1f} ms")


def holdout(expression: str) -> Any:
    return lambda v: {"queries": [f"CASE WHEN wage >= {v} THEN {expression} ELSE 0 END > 0"]}


def spec(expression: str) -> Any:
    return lambda v: {"dataset": "pay", "spec": {"epsilon": 1e-6, "aggregates": {"x": {
        "kind": "sum", "column": f"CASE WHEN wage >= {v} THEN {expression} ELSE 0 END", "bounds": [0, 1]}}}}


def sql(expression: str) -> Any:
    return lambda v: {"dataset": "pay", "epsilon": 1e-6, "sql": "SELECT COUNT(*) FROM pay WHERE "
                      f"CASE WHEN wage >= {v} THEN {expression} ELSE 0 END > 0"}


PATHS = {"holdout": ("/v1/holdouts/model/queries", holdout), "spec": ("/v1/releases", spec),
         "sql": ("/v1/releases", sql)}


@pytest.mark.parametrize("kind", list(PATHS))
def test_a_grown_string_on_a_matching_row_does_not_show_in_the_time(client: TestClient, kind: str) -> None:
    path, body = PATHS[kind]
    match, none, statuses = paired(client, path, body(GROWN))
    assert_not_separable(match, none)
    assert statuses == {400}  # refused before anything runs: the string could grow a million-fold


@pytest.mark.slow  # 62 requests of about half a second: the costly branch must cost that on main
@pytest.mark.parametrize("kind", list(PATHS))
def test_the_costly_branch_on_every_row_does_not_show_in_the_time(client: TestClient, kind: str) -> None:
    path, body = PATHS[kind]
    # `wage >= 0` takes the costly branch on every row, `wage >= TOP + 1` on none.
    match, none, _ = paired(client, path, lambda v: body(CAPPED)(0 if v == TOP else v))
    assert_not_separable(match, none)
