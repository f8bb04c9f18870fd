"""`bayesdp release DATA --spec spec.toml`: a private grouped release from a file, with its report.

The spec is a TOML file in the format of `bayesdp.tables.spec`: the privacy unit, the group
keys, the aggregates with their bounds and the contribution bounds, for example::

    privacy_unit = "user_id"         # false: each row is a different person
    unit_name = "user"               # optional: what one unit is called in the guarantee
    group_by = ["campaign"]          # optional; keys = [...] makes the keys public
    max_groups_per_unit = 5          # required with group_by and a privacy_unit: no default
    max_rows_per_group = 1
    epsilon = 1.0
    delta = 1e-6
    [aggregates]
    users = { kind = "count_units" }
    revenue = { kind = "sum", column = "revenue", bounds = [0, 100] }
    big = { kind = "share", condition = "revenue > 50" }   # a column may also be an expression
    median = { kind = "quantile", column = "revenue", q = 0.5, bounds = [0, 100] }
"""

from __future__ import annotations

import argparse
import threading
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn
from rich.table import Table as RichTable

from bayesdp.commands import add_memory_options
from bayesdp.commands.output import (
    add_output_options,
    preview,
    release_document,
    run_json,
    seeded_rng,
)
from bayesdp.errors import DataError, check_writable, invalid

if TYPE_CHECKING:
    import duckdb

    from bayesdp import tables
    from bayesdp.noise import Rng

_OUT_FORMATS = (".csv", ".parquet")


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "release", help="release grouped statistics from a table with differential privacy",
        description="Bound each privacy unit's contribution inside DuckDB, add calibrated noise, "
                    "and print the released groups with their confidence intervals.",
        epilog="spec example:\n" + (__doc__ or "").split("::", 1)[1].strip("\n"),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", help="a CSV, Parquet or JSON file")
    parser.add_argument("--spec", required=True, help="TOML file: privacy unit, groups, aggregates")
    parser.add_argument("--epsilon", type=float, help="total ε (overrides the spec)")
    parser.add_argument("--delta", type=float, help="total δ (overrides the spec)")
    parser.add_argument("--out", help="write the released table (.csv or .parquet)")
    parser.add_argument("--report", help="write a publishable HTML report (DP values only)")
    parser.add_argument("--curator-report", help="write the exact diagnostics (dropped and clipped "
                        "rows; not private, for the data holder only) as a separate HTML page")
    parser.add_argument("--ledger", help="record the spend in this budget ledger before releasing")
    add_engine_options(parser)
    add_memory_options(parser)
    add_output_options(parser)
    parser.set_defaults(run=run)


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", choices=("duckdb", "spark"), default="duckdb",
                        help="where bounding and aggregation run (spark: pip install 'bayesdp[spark]')")
    parser.add_argument("--master", help="Spark master URL with --engine spark (default local[*])")


def load_spec(path: str) -> dict[str, Any]:
    from bayesdp.tables.spec import check_spec

    try:
        spec = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"cannot parse the spec {path!r}: {exc}") from None
    return check_spec(spec, f"the spec {path!r}")


def run(args: argparse.Namespace) -> int:
    from bayesdp.privacy import Ledger
    from bayesdp.tables.engines import connect
    from bayesdp.tables.spec import RELEASE_KEYS, build

    spec = load_spec(args.spec)
    options = {k: spec[k] for k in RELEASE_KEYS if k in spec}
    for k in ("epsilon", "delta"):
        if getattr(args, k) is not None:
            options[k] = getattr(args, k)
    if "epsilon" not in options:
        raise DataError("give epsilon in the spec or with --epsilon")
    check_outputs(args.out, args.report, args.curator_report)
    ledger = Ledger(args.ledger) if args.ledger else None
    if args.engine == "spark":
        from bayesdp.tables.engines.spark import session_for

        for flag in ("memory_limit", "temp_directory"):
            if getattr(args, flag) is not None:
                raise invalid("--" + flag.replace("_", "-"), getattr(args, flag),
                              "unset with --engine spark (give Spark's memory settings instead)")
        con = None
        query = build(args.data, spec, engine="spark", spark=session_for(args.master))
    else:
        con = connect(args.memory_limit, args.temp_directory)
        query = build(args.data, spec, con)
    if args.dry_run:
        return preview(query, options, as_json=args.json)
    return publish(args, lambda rng: query.release(ledger=ledger, label=spec.get("label"), rng=rng,
                                                   **options), con, args.curator_report)


