"""`bayesdp explain`: what an (ε, δ) guarantee lets an adversary conclude, in plain words."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.markup import escape

from bayesdp.commands import RELATIONS


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "explain",
        help="say in plain words what a privacy guarantee means",
        description=(
            "Explain an (ε, δ) guarantee for a data owner: what an adversary with any side "
            "knowledge can conclude about one person (Kasiviswanathan & Smith), whether δ is "
            "small enough for n records (δ ≪ ε²/n), the largest posterior from a prior, the "
            "best hypothesis test, and what composition with earlier releases means."
        ),
    )
    parser.add_argument("--epsilon", required=True, type=float, help="ε >= 0")
    parser.add_argument("--delta", type=float, default=0.0, help="δ in [0, 1) (default 0)")
    parser.add_argument("--n", type=int, default=None, help="number of records (checks δ ≪ ε²/n)")
    parser.add_argument(
        "--prior", type=float, default=None, help="an adversary's prior in (0, 1) on a yes/no fact"
    )
    parser.add_argument("--unit", default="row", help="the privacy unit (default: row)")
    parser.add_argument("--relation", choices=RELATIONS, default="add_remove")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from bayesdp.privacy import Guarantee

    g = Guarantee(args.epsilon, delta=args.delta, relation=args.relation, unit=args.unit)
    text = g.explain(n=args.n, prior=args.prior)
    if not args.json:
        Console().print(escape(text), highlight=False)
        return 0
    priors = [0.01, 0.5] if args.prior is None else [args.prior]
    report = {
        "guarantee": {
            "epsilon": g.epsilon,
            "delta": g.delta,
            "relation": g.relation,
            "unit": g.unit,
        },
        "semantic": None if args.n is None else {"n": args.n, **asdict(g.semantic(args.n))},
        "posterior": [{"prior": p, "max_posterior": g.posterior(p)} for p in priors],
        "min_total_error": g.min_total_error(),
        "explanation": text,
    }
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return 0
