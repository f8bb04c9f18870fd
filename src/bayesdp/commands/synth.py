"""`bayesdp synth DATA --epsilon E --out synthetic.csv`: release a private synthetic copy of a table.

Numeric columns need public bounds (--bounds age=17:90, or a --schema JSON file); categorical
levels come from --domain / --schema or are discovered privately. --report writes an HTML page
comparing real and synthetic marginals: it shows real statistics and is for the data holder only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from bayesdp.commands import RELATIONS, SYNTH_BINS, SYNTH_METHODS
from bayesdp.commands.output import add_output_options, run_json, seeded_rng
from bayesdp.errors import DataError, invalid

if TYPE_CHECKING:
    import pandas as pd

out = Console()


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "synth",
        help="fit a private synthesizer to a table and write synthetic rows",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("data", metavar="DATA", help="input table (.csv or .parquet)")
    parser.add_argument("--epsilon", required=True, type=float, help="total ε")
    parser.add_argument("--delta", type=float, default=1e-9, help="total δ (default 1e-9)")
    parser.add_argument("--out", required=True, help="where to write the synthetic CSV")
    parser.add_argument("--columns", nargs="+", help="columns to use (names, or comma lists)")
    parser.add_argument("--method", choices=SYNTH_METHODS, default="mst")
    parser.add_argument("--rows", type=int, help="rows to write (default: the noisy row count)")
    parser.add_argument("--bounds", nargs="+", default=[], metavar="COL=LO:HI",
                        help="public bounds of numeric columns")
    parser.add_argument("--domain", nargs="+", default=[], metavar="COL=A,B,...",
                        help="public levels of categorical columns")
    parser.add_argument("--schema", help='JSON file {"bounds": {col: [lo, hi]}, "domain": {col: [...]}}')
    parser.add_argument("--bins", type=int, default=SYNTH_BINS, help="cells per numeric column")
    parser.add_argument("--relation", choices=RELATIONS, default="add_remove")
    parser.add_argument("--strict", action="store_true",
                        help="error on values outside a declared domain (default: drop and count)")
    parser.add_argument("--report", help="write an HTML fidelity report here (NOT private)")
    parser.add_argument("--target", help="binary column for the train-on-synthetic score")
    add_output_options(parser, dry_run=False)
    parser.set_defaults(run=run)


def _read(path: str) -> pd.DataFrame:
    import pandas as pd

    p = Path(path)
    if not p.exists():
        raise DataError(f"no such file: {path}")
    if p.suffix.lower() == ".parquet":
        return pd.read_parquet(p)
    return pd.read_csv(p)


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    result = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise invalid(flag, item, "COL=VALUE")
        result[name] = value
    return result


def _bounds(items: list[str]) -> dict[str, tuple[float, float]]:
    result = {}
    for name, value in _pairs(items, "--bounds").items():
        lo, sep, hi = value.partition(":")
        try:
            result[name] = (float(lo), float(hi))
        except ValueError:
            raise invalid("--bounds", f"{name}={value}", "COL=LO:HI with numbers") from None
        if not sep:
            raise invalid("--bounds", f"{name}={value}", "COL=LO:HI")
    return result


def _schema(path: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    if path is None:
        return {}, {}
    try:
        spec = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise DataError(f"--schema {path}: not valid JSON ({exc.msg})") from None
    if not isinstance(spec, dict):
        raise DataError(f"--schema {path}: expected an object with 'bounds' and/or 'domain'")
    return dict(spec.get("bounds", {})), dict(spec.get("domain", {}))


def stage(text: str) -> None:
    """One progress line on stderr per stage of the work (stdout keeps the result)."""
    print(f"{text}...", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    if args.json:
        return run_json(lambda: fit_and_write(args, Console(stderr=True)))
    fit_and_write(args, out)
    return 0


def fit_and_write(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    """Fit, sample, write the rows and the report; say so on `console`; return the JSON document."""
    from bayesdp.jsonable import guarantee_json
    from bayesdp.synth.tabular import synthesize

    stage(f"reading {args.data}")
    data = _read(args.data)
    bounds, domain = _schema(args.schema)
    bounds |= _bounds(args.bounds)
    domain |= {k: v.split(",") for k, v in _pairs(args.domain, "--domain").items()}
    columns = [c for item in args.columns for c in item.split(",") if c] if args.columns else None
    rng = seeded_rng(args)
    stage(f"fitting the {args.method} synthesizer to {len(data):,} rows")
    model = synthesize(
        data, args.epsilon, args.delta, columns=columns, bounds=bounds, method=args.method,
        domain=domain, bins=args.bins, relation=args.relation, strict=args.strict, rng=rng,
    )
    stage("sampling synthetic rows")
    synthetic = model.sample(args.rows, rng=rng)
    synthetic.to_csv(args.out, index=False)
    console.print(f"wrote {len(synthetic)} synthetic rows to {args.out}", highlight=False)
    console.print(model.explain(), highlight=False)
    if model.dropped or model.clipped:
        console.print(f"[yellow]{model.dropped} rows with a value outside a categorical domain "
                      "(missing values included) were dropped; "
                      f"{model.clipped} numeric values were clipped into their bounds "
                      "(these counts are not private)[/]", highlight=False)
    if args.report:
        from bayesdp.report.synth import synth_report

        stage("writing the fidelity report (this can take a minute)")
        real = data[model.columns]
        Path(args.report).write_text(synth_report(real, synthetic, model, args.target, stage))
        console.print(f"wrote the fidelity report to {args.report} (real statistics: keep it "
                      "private)", highlight=False)
    return {"out": args.out, "rows": len(synthetic), "columns": list(synthetic.columns),
            "guarantee": guarantee_json(model.guarantee), "explain": model.explain(),
            "seeded": args.seed is not None}
