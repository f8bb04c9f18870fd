"""`bayesdp ledger init|show|migrate PATH`, `bayesdp ledger backup SRC DST`: create a
privacy-budget ledger, list what it has spent, move a legacy "pld" ledger to a privacy filter,
or copy it (its -wal included) consistently."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bayesdp.commands import ACCOUNTINGS, RELATIONS
from bayesdp.errors import LedgerError


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "ledger",
        help="create or show a persistent privacy-budget ledger",
        description="A ledger is an SQLite file that records every spend of a privacy budget.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    init = actions.add_parser("init", help="create a new ledger (never overwrites a file)")
    init.add_argument("path", type=Path)
    init.add_argument("--epsilon", required=True, type=float, help="budget ε")
    init.add_argument("--delta", type=float, default=0.0, help="budget δ (default 0)")
    init.add_argument("--accounting", choices=ACCOUNTINGS, default="basic",
                      help="the privacy filter that keeps the budget under adaptive choices")
    init.add_argument("--unit", default="row", help="the privacy unit (default: row)")
    init.add_argument("--relation", choices=RELATIONS, default="add_remove")
    init.set_defaults(run=run_init)
    show = actions.add_parser("show", help="list the spends, the total and what remains")
    show.add_argument("path", type=Path)
    show.set_defaults(run=run_show)
    migrate = actions.add_parser(
        "migrate", help="move a ledger written with 'pld' accounting to a privacy filter",
        description="'pld' is not a valid privacy filter when spends are chosen after seeing "
        "earlier answers, so such a ledger is read-only. This moves it to the given filter "
        "if that filter admits every spend it holds.")
    migrate.add_argument("path", type=Path)
    migrate.add_argument("--accounting", choices=ACCOUNTINGS, required=True)
    migrate.set_defaults(run=run_migrate)
    backup = actions.add_parser(
        "backup", help="copy a ledger, its -wal included, to a new file (SQLite's online backup)",
        description="A ledger is its file plus its -wal file: copying the file alone can lose "
        "recent spends. This makes a consistent copy, safe while other processes spend.")
    backup.add_argument("source", type=Path)
    backup.add_argument("target", type=Path, help="a new file (never overwritten)")
    backup.set_defaults(run=run_backup)


def run_init(args: argparse.Namespace) -> int:
    from bayesdp.privacy import Guarantee, Ledger

    if args.path.exists():
        raise LedgerError(f"{args.path} already exists; it was not overwritten")
    budget = Guarantee(args.epsilon, delta=args.delta, relation=args.relation, unit=args.unit)
    with Ledger(args.path, budget=budget, accounting=args.accounting) as led:
        Console().print(
            escape(f"created ledger {args.path}: budget {led.budget}, {led.accounting} accounting"),
            highlight=False,
        )
    return 0


def _existing(path: Path) -> Any:
    """The ledger at `path`, never creating one (the numerical libraries load only here)."""
    from bayesdp.privacy import Ledger

    if not path.exists():
        raise LedgerError(f"no ledger at {path}")
    return Ledger(path)


def run_show(args: argparse.Namespace) -> int:
    with _existing(args.path) as led:
        history = led.history()
        try:
            totals = [f"spent: {led.spent()}", f"remaining: {led.remaining()}"]
        except LedgerError as exc:  # a legacy ledger: its history, and how to spend again
            totals = [str(exc)]
        title = f"{args.path}: budget {led.budget}, {led.accounting} accounting"
    table = Table(title=escape(title))
    for name in ("#", "time (UTC)", "label", "ε", "δ", "ρ"):
        table.add_column(name, justify="right" if name in ("#", "ε", "δ", "ρ") else "left")
    for i, s in enumerate(history, 1):
        g = s.guarantee
        table.add_row(
            str(i),
            datetime.fromtimestamp(s.time, UTC).strftime("%Y-%m-%d %H:%M:%S"),
            escape(s.label),
            f"{g.epsilon:.6g}",
            f"{g.delta:.3g}",
            "" if g.rho is None else f"{g.rho:.6g}",
        )
    console = Console()
    console.print(table)
    for line in totals:
        console.print(escape(line), highlight=False)
    return 0


def run_migrate(args: argparse.Namespace) -> int:
    with _existing(args.path) as led:
        led.migrate(args.accounting)
        Console().print(escape(f"{args.path} now uses the {led.filter.title}; spent: {led.spent()}"),
                        highlight=False)
    return 0


def run_backup(args: argparse.Namespace) -> int:
    with _existing(args.source) as led:
        led.backup(args.target)
        count = len(led.history())
    spends = f"{count} spend" + ("" if count == 1 else "s")
    Console().print(escape(f"backed up {args.source} ({spends}) to {args.target}"), highlight=False)
    return 0
