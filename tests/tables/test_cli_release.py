"""`bayesdp release`: spec file, output files, one-line errors."""

import json

import pandas as pd

from bayesdp import Ledger
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


def _years(tmp_path, events):
    """The events with an integer key column, and a spec grouped by it."""
    data, spec = tmp_path / "events.csv", tmp_path / "spec.toml"
    events.assign(year=1988 + events["user_id"] % 3).to_csv(data, index=False)
    spec.write_text(SPEC.replace('group_by = ["campaign"]', 'group_by = ["year"]')
                    .replace('keys = ["alpha", "beta", "gamma"]', "keys = [1988, 1989, 1990]"))
    return str(data), str(spec)


def test_release_prints_integer_keys_as_integers(events, tmp_path, capsys):
    data, spec = _years(tmp_path, events)
    assert main(["release", data, "--spec", spec]) == 0
    out = capsys.readouterr().out
    assert "│ 1988 │" in out and "1988.0" not in out


def test_release_seed_and_json(events, tmp_path, capsys):
    """--json prints one document; --seed repeats the noise and says the run is not private."""
    data, spec = _years(tmp_path, events)
    docs = []
    for _ in range(2):
        assert main(["release", data, "--spec", spec, "--seed", "7", "--json"]) == 0
        docs.append(json.loads(capsys.readouterr().out))
    doc = docs[0]
    assert docs[1]["rows"] == doc["rows"] and doc["seeded"] is True
    assert doc["columns"] == ["year", "users", "users_low", "users_high", "revenue", "revenue_low",
                              "revenue_high"]
    assert [r[0] for r in doc["rows"]] == [1988, 1989, 1990]
    assert all(lo <= v <= hi for r in doc["rows"] for v, lo, hi in (r[1:4], r[4:7]))
    assert doc["guarantee"]["epsilon"] == 1.0 and doc["guarantee"]["unit"] == "user_id"
    assert doc["alpha"] == 0.05 and doc["caveats"]
    assert any("seeded run: NOT private" in w for w in doc["warnings"])
    assert main(["release", data, "--spec", spec, "--seed", "8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] != doc["rows"]


def test_release_json_writes_date_keys_in_iso_format(events, tmp_path, capsys):
    data, spec = tmp_path / "events.parquet", tmp_path / "spec.toml"
    day = pd.Timestamp("2020-01-01") + pd.to_timedelta(events["user_id"] % 2, "D")
    events.assign(day=day).to_parquet(data)
    # Private keys: the groups are found in the data, so the keys keep the column's date type.
    spec.write_text(SPEC.replace('group_by = ["campaign"]', 'group_by = ["day"]')
                    .replace('keys = ["alpha", "beta", "gamma"]', "delta = 1e-6"))
    assert main(["release", str(data), "--spec", str(spec), "--json", "--seed", "2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted(r[0] for r in doc["rows"]) == ["2020-01-01T00:00:00", "2020-01-02T00:00:00"]


def test_release_dry_run_previews_and_spends_nothing(events, tmp_path, capsys):
    data, spec = _years(tmp_path, events)
    ledger = str(tmp_path / "l.db")
    assert main(["ledger", "init", ledger, "--epsilon", "5", "--unit", "user_id"]) == 0
    capsys.readouterr()
    assert main(["release", data, "--spec", spec, "--ledger", ledger, "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "expected accuracy" in out and "half_width" in out and "nothing spent" in out
    assert main(["release", data, "--spec", spec, "--ledger", ledger, "--dry-run", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = [dict(zip(doc["columns"], r, strict=True)) for r in doc["rows"]]
    assert [r["aggregate"] for r in rows] == ["users", "revenue"] and doc["spent"] is False
    assert rows[0]["half_width"] > 0 and doc["guarantee"]["epsilon"] == 1.0
    assert Ledger(ledger).history() == []


def test_release_warnings_are_one_line_each(events, tmp_path, capsys):
    data, spec = _years(tmp_path, events)
    assert main(["release", data, "--spec", spec, "--seed", "1"]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    warned = [line for line in err if line.startswith("warning: ")]
    assert any(line.startswith("warning: seeded run: NOT private") for line in warned)
    # bounding drops rows (users in up to 6 rows, one kept per group): a curator-only warning
    assert any(line.startswith("warning: curator only") for line in warned)
    assert not [line for line in err if "Warning:" in line or ".py:" in line]
