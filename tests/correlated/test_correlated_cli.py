"""`bayesdp correlated`: figures of the worked example, JSON output, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bayesdp.cli import main


def test_json_figures(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["correlated", "--transition", "0.9,0.1;0.2,0.8", "--length", "100",
                 "--epsilon", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert round(report["sigma"], 3) == 22.298
    assert report["laplace_scale_per_bin"] == pytest.approx(2 * report["sigma"])
    assert report["group_dp_sigma"] == 100 and report["gk16_sigma"] is None
    assert report["nearby"] == 17 and len(report["quilt"]) == 2
    path = tmp_path / "p.npy"
    np.save(path, np.array([[0.9, 0.1], [0.2, 0.8]]))
    assert main(["correlated", "--transition", str(path), "--length", "100", "--epsilon", "1",
                 "--notion", "bdp", "--json"]) == 0
    assert round(json.loads(capsys.readouterr().out)["sigma"], 3) == 24.575


def test_text_and_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["correlated", "--transition", "0.5,0.5;0.5,0.5", "--length", "10",
                 "--epsilon", "1"]) == 0
    assert "GK16" in capsys.readouterr().out
    assert main(["correlated", "--transition", "0.9,0.2;0.2,0.8", "--length", "10",
                 "--epsilon", "1"]) == 2
    assert "row 0 sum" in capsys.readouterr().err
    assert main(["correlated", "--transition", "a,b", "--length", "10", "--epsilon", "1"]) == 2
    assert "transition" in capsys.readouterr().err
    assert main(["correlated", "--transition", str(tmp_path / "missing.csv"), "--length", "10",
                 "--epsilon", "1"]) == 2
    assert main(["correlated", "--transition", "0.9,0.1;0.2,0.8", "--length", "10",
                 "--epsilon", "0"]) == 2
    assert "epsilon" in capsys.readouterr().err
