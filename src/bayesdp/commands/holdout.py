"""`bayesdp holdout`: answer a file of queries through the reusable holdout (Thresholdout).

Each line of the query file is a row expression over the columns of the train and the holdout
file (CSV, Parquet or JSON), checked by `bayesdp.expressions` (no subqueries, files or other
tables) and evaluated by DuckDB on every row; its mean over each file is one statistical query.
Only the means leave the engine. Blank lines and lines starting with # are skipped.

A query must map every training row into [0, 1] (or be clipped there with --clip): the training
file is checked and errors name what is wrong with it. The holdout is never checked: there a
NULL or non-numeric value counts as 0 and values are clipped into [0, 1]
(`holdout.statistical_means`), so no error and no printed count tells anything about its rows.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bayesdp.commands import SEED_HELP, SEEDED_NOTE, add_memory_options
from bayesdp.errors import DataError, invalid

if TYPE_CHECKING:
    import duckdb

    from bayesdp.expressions import RowExpression
    from bayesdp.holdout import HoldoutAnswer, ReusableHoldout

READERS = {".csv": "read_csv", ".tsv": "read_csv", ".parquet": "read_parquet", ".json": "read_json"}


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "holdout",
        help="answer adaptive queries on a reusable holdout (Thresholdout)",
        description=(
            "Evaluate each query (a row expression over the files' columns with values in [0, 1], "
            "one per line) on the train and holdout files and answer it with Thresholdout: the training "
            "mean when the holdout agrees, else a noisy holdout mean that spends one unit of "
            "budget. Prints the answers, the budget left and the privacy guarantee."
        ),
    )
    parser.add_argument("--train", required=True, type=Path, help="training data (csv/parquet/json)")
    parser.add_argument("--holdout", required=True, type=Path, help="holdout data (csv/parquet/json)")
    parser.add_argument("--queries", required=True, type=Path, help="file with one expression per line")
    parser.add_argument("--threshold", required=True, type=float, help="threshold T")
    parser.add_argument("--sigma", required=True, type=float, help="Laplace scale σ of the answers")
    parser.add_argument("--budget", required=True, type=int, help="number of overflows allowed")
    parser.add_argument("--threshold-noise", type=float, default=None, help="default 2σ")
    parser.add_argument("--compare-noise", type=float, default=None, help="default 4σ")
    parser.add_argument(
        "--clip", action="store_true",
        help="clip training values outside [0, 1] (counted) instead of failing; holdout values "
             "are always clipped")
    parser.add_argument("--seed", type=int, default=None, help=SEED_HELP)
    add_memory_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bayesdp.holdout import ReusableHoldout, statistical_means
    from bayesdp.noise import rng_for_tests
    from bayesdp.tables.engines import connect, duckdb_errors

    queries = read_queries(args.queries)
    con = connect(args.memory_limit, args.temp_directory)
    train = relation(con, args.train, "train")
    holdout = relation(con, args.holdout, "holdout")
    with duckdb_errors(f"cannot read the holdout file {args.holdout}"):
        n = int(holdout.aggregate("count(*)").fetchall()[0][0])
    if n == 0:
        raise DataError(f"the holdout file {args.holdout} has no rows")
    checked = [check_query(expr, line, train.columns, holdout.columns) for line, expr in queries]
    train_means: list[float] = []
    clipped = 0
    for (line, _), expr in zip(queries, checked, strict=True):
        mean, c = column_mean(train, expr, args.clip, f"train, query line {line}")
        train_means.append(mean)
        clipped += c
    with duckdb_errors(f"cannot read the holdout file {args.holdout}"):
        hold_means = statistical_means(holdout, checked)
    h = ReusableHoldout(
        None, holdout=n, threshold=args.threshold, sigma=args.sigma, budget=args.budget,
        threshold_noise=args.threshold_noise, compare_noise=args.compare_noise,
        rng=None if args.seed is None else rng_for_tests(args.seed),
    )
    answers = h.query_means(train_means, hold_means)
    assert isinstance(answers, list)
    show(queries, answers, h, clipped, seeded=args.seed is not None)
    return 0


def read_queries(path: Path) -> list[tuple[int, str]]:
    """(line number, expression) for every non-blank, non-comment line."""
    lines = path.read_text().splitlines()
    queries = [(i, s.strip()) for i, s in enumerate(lines, 1) if s.strip() and not s.strip().startswith("#")]
    if not queries:
        raise DataError(f"the query file {path} has no queries (one row expression per line)")
    return queries


def check_query(text: str, line: int, train: list[str], holdout: list[str]) -> RowExpression:
    """The query line as a row expression over columns both files have."""
    from bayesdp.expressions import row_expression

    role = f"query line {line}"
    row_expression(text, train, role=f"{role} (train columns)")
    return row_expression(text, holdout, role=f"{role} (holdout columns)")


def relation(con: duckdb.DuckDBPyConnection, path: Path, name: str) -> Any:
    """A lazy DuckDB relation over a CSV, Parquet or JSON file."""
    from bayesdp.tables.engines import duckdb_errors

    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise invalid(name, str(path), f"a file ending in one of {sorted(READERS)}")
    if not path.is_file():
        raise FileNotFoundError(f"{name} file not found: {path}")
    with duckdb_errors(f"cannot read the {name} file {path}"):
        read: Any = getattr(con, reader)
        rel = read(str(path))
    return rel


def column_mean(rel: Any, expr: RowExpression, clip: bool, where: str) -> tuple[float, int]:
    """Mean over the training rows of a [0, 1]-valued expression, computed in DuckDB; refuses
    NULLs, and values outside [0, 1] unless `clip` (then returns how many were clipped)."""
    from bayesdp.tables.engines import duckdb_errors

    v = f"TRY_CAST({expr.sql('duckdb')} AS DOUBLE)"
    with duckdb_errors(f"{where}: cannot evaluate {expr.text!r}"):
        row = rel.aggregate(
            f"count(*), count({v}), min({v}), max({v}), avg(least(greatest({v}, 0), 1)), "
            f"count(*) FILTER (WHERE {v} < 0 OR {v} > 1)"
        ).fetchall()[0]
    rows, valued, lo, hi, mean, outside = row
    if valued < rows:
        raise DataError(f"{where}: {expr.text!r} is NULL on some rows",
                        private_detail=f"{rows - valued} row(s)")
    if outside and not clip:
        raise DataError(
            f"{where}: {expr.text!r} has values outside [0, 1]; a query maps each row into [0, 1] "
            "(use --clip to clip, counted)", private_detail=f"{outside} value(s), min {lo}, max {hi}")
    return float(mean), int(outside)


def show(
    queries: list[tuple[int, str]], answers: list[HoldoutAnswer], h: ReusableHoldout, clipped: int,
    *, seeded: bool = False
) -> None:
    out = Console()
    table = Table(title="reusable holdout answers")
    for col in ("line", "query", "source", "answer", "budget left"):
        table.add_column(col, justify="right" if col in ("line", "answer", "budget left") else "left")
    for (line, expr), a in zip(queries, answers, strict=True):
        value = "refused" if a.value is None else f"{a.value:.6g}"
        table.add_row(str(line), escape(expr), a.source, value, str(a.budget_left))
    out.print(table)
    out.print(f"budget left: {h.budget_left} of {h.budget} (holdout size {h.n})", highlight=False)
    out.print(f"guarantee: {escape(str(h.guarantee))}", highlight=False)
    if seeded:
        out.print(f"[bold red]{SEEDED_NOTE}[/]", highlight=False)
    if clipped:
        out.print(f"clipped training values: {clipped}", highlight=False)
