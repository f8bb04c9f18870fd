"""`bayesdp correlated`: the Markov-quilt noise for records correlated as a Markov chain."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from bayesdp.errors import invalid

if TYPE_CHECKING:
    import numpy as np


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "correlated",
        help="noise for a histogram of records that follow a Markov chain (Markov quilts)",
        description=(
            "Calibrate the Markov Quilt Mechanism (Song, Wang & Chaudhuri 2017) for sequences "
            "of records that follow a Markov chain: the Laplace scale per histogram bin, the "
            "record and quilt that set it, the group-privacy and GK16 baselines, and the DP "
            "level an ordinary mechanism needs to give the same Bayesian-DP ε (Zhao et al. 2017)."
        ),
    )
    parser.add_argument("--transition", required=True,
                        help="rows separated by ';' and entries by ',' (e.g. '0.9,0.1;0.2,0.8'), "
                             "or a .csv / .npy file holding the matrix")
    parser.add_argument("--length", required=True, type=int, help="longest sequence (records)")
    parser.add_argument("--epsilon", required=True, type=float, help="ε > 0")
    parser.add_argument("--method", choices=("exact", "approx"), default="exact")
    parser.add_argument("--notion", choices=("pufferfish", "bdp"), default="pufferfish")
    parser.add_argument("--initial", choices=("stationary", "worst"), default="stationary")
    parser.add_argument("--lipschitz", type=float, default=2.0,
                        help="L1 change of the statistic per record (2 for a histogram)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.set_defaults(run=run)


def read_matrix(text: str) -> np.ndarray:
    """A matrix given inline ('a,b;c,d') or as a .csv / .npy file."""
    import numpy as np

    path = Path(text)
    if path.suffix in (".csv", ".npy"):
        if not path.is_file():
            raise invalid("transition", text, "an existing .csv or .npy file, or 'a,b;c,d'")
        if path.suffix == ".npy":
            return np.asarray(np.load(path, allow_pickle=False), dtype=np.float64)
        return np.loadtxt(path, delimiter=",", ndmin=2)
    try:
        return np.array([[float(v) for v in row.split(",")] for row in text.split(";")])
    except ValueError:
        raise invalid("transition", text, "rows separated by ';' with ',' between entries") from None


def run(args: argparse.Namespace) -> int:
    from bayesdp.correlated import (
        MarkovChain,
        MarkovQuiltMechanism,
        bdp_to_dp,
        gk16_scale,
        group_dp_scale,
    )

    chain = MarkovChain(read_matrix(args.transition), initial=args.initial)
    mech = MarkovQuiltMechanism(chain, length=args.length, epsilon=args.epsilon, lipschitz=args.lipschitz,
                                method=args.method, notion=args.notion)
    cal = mech.calibration
    group = group_dp_scale(args.length, args.epsilon)
    gk = gk16_scale(chain, args.length, args.epsilon) if chain.k == 2 else None
    needed = bdp_to_dp(args.epsilon, chain, args.length, method=args.method, notion=args.notion)
    report = {
        "sigma": cal.sigma,
        "laplace_scale_per_bin": mech.scale,
        "node": cal.node,
        "quilt": list(cal.quilt),
        "influence": cal.influence,
        "nearby": cal.nearby,
        "group_dp_sigma": group,
        "gk16_sigma": None if gk is None else gk.sigma,
        "dp_epsilon_for_same_guarantee": needed,
        "interval_95": mech.interval(0.05),
        "explanation": mech.guarantee.explain(),
    }
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    out = Console()
    out.print(f"σ = {cal.sigma:.6g} per unit of Lipschitz constant; Laplace scale per bin "
              f"{mech.scale:.6g} (95% of the noise within ±{report['interval_95']:.6g})",
              highlight=False)
    where = "the trivial quilt (group privacy)" if cal.trivial else (
        f"quilt {cal.quilt}, {cal.nearby} nearby record(s), influence {cal.influence:.4g}")
    out.print(f"set by record {cal.node}: {where}", highlight=False)
    gk_text = "n/a (not a binary chain)" if gk is None else (
        "not applicable" if gk.sigma is None else f"{gk.sigma:.6g}")
    out.print(f"baselines: group DP σ = {group:.6g}; GK16 σ = {gk_text}", highlight=False)
    out.print(f"an ordinary mechanism must be {needed:.4g}-DP per record for the same guarantee",
              highlight=False)
    out.print(escape(mech.guarantee.explain()), highlight=False)
    return 0
