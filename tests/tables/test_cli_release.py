"""`bayesdp release`: spec file, output files, one-line errors."""

import pandas as pd

from bayesdp.cli import main

SPEC = """
privacy_unit = "user_id"
group_by = ["campaign"]
keys = ["alpha", "beta", "gamma"]
max_groups_per_unit = 2
epsilon = 1.0
[aggregates]
users = { kind = "count_units" }
revenue = { kind = "mean", column = "revenue", bounds = [0, 100] }
"""


def test_release_command_writes_table_and_report(events, tmp_path, capsys):
    data, spec = tmp_path / "events.parquet", tmp_path / "spec.toml"
    events.to_parquet(data)
    spec.write_text(SPEC)
    out, report = tmp_path / "out.csv", tmp_path / "r.html"
    code = main(["release", str(data), "--spec", str(spec), "--epsilon", "2", "--out", str(out),
                 "--report", str(report)])
    assert code == 0
    df = pd.read_csv(out)
    assert list(df["campaign"]) == ["alpha", "beta", "gamma"]
    assert {"users", "users_low", "revenue_high"} <= set(df.columns)
    assert "ε=2 per user_id" in capsys.readouterr().out
    assert "<img" in report.read_text()


def test_release_command_with_rows_as_units(events, tmp_path, capsys):
    data, spec = tmp_path / "events.csv", tmp_path / "spec.toml"
    events.to_csv(data, index=False)
    spec.write_text(SPEC.replace('privacy_unit = "user_id"', "privacy_unit = false")
                    .replace("max_groups_per_unit = 2", ""))
    assert main(["release", str(data), "--spec", str(spec)]) == 0
    assert "ε=1 per row" in capsys.readouterr().out
    spec.write_text(SPEC.replace('privacy_unit = "user_id"', "privacy_unit = 3"))
    assert main(["release", str(data), "--spec", str(spec)]) == 2
    assert "privacy_unit = false" in " ".join(capsys.readouterr().err.split())


def test_release_command_errors_are_one_line(events, tmp_path, capsys):
    data, spec = tmp_path / "events.csv", tmp_path / "spec.toml"
    events.to_csv(data, index=False)
    spec.write_text(SPEC.replace('column = "revenue"', 'column = "revenu"'))
    assert main(["release", str(data), "--spec", str(spec)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "did you mean 'revenue'" in err and "Traceback" not in err
    assert main(["release", str(tmp_path / "missing.csv"), "--spec", str(spec)]) == 2
    assert "does not exist" in " ".join(capsys.readouterr().err.split())
    spec.write_text("privacy_unit = 'user_id'\n[aggregates]\nn = { kind = 'count' }\n")
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    assert main(["release", str(bad), "--spec", str(spec), "--epsilon", "1"]) == 2
    assert "cannot read" in " ".join(capsys.readouterr().err.split())
    # Fixes name the spec's keys and the command's flags.
    spec.write_text(SPEC.replace('keys = ["alpha", "beta", "gamma"]\n', ""))
    assert main(["release", str(data), "--spec", str(spec)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--delta 1e-6" in err and "keys=[...] in group_by or in the spec" in err
    spec.write_text(SPEC.replace("max_groups_per_unit = 2\n", ""))
    assert main(["release", str(data), "--spec", str(spec)]) == 2
    assert "max_groups_per_unit is required" in " ".join(capsys.readouterr().err.split())


def test_release_spec_filters_are_checked(events, tmp_path, capsys):
    """A spec's `where` is a Table.where filter: row-local, refused before any data is read."""
    data, spec = tmp_path / "events.csv", tmp_path / "spec.toml"
    events.to_csv(data, index=False)
    spy = "(SELECT count(*) FROM bdp_source WHERE user_id = 42) > 0"
    for where, named in ((f"where = {spy!r}", "subquery"), (f"where = ['revenue >= 0', {spy!r}]", "subquery"),
                         ("where = [1]", "a SQL expression")):
        spec.write_text(where + "\n" + SPEC)
        assert main(["release", str(data), "--spec", str(spec)]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert err.startswith("error: condition") and named in err and "Traceback" not in err
    spec.write_text("where = ['revenue >= 0 -- ; DROP TABLE x', \"campaign <> 'zeta'\"]\n" + SPEC)
    assert main(["release", str(data), "--spec", str(spec)]) == 0
