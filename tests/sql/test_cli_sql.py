"""`bayesdp sql`: both dialects, output like `bayesdp release`, refusals with a caret, no traceback."""

import json

import pandas as pd
import pytest

from bayesdp import Ledger
from bayesdp.cli import main

META = """
[tables.events]
privacy_unit = "user_id"
max_groups_per_unit = 3
epsilon = 1.0
delta = 1e-6
[tables.events.columns.revenue]
bounds = [0, 100]
[tables.events.columns.campaign]
keys = ["spring", "summer", "fall"]
"""


def test_plain_sql_with_metadata_writes_table_and_report(events, tmp_path, capsys):
    data, meta = tmp_path / "events.parquet", tmp_path / "meta.toml"
    events.to_parquet(data)
    meta.write_text(META)
    out, report = tmp_path / "out.csv", tmp_path / "r.html"
    query = "SELECT campaign, COUNT(*) AS n, AVG(revenue) AS avg_rev FROM events GROUP BY campaign"
    code = main(["sql", query,
                 "--table", f"events={data}", "--metadata", str(meta), "--out", str(out),
                 "--report", str(report)])
    assert code == 0
    df = pd.read_csv(out)
    assert list(df.columns) == ["campaign", "n", "n_low", "n_high", "avg_rev", "avg_rev_low", "avg_rev_high"]
    assert list(df["campaign"]) == ["spring", "summer", "fall"]
    assert "per user_id" in capsys.readouterr().out
    assert "<img" in report.read_text()


def test_bigquery_clause_and_ledger(events, tmp_path, capsys):
    data = tmp_path / "events.csv"
    events.to_csv(data, index=False)
    assert main(["ledger", "init", str(tmp_path / "b.db"), "--epsilon", "5", "--delta", "1e-5",
                 "--unit", "user_id"]) == 0
    query = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, delta = 1e-6, "
             "privacy_unit_column = user_id) COUNT(DISTINCT user_id) AS people FROM events")
    assert main(["sql", query, "--table", f"events={data}", "--ledger", str(tmp_path / "b.db")]) == 0
    assert "people" in capsys.readouterr().out
    assert main(["ledger", "show", str(tmp_path / "b.db")]) == 0
    assert "spent: ε=0.5 per user_id" in capsys.readouterr().out


def test_refusal_shows_a_caret_and_no_traceback(events, tmp_path, capsys):
    data, meta = tmp_path / "events.parquet", tmp_path / "meta.toml"
    events.to_parquet(data)
    meta.write_text(META)
    code = main(["sql", "SELECT campaign, COUNT(*) FROM events\nJOIN other USING (user_id) GROUP BY campaign",
                 "--table", f"events={data}", "--metadata", str(meta)])
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "JOIN is not supported" in err and "column 6" in err
    text, caret = err.rstrip("\n").splitlines()[-2:]
    assert text[caret.index("^"):].startswith("other USING")


def test_bad_table_argument(tmp_path, capsys):
    assert main(["sql", "SELECT COUNT(*) FROM events", "--table", "events.parquet"]) == 2
    assert "NAME=PATH" in capsys.readouterr().err


def test_unwritable_output_fails_before_the_spend(events, tmp_path, capsys):
    data, meta = tmp_path / "events.parquet", tmp_path / "meta.toml"
    events.to_parquet(data)
    meta.write_text(META)
    code = main(["sql", "SELECT COUNT(*) FROM events", "--table", f"events={data}", "--metadata", str(meta),
                 "--out", str(tmp_path / "missing" / "out.csv")])
    assert code == 2
    assert "--out" in capsys.readouterr().err


def test_sql_seed_json_and_dry_run(events, tmp_path, capsys):
    """--seed repeats the noise and says so, --json prints one document, --dry-run spends nothing."""
    data, meta, ledger = tmp_path / "events.csv", tmp_path / "meta.toml", str(tmp_path / "l.db")
    events.to_csv(data, index=False)
    meta.write_text(META)
    query = "SELECT campaign, COUNT(*) AS n FROM events GROUP BY campaign"
    base = ["sql", query, "--table", f"events={data}", "--metadata", str(meta), "--ledger", ledger]
    assert main(["ledger", "init", ledger, "--epsilon", "5", "--delta", "1e-5", "--unit", "user_id"]) == 0
    capsys.readouterr()
    assert main([*base, "--dry-run", "--json"]) == 0
    preview = json.loads(capsys.readouterr().out)
    assert preview["spent"] is False and preview["rows"][0][0] == "n"
    assert Ledger(ledger).history() == []
    docs = []
    for _ in range(2):
        assert main([*base, "--seed", "3", "--json"]) == 0
        docs.append(json.loads(capsys.readouterr().out))
    assert docs[0]["rows"] == docs[1]["rows"] and docs[0]["columns"] == ["campaign", "n", "n_low", "n_high"]
    assert [r[0] for r in docs[0]["rows"]] == ["spring", "summer", "fall"]
    assert any("NOT private" in w for w in docs[0]["warnings"]) and docs[0]["seeded"] is True
    assert len(Ledger(ledger).history()) == 2


def test_a_dry_run_of_learnt_bounds_says_they_are_unknown_until_the_release(events, tmp_path, capsys):
    """COUNT and SUM without bounds learn them at release: the preview states their figures per
    unit of the bounds' size, AVG's as unknown, the ε their bounds take, and never (0, 1)."""
    data = tmp_path / "events.csv"
    events.to_csv(data, index=False)
    query = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, privacy_unit_column = "
             "user_id) COUNT(*) AS n, SUM(revenue) AS s, AVG(revenue) AS a FROM events")
    base = ["sql", query, "--table", f"events={data}", "--dry-run"]
    assert main([*base, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = pd.DataFrame(doc["rows"], columns=doc["columns"]).set_index("aggregate")
    assert list(rows.index) == ["n", "s", "a", "n (bounds)", "s (bounds)", "a (bounds)"]
    assert not rows["what"].str.contains(r"\(0, 1\)").any()
    assert list(rows["per_bound"]) == [True, True, False, False, False, False]
    assert pd.isna(rows.loc["a", "half_width"]) and rows.loc["s", "half_width"] > 0
    # Each of the three had ε/3, half of it to its bounds.
    assert rows["epsilon"].to_list() == pytest.approx([1 / 6] * 6)
    assert doc["guarantee"]["epsilon"] == pytest.approx(1.0)
    assert main(base) == 0
    out = capsys.readouterr().out
    assert "bounds learnt at release" in " ".join(out.split()) and "(0, 1)" not in out
