"""`bayesdp audit MODULE:CALLABLE --d0 JSON --d1 JSON --epsilon E`: audit a mechanism from the shell.

Exit code 0 when the audit passes, 1 when the samples prove the claim false, 2 on a user error.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from bayesdp.commands import SEED_HELP, SEEDED_NOTE
from bayesdp.errors import DataError, invalid

if TYPE_CHECKING:
    from bayesdp.audit import AuditResult


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "audit",
        help="measure from samples whether a mechanism keeps its claimed ε (and δ)",
        description=(
            "Run a mechanism on two neighbouring inputs and give a lower confidence bound on "
            "its ε (and on its δ at the claimed ε). MODULE:CALLABLE names a bayesdp mechanism "
            "object or a function (input, size, rng) -> array with one output per run; the "
            "current directory is importable. Exit code 1 means the claim is refuted."
        ),
    )
    parser.add_argument("target", metavar="MODULE:CALLABLE", help="e.g. mymechs:noisy_count")
    parser.add_argument("--d0", required=True, type=_json, help="first input, as JSON")
    parser.add_argument("--d1", required=True, type=_json, help="neighbouring input, as JSON")
    parser.add_argument("--epsilon", required=True, type=float, help="claimed ε")
    parser.add_argument("--delta", type=float, default=0.0, help="claimed δ (default 0)")
    parser.add_argument("--samples", type=int, default=1_000_000, help="test runs per input")
    parser.add_argument("--alpha", type=float, default=0.05, help="1 - confidence (default 0.05)")
    parser.add_argument("--seed", type=int, default=None,
                        help=f"{SEED_HELP} (default: OS randomness)")
    parser.set_defaults(run=run)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {text!r} ({exc.msg})") from None


def load(target: str) -> Any:
    """The object named by MODULE:ATTRIBUTE[.ATTRIBUTE...], with the current directory importable."""
    module, _, name = target.partition(":")
    if not module or not name:
        raise invalid("MODULE:CALLABLE", target, "of the form package.module:name")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise DataError(f"cannot import module {module!r}: {exc}") from None
    for part in name.split("."):
        if not hasattr(obj, part):
            raise DataError(f"{target!r}: {type(obj).__name__} {obj!r} has no attribute {part!r}")
        obj = getattr(obj, part)
    if isinstance(obj, type):
        raise invalid(
            "MODULE:CALLABLE",
            target,
            "a mechanism object or a sampler function, not a class (define e.g. "
            "`mech = bayesdp.Laplace(1.0)` in a module and name `module:mech`)",
        )
    return obj


def run(args: argparse.Namespace) -> int:
    from bayesdp.audit import audit
    from bayesdp.noise import rng_for_tests

    mechanism = load(args.target)
    rng = None if args.seed is None else rng_for_tests(args.seed)
    columns = (TextColumn("auditing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("audit", total=None)
        result = audit(
            mechanism,
            args.d0,
            args.d1,
            epsilon=args.epsilon,
            delta=args.delta,
            samples=args.samples,
            alpha=args.alpha,
            rng=rng,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    report(result)
    if args.seed is not None:
        Console(stderr=True, highlight=False).print(SEEDED_NOTE)
    return 0 if result.passed else 1


def report(result: AuditResult) -> None:
    out = Console(highlight=False)
    head, _, rest = str(result).partition(": ")
    colour = "green" if result.passed else "bold red"
    out.print(f"[{colour}]{head}[/]: {escape(rest)}", markup=True, soft_wrap=True)
