"""The CLI at the edges of its parameters: a one-line error (exit 2) or a valid, finite result."""

import json
import math
import warnings

import pandas as pd

from bayesdp import Ledger
from bayesdp.cli import main


def _no_constants(name: str) -> float:
    raise AssertionError(f"{name} is not JSON")


def test_explain_json_is_finite_at_huge_epsilon(capsys):
    assert main(["explain", "--epsilon", "800", "--delta", "1e-6", "--n", "100", "--json"]) == 0
    report = json.loads(capsys.readouterr().out, parse_constant=_no_constants)
    assert math.isfinite(report["semantic"]["epsilon"])


def test_correlated_with_tiny_epsilon_is_a_one_line_error(capsys):
    assert main(["correlated", "--transition", "0.9,0.1;0.2,0.8", "--length", "100",
                 "--epsilon", "1e-300"]) == 2
    err = capsys.readouterr().err
    assert "epsilon=1e-300" in err and "Traceback" not in err


def test_release_refuses_an_unknown_output_format_before_spending(tmp_path, capsys):
    data, spec, ledger = tmp_path / "d.csv", tmp_path / "s.toml", tmp_path / "l.db"
    pd.DataFrame({"u": [1, 2, 3], "v": [1.0, 2.0, 3.0]}).to_csv(data, index=False)
    spec.write_text('privacy_unit = "u"\nepsilon = 1.0\n[aggregates]\nn = { kind = "count" }\n')
    out = tmp_path / "out.xlsx"
    assert main(["ledger", "init", str(ledger), "--epsilon", "10", "--unit", "u"]) == 0
    code = main(["release", str(data), "--spec", str(spec), "--out", str(out),
                 "--ledger", str(ledger)])
    err = capsys.readouterr().err
    assert code == 2 and "--out" in err and ".parquet" in err and not out.exists()
    assert Ledger(ledger).history() == []


def test_release_spec_with_huge_epsilon_is_a_one_line_error(tmp_path, capsys):
    data, spec = tmp_path / "d.csv", tmp_path / "s.toml"
    pd.DataFrame({"u": [1, 2, 3], "v": [1.0, 2.0, 3.0]}).to_csv(data, index=False)
    spec.write_text('privacy_unit = "u"\nepsilon = 1e300\n[aggregates]\n'
                    'm = { kind = "mean", column = "v", bounds = [0, 5] }\n')
    assert main(["release", str(data), "--spec", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "epsilon" in err and "Traceback" not in err


def test_a_warning_prints_as_one_line(capsys):
    from bayesdp.commands.output import warnings_as_lines
    from bayesdp.errors import CuratorWarning

    with warnings_as_lines():
        warnings.warn("dropped 3 rows\n  of 10", CuratorWarning, stacklevel=1)
    assert capsys.readouterr().err == "warning: dropped 3 rows of 10\n"
