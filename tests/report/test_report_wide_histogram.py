"""A report's plots cost time linear in a histogram's bins, not an artist per bin."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayesdp as bdp
from bayesdp.report import write_release_report


@pytest.mark.timeout(30)  # 48 s with an errorbar per bin
def test_a_report_of_ten_thousand_bins_is_written_in_seconds(tmp_path: Path) -> None:
    frame = pd.DataFrame({"x": np.random.default_rng(1).uniform(0, 10, 500)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = bdp.table(frame, None).agg(h=bdp.histogram("x", bins=10_000, bounds=(0, 10))).release(
            1.0, rng=bdp.rng_for_tests(1))
    page = write_release_report(r, tmp_path / "r.html").read_text(encoding="utf-8")
    assert page.count("data:image/png;base64,") == 1 and "h[9.999, 10]" in page
