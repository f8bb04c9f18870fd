from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesdp import rng_for_tests
from bayesdp.cli import main

X = rng_for_tests(41).random(500)


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    # The same x on both sides (x > 0.5 agrees exactly); y is shifted by 0.4 on the holdout.
    for name, shift in (("train", 0.0), ("holdout", 0.4)):
        frame = pd.DataFrame({"x": X, "y": np.clip(X + shift, 0, 1)})
        frame.to_parquet(tmp_path / f"{name}.parquet")
    (tmp_path / "q.txt").write_text("# comment\nx > 0.5\n\ny\ny\nx * 2\n")
    return {p.stem: p for p in tmp_path.iterdir()}


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    return " ".join(capsys.readouterr().err.split())  # rich wraps long lines


def _args(files: dict[str, Path], *extra: str) -> list[str]:
    return [
        "holdout", "--train", str(files["train"]), "--holdout", str(files["holdout"]),
        "--queries", str(files["q"]), "--threshold", "0.05", "--sigma", "0.001", "--budget", "1",
        "--seed", "7", *extra,
    ]


def test_holdout_command_answers_and_refuses(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # Gap 0 for x > 0.5 and ≈0.3 for y, with noise scales 0.002 and 0.004: a training answer,
    # then an overflow (budget 1 -> 0), then refusals.
    assert main(_args(files, "--clip")) == 0
    out = capsys.readouterr().out
    assert f"{np.mean(X > 0.5):.6g}" in out
    assert "holdout" in out and out.count("refused") == 2 and "exhausted" in out
    assert "budget left: 0 of 1 (holdout size 500)" in out and "guarantee: ε=" in out
    assert f"clipped training values: {int(np.sum(X > 0.5))}" in out


def test_no_failure_depends_on_the_holdout(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A query that is NULL or outside [0, 1] only on holdout rows is answered like any other:
    an error there would tell the analyst about the holdout's rows for free."""
    files["q"].write_text("CASE WHEN y >= 1 THEN NULL ELSE y END\nCASE WHEN y >= 1 THEN 5 ELSE 0 END\n")
    assert main(_args(files)) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "budget left: 0 of 1" in out and "clipped" not in out


def test_holdout_command_reports_user_errors(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_args(files)) == 2  # x * 2 leaves [0, 1] without --clip
    assert "outside [0, 1]" in _err(capsys)
    files["q"].write_text("no_such_column + 1\n")
    assert main(_args(files)) == 2
    assert "query line 1 (train columns): 'no_such_column'" in _err(capsys)
    files["q"].write_text("x + no_such_column\n")
    assert main(_args(files)) == 2
    assert "is not a column of the table" in _err(capsys)
    files["q"].write_text("# only a comment\n")
    assert main(_args(files)) == 2
    assert "no queries" in _err(capsys)


def test_a_seeded_run_says_it_is_not_private(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_args(files, "--clip", "--memory-limit", "256MB", "--temp-directory",
                      str(files["q"].parent / "spill"))) == 0
    assert "seeded run: NOT private" in " ".join(capsys.readouterr().out.split())


def test_holdout_facts_stay_in_the_private_detail(files: dict[str, Path]) -> None:
    """An error about the training values keeps the exact facts out of the public message."""
    import duckdb

    from bayesdp.commands.holdout import column_mean, relation
    from bayesdp.errors import DataError
    from bayesdp.expressions import row_expression

    rel = relation(duckdb.connect(), files["holdout"], "train")
    with pytest.raises(DataError) as info:
        column_mean(rel, row_expression("y * 9", rel.columns), False, "train")
    assert "outside [0, 1]" in info.value.public_message
    assert "min" not in info.value.public_message and "max 9" in str(info.value.private_detail)
    with pytest.raises(DataError) as info:
        column_mean(rel, row_expression("CASE WHEN x > 0.5 THEN NULL ELSE 0 END", rel.columns), False,
                    "train")
    assert "NULL on some rows" in info.value.public_message
    assert info.value.private_detail == f"{int(np.sum(X > 0.5))} row(s)"


@pytest.mark.parametrize("query", [
    "(SELECT avg(y) FROM read_csv('{holdout}'))",
    "(SELECT avg(y) FROM read_parquet('{holdout}'))",
    "read_parquet('{holdout}') IS NULL",
    "x + (SELECT count(*) FROM holdout)",
    "avg(y)",
    "x; SELECT 1",
])
def test_a_query_line_reads_only_its_own_row(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str], query: str
) -> None:
    """The probe's bypass: a query line that read the holdout file through DuckDB came back as a
    "train" answer with the exact holdout mean. Each such line is refused before any data is
    read, and nothing is answered."""
    files["q"].write_text("x > 0.5\n" + query.format(holdout=files["holdout"]) + "\n")
    assert main(_args(files)) == 2
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())  # rich wraps long lines
    assert "query line 2" in err and "is not allowed" in err
    assert captured.out == ""