def publish(args: argparse.Namespace, release: Callable[[Rng | None], tables.Release],
            con: duckdb.DuckDBPyConnection | None, curator_report: str | None = None) -> int:
    """Run `release` with --seed's generator (following DuckDB's progress on `con`) and show
    it; with --json print one document instead, the notes of the files written on stderr."""
    def run() -> tables.Release:
        rng = seeded_rng(args)
        return release(rng) if con is None else with_progress(con, lambda: release(rng))

    if not args.json:
        show(run(), args.out, args.report, curator_report)
        return 0

    def document() -> dict[str, Any]:
        done = run()
        write(done, args.out, args.report, curator_report, Console(stderr=True))
        return {**release_document(done), "seeded": args.seed is not None}

    return run_json(document)


def show(release: tables.Release, out: str | None, report: str | None,
         curator_report: str | None = None) -> None:
    """Print the released table, its caveats and guarantee; write --out, --report and
    --curator-report (the exact diagnostics, for the data holder only)."""
    console = Console()
    console.print(render(release))
    for line in release.caveats():
        console.print(f"[dim]{line}[/]", highlight=False)
    if not curator_report:
        console.print("[dim]Exact counts of dropped and clipped rows (not private, for the data "
                      "holder only): --curator-report PATH[/]", highlight=False)
    console.print(f"guarantee: {release.guarantee}", highlight=False)
    write(release, out, report, curator_report, console)


def write(release: tables.Release, out: str | None, report: str | None, curator_report: str | None,
          console: Console) -> None:
    """Write --out, --report and --curator-report, saying so on `console`."""
    from bayesdp.report import write_curator_report, write_release_report

    df = release.to_pandas()
    try:
        if out:
            path = Path(out)
            if path.suffix.lower() == ".parquet":
                df.to_parquet(path, index=False)
            else:
                df.to_csv(path, index=False)
            console.print(f"wrote {path}")
        if report:
            console.print(f"wrote {write_release_report(release, report)}")
        if curator_report:
            console.print(f"wrote {write_curator_report(release, curator_report)} "
                          "(curator only: do not publish)")
    except OSError as exc:
        # The budget is spent: print the full-precision release rather than lose it.
        console.print(df.to_csv(index=False), highlight=False, markup=False)
        raise DataError(f"the release is spent and printed above as CSV, but writing it failed: "
                        f"{exc}") from None


def check_outputs(out: str | None, report: str | None, curator_report: str | None = None) -> None:
    """Refuse, before anything is spent, --out, --report or --curator-report paths that cannot
    be written."""
    if out and Path(out).suffix.lower() not in _OUT_FORMATS:
        raise invalid("--out", out, "a path ending in .csv or .parquet (checked before any "
                      "budget is spent)")
    for flag, path in (("--out", out), ("--report", report), ("--curator-report", curator_report)):
        if path is not None:
            check_writable(flag, path)


def with_progress(con: duckdb.DuckDBPyConnection, work: Any) -> Any:
    """Run `work` while a progress bar follows DuckDB's scan of the data."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = work()
        except BaseException as exc:  # re-raised in the calling thread
            result["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    with Progress(TextColumn("scanning"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  transient=True, console=Console(stderr=True)) as progress:
        task = progress.add_task("scan", total=100)
        thread.start()
        while thread.is_alive():
            thread.join(0.1)
            pct = con.query_progress()
            if pct >= 0:
                progress.update(task, completed=pct)
    if "error" in result:
        raise result["error"]
    return result["value"]


def render(release: tables.Release) -> RichTable:
    """The released groups, each value with its interval."""
    df = release.to_pandas()
    keys = list(release.keys.columns)
    values = [c for c in df.columns if c not in keys and not c.endswith(("_low", "_high"))]
    out = RichTable(title=f"{len(df)} group(s), {release.coverage_label()}")
    for c in keys:
        out.add_column(c)
    for c in values:
        out.add_column(c, justify="right")
    # Row by row, not iterrows(): a row as one Series would turn integer keys into floats.
    for row in df.to_dict("records"):
        out.add_row(*(str(row[c]) for c in keys),
                    *(f"{row[c]:.4g} [{row[c + '_low']:.4g}, {row[c + '_high']:.4g}]" for c in values))
    return out
