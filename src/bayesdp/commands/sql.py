"""`bayesdp sql "SELECT ..." --table events=events.parquet`: a private release from a SQL query.

Either dialect of `bayesdp.sql`: BigQuery's `SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (...)`, or
plain SQL with `--metadata meta.toml` stating the privacy unit and bounds. The output is the
one of `bayesdp release`. A refused query prints the reason and a caret under the text.
"""

from __future__ import annotations

import argparse
from typing import Any

from bayesdp.commands.output import add_output_options, show_preview
from bayesdp.commands.release import add_engine_options, check_outputs, publish
from bayesdp.errors import invalid


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "sql", help="answer a SQL query with differential privacy",
        description="Answer a SELECT over one table privately: BigQuery's WITH DIFFERENTIAL_PRIVACY "
                    "clause, or plain SQL with a metadata file.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=(__doc__ or "").split("\n\n", 1)[1])
    parser.add_argument("query", help="one SELECT statement")
    parser.add_argument("--table", action="append", required=True, metavar="NAME=PATH",
                        help="a table the query reads: its name and a CSV, Parquet or JSON file "
                             "(with --engine spark also ORC or a lake path)")
    parser.add_argument("--metadata", help="TOML file: privacy unit, bounds, public keys per table")
    parser.add_argument("--epsilon", type=float, help="total ε (the query's or the metadata's if absent)")
    parser.add_argument("--delta", type=float, help="total δ")
    parser.add_argument("--out", help="write the released table (.csv or .parquet)")
    parser.add_argument("--report", help="write an HTML report")
    parser.add_argument("--ledger", help="record the spend in this budget ledger before releasing")
    add_engine_options(parser)
    add_output_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import duckdb

    from bayesdp.privacy import Ledger
    from bayesdp.sql import release_translation, translate
    from bayesdp.sql.bigquery import preview

    check_outputs(args.out, args.report)
    paths = {}
    for item in args.table:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise invalid("--table", item, "NAME=PATH, e.g. events=events.parquet")
        paths[name] = path
    ledger = Ledger(args.ledger) if args.ledger else None

    if args.engine == "spark":
        from bayesdp.tables.engines.spark import session_for, spark_engine

        con = None
        session = session_for(args.master)
        sources: dict[str, Any] = {name: spark_engine(path, session).frame for name, path in paths.items()}
    else:
        from bayesdp.tables.source import engine_for

        con = duckdb.connect()
        sources = {name: engine_for(path, con).relation for name, path in paths.items()}
    t = translate(args.query, sources, metadata=args.metadata, epsilon=args.epsilon, delta=args.delta)
    if args.dry_run:
        return show_preview(lambda: preview(t.query, t.learn, t.options, shown=t.shown), as_json=args.json)
    return publish(args, lambda rng: release_translation(t, ledger=ledger, rng=rng), con)
