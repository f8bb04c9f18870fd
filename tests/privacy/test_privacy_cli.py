"""`bayesdp explain` and `bayesdp ledger init|show|migrate|backup`."""

import json
import sqlite3

import pytest

from bayesdp.cli import main
from bayesdp.privacy import Guarantee, Ledger


def test_explain_words(capsys):
    assert main(["explain", "--epsilon", "0.1", "--delta", "1e-6", "--n", "1000000"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "no semantic guarantee follows" in out and "δ ≪ ε²/n" in out
    assert "adds up" in out


def test_explain_json(capsys):
    args = ["explain", "--epsilon", "0.5", "--n", "100", "--prior", "0.01", "--json"]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["semantic"]["holds"] is True
    assert data["semantic"]["epsilon"] == pytest.approx(0.6487212707)
    assert data["posterior"] == [{"prior": 0.01, "max_posterior": pytest.approx(0.0164, abs=5e-5)}]
    assert data["min_total_error"] == pytest.approx(0.755081, abs=5e-7)


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (["--epsilon", "nan"], "epsilon"),
        (["--epsilon", "1", "--delta", "1"], "delta"),
        (["--epsilon", "1", "--prior", "0"], "prior"),
        (["--epsilon", "1", "--n", "0"], "n="),
    ],
)
def test_explain_bad_input_is_one_line_exit_2(capsys, args, name):
    assert main(["explain", *args]) == 2
    err = capsys.readouterr().err
    assert name in err and "Traceback" not in err


def test_ledger_init_and_show(tmp_path, capsys):
    path = tmp_path / "budget.db"
    assert main(["ledger", "init", str(path), "--epsilon", "1", "--delta", "1e-6"]) == 0
    assert "created ledger" in capsys.readouterr().out
    led = Ledger(path)
    led.spend(Guarantee(0.25), "[red]counts[/red]")
    led.close()
    assert main(["ledger", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "[red]counts[/red]" in out  # labels are shown literally, never as markup
    assert "spent: ε=0.25" in out and "remaining: ε=0.75, δ=1e-06" in out


def test_ledger_init_never_overwrites(tmp_path, capsys):
    path = tmp_path / "precious.csv"
    path.write_text("a,b\n1,2\n")
    assert main(["ledger", "init", str(path), "--epsilon", "1"]) == 2
    assert "not overwritten" in capsys.readouterr().err
    assert path.read_text() == "a,b\n1,2\n"
    assert main(["ledger", "show", str(path)]) == 2
    assert "not a bayesdp ledger" in capsys.readouterr().err
    assert main(["ledger", "show", str(tmp_path / "missing.db")]) == 2
    assert "no ledger" in capsys.readouterr().err


def test_ledger_backup(tmp_path, capsys):
    def said(stream):  # rich wraps long lines (a long tmp path) at any space
        return " ".join(getattr(capsys.readouterr(), stream).split())

    path, copy = tmp_path / "budget.db", tmp_path / "copy.db"
    led = Ledger(path, budget=Guarantee(1.0))
    led.spend(Guarantee(0.25), "counts")  # left in the -wal while this ledger stays open
    assert main(["ledger", "backup", str(path), str(copy)]) == 0
    assert "(1 spend)" in said("out")
    assert [s.label for s in Ledger(copy).history()] == ["counts"]
    assert main(["ledger", "backup", str(path), str(copy)]) == 2
    assert "already exists" in said("err")
    assert main(["ledger", "backup", str(tmp_path / "missing.db"), str(tmp_path / "x.db")]) == 2
    assert "no ledger" in said("err")
    led.close()


def test_ledger_show_and_migrate_a_legacy_pld_ledger(tmp_path, capsys):
    path = tmp_path / "old.db"
    Ledger(path, budget=Guarantee(1.0, delta=1e-6)).spend(Guarantee(0.5), "counts")
    with sqlite3.connect(path) as conn:  # as earlier versions wrote accounting='pld'
        conn.execute("UPDATE meta SET value = 'pld' WHERE key = 'accounting'")
    conn.close()
    with pytest.raises(SystemExit):
        main(["ledger", "init", str(tmp_path / "new.db"), "--epsilon", "1", "--delta", "1e-6",
              "--accounting", "pld"])
    assert "invalid choice: 'pld'" in capsys.readouterr().err
    assert main(["ledger", "show", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "counts" in out and "not a valid privacy filter" in out and "ledger migrate" in out
    assert main(["ledger", "migrate", str(path), "--accounting", "advanced"]) == 2
    assert "already exceed its budget" in capsys.readouterr().err  # 0.5 alone: bound 2.70 > 1
    assert main(["ledger", "migrate", str(path), "--accounting", "basic"]) == 0
    assert "now uses the basic composition filter" in " ".join(capsys.readouterr().out.split())
    assert main(["ledger", "show", str(path)]) == 0
    assert "remaining: ε=0.5, δ=1e-06" in capsys.readouterr().out
