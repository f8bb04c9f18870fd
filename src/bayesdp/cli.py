"""The `bayesdp` command. Each sub-command group lives in bayesdp/commands/<name>.py with `register(sub)`."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from bayesdp.commands.output import warnings_as_lines
from bayesdp.errors import BayesdpError

# Sub-command modules under bayesdp.commands, each exposing register(subparsers).
COMMANDS: tuple[str, ...] = (
    "audit", "synth", "holdout", "release", "sql", "explain", "ledger", "correlated", "serve",
)

err = Console(stderr=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bayesdp", description="Differential privacy with its Bayesian meaning."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"bayesdp.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run a sub-command; user errors print one line and exit 2, never a traceback; warnings
    print one line each."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with warnings_as_lines():
            return int(args.run(args) or 0)
    except (BayesdpError, ValueError, OSError, KeyError) as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return 2
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
