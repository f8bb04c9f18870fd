"""`bayesdp synth`: writes a synthetic CSV with the input's columns, a report, and clear errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from bayesdp import rng_for_tests
from bayesdp.cli import main
from bayesdp.synth.metrics import auc, marginal_tvd


def _table(path, n=2000):
    rng = rng_for_tests(40)
    a = rng.choice(["x", "y", "z"], n)
    df = pd.DataFrame({
        "a": a,
        "b": np.where(rng.random(n) < 0.8, a, np.where(rng.random(n) < 0.5, "x", None)),
        "age": rng.integers(18, 80, n),
        "label": np.where(a == "x", "yes", "no"),
    })
    df.to_csv(path, index=False)
    return df


def test_cli_writes_synthetic_rows_and_report(tmp_path, capsys):
    data = _table(tmp_path / "d.csv")
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"domain": {"a": ["x", "y", "z"]}}))
    out, rep = tmp_path / "syn.csv", tmp_path / "r.html"
    code = main(["synth", str(tmp_path / "d.csv"), "--epsilon", "2", "--out", str(out),
                 "--schema", str(schema), "--bounds", "age=18:80", "--domain", "b=x,y,z",
                 "--domain", "label=yes,no", "--rows", "500", "--report", str(rep),
                 "--target", "label"])
    assert code == 0
    syn = pd.read_csv(out)
    assert list(syn.columns) == list(data.columns) and len(syn) == 500
    assert syn["age"].between(18, 80).all()
    page = rep.read_text()
    assert "Not private" in page and "mean 2-way TVD" in page and page.count("<img") >= 5
    assert "Train on synthetic, test on real" in page
    printed = capsys.readouterr()
    assert "wrote 500 synthetic rows" in printed.out and "missing values included" in printed.out
    # The slow stages say what they are doing, on stderr.
    assert "fitting the mst synthesizer to 2,000 rows..." in printed.err
    assert "writing the fidelity report" in printed.err
    assert "training models of label on the synthetic and the real rows..." in printed.err


def test_cli_columns_subset(tmp_path):
    _table(tmp_path / "d.csv")
    out = tmp_path / "syn.csv"
    code = main(["synth", str(tmp_path / "d.csv"), "--epsilon", "1", "--out", str(out),
                 "--columns", "a,b", "--domain", "a=x,y,z", "b=x,y,z", "--method", "independent"])
    assert code == 0
    assert list(pd.read_csv(out).columns) == ["a", "b"]


def test_cli_seed_repeats_and_json_reports(tmp_path, capsys):
    _table(tmp_path / "d.csv", n=300)
    runs = []
    for i in range(2):
        out = tmp_path / f"syn{i}.csv"
        assert main(["synth", str(tmp_path / "d.csv"), "--epsilon", "1", "--out", str(out),
                     "--columns", "a,label", "--domain", "a=x,y,z", "label=yes,no", "--seed", "5",
                     "--json"]) == 0
        runs.append((pd.read_csv(out), json.loads(capsys.readouterr().out)))
    (first, doc), (second, _) = runs
    pd.testing.assert_frame_equal(first, second)
    assert doc["rows"] == len(first) and doc["columns"] == ["a", "label"] and doc["seeded"] is True
    assert doc["guarantee"]["epsilon"] == 1.0 and doc["out"] == str(tmp_path / "syn0.csv")
    assert any("NOT private" in w for w in doc["warnings"])


def test_cli_warnings_are_one_line_each(tmp_path, capsys):
    _table(tmp_path / "d.csv", n=300)
    assert main(["synth", str(tmp_path / "d.csv"), "--epsilon", "1", "--out", str(tmp_path / "s.csv"),
                 "--columns", "a,age", "--domain", "a=x,y,z", "--bounds", "age=18:80",
                 "--method", "independent"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert "warning: column 'age': 63 integer values in 16 cells, so a cell holds up to 4 values " \
           "and synthetic values spread evenly over them; pass bins >= 63 for one cell per value" in err
    assert not [line for line in err if "UserWarning" in line or ".py:" in line]


def test_cli_user_errors_exit_2(tmp_path, capsys):
    _table(tmp_path / "d.csv")
    out = str(tmp_path / "syn.csv")
    assert main(["synth", str(tmp_path / "d.csv"), "--epsilon", "1", "--out", out]) == 2
    assert "'age' is numeric and has no bounds" in capsys.readouterr().err
    assert main(["synth", str(tmp_path / "none.csv"), "--epsilon", "1", "--out", out]) == 2
    assert main(["synth", str(tmp_path / "d.csv"), "--epsilon", "1", "--out", out,
                 "--bounds", "age=18"]) == 2


def test_metrics_are_exact_on_known_tables():
    real = pd.DataFrame({"a": ["x", "x", "y", "y"], "b": ["u", "v", "u", "v"]})
    syn = pd.DataFrame({"a": ["x", "x", "x", "x"], "b": ["u", "u", "u", "u"]})
    assert marginal_tvd(real, syn, 2) == {("a", "b"): 0.75}
    assert marginal_tvd(real, syn, 1) == {("a",): 0.5, ("b",): 0.5}
    assert auc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])) == 0.75
