"""What `release`, `sql` and `synth` print around their result: a seeded run's note, a dry run's
preview, the `--json` document, and warnings as one line each."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table as RichTable

from bayesdp.commands import SEED_HELP, SEEDED_NOTE

if TYPE_CHECKING:
    import pandas as pd

    from bayesdp.noise import Rng
    from bayesdp.privacy import Guarantee
    from bayesdp.tables import Query, Release


def add_output_options(parser: argparse.ArgumentParser, *, dry_run: bool = True) -> None:
    parser.add_argument("--seed", type=int, help=SEED_HELP)
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document (values, intervals, guarantee, warnings)")
    if dry_run:
        parser.add_argument("--dry-run", action="store_true",
                            help="print the expected accuracy from public parameters (the "
                                 "preview) and spend nothing")


def seeded_rng(args: argparse.Namespace) -> Rng | None:
    """The test generator of --seed, with its warning that the run is not private; else None."""
    if args.seed is None:
        return None
    from bayesdp.noise import rng_for_tests

    warnings.warn(SEEDED_NOTE, UserWarning, stacklevel=2)
    return rng_for_tests(args.seed)


def warning_line(message: Warning | str) -> str:
    return "warning: " + " ".join(str(message).split())


@contextmanager
def warnings_as_lines() -> Iterator[None]:
    """Print each warning as one `warning: ...` line on stderr, not Python's `file:line:` form."""
    def show(message: Warning | str, *_: Any, **__: Any) -> None:
        print(warning_line(message), file=sys.stderr, flush=True)

    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = show
        yield


def run_json(work: Callable[[], dict[str, Any]]) -> int:
    """Print the document `work` returns, with the warnings it raised; a CuratorWarning states
    exact facts about the data, so it goes to stderr and never into the document."""
    from bayesdp.errors import CuratorWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        doc = work()
    found = []
    for w in caught:
        if issubclass(w.category, CuratorWarning):
            print(warning_line(w.message), file=sys.stderr)
        else:
            found.append(str(w.message))
    print(json.dumps({**doc, "warnings": found}, indent=2, allow_nan=False, default=_text))
    return 0


def _text(value: Any) -> str:
    """Dates and times (keys of a release grouped by a date) in ISO 8601, anything else as text."""
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def release_document(release: Release) -> dict[str, Any]:
    """The released table (values and their `_low`/`_high` interval columns), the interval
    level, the guarantee and the caveats: DP values and public parameters only."""
    from bayesdp.jsonable import frame_json, guarantee_json

    return {**frame_json(release.to_pandas()), "alpha": release.alpha,
            "guarantee": guarantee_json(release.guarantee), "caveats": release.caveats()}


def preview(query: Query, options: dict[str, Any], *, as_json: bool) -> int:
    """A dry run: the expected accuracy of the release `options` describe (reads no data values,
    spends nothing)."""
    plan_options = {k: v for k, v in options.items() if k != "alpha"}
    return show_preview(lambda: (query.preview(**options), query.plan(**plan_options).guarantee),
                        as_json=as_json)


def show_preview(work: Callable[[], tuple[pd.DataFrame, Guarantee]], *, as_json: bool) -> int:
    """Print the preview and the guarantee `work` returns."""
    from bayesdp.jsonable import frame_json, guarantee_json

    def document() -> dict[str, Any]:
        df, guarantee = work()
        return {**frame_json(df), "guarantee": guarantee_json(guarantee), "spent": False}

    if as_json:
        return run_json(document)
    df, guarantee = work()
    console = Console()
    console.print(preview_table(df))
    console.print(f"dry run: nothing spent; a release would be {guarantee}", highlight=False)
    return 0


# The preview's columns the table shows (--json has them all).
PREVIEW_COLUMNS = ("aggregate", "what", "epsilon", "group_size", "half_width", "abs_error")


def preview_table(df: pd.DataFrame) -> RichTable:
    out = RichTable(title="expected accuracy (dry run, from public parameters only)")
    for c in PREVIEW_COLUMNS:
        out.add_column(c, justify="left" if c in ("aggregate", "what") else "right")
    for row in df.to_dict("records"):
        out.add_row(*("" if v != v else f"{v:.4g}" if isinstance(v, float) else str(v)
                      for v in (row[c] for c in PREVIEW_COLUMNS)))
    notes = []
    if df["upper_bound"].any():
        notes.append("a std's or quantile's half_width is an upper bound (a quantile's in levels)")
    if "learnt" in df and df["learnt"].any():
        notes.append("bounds learnt at release: a count's or sum's figures are per unit of "
                     "max(|low|, |high|) of its bounds, the others' unknown until then")
    out.caption = "; ".join(notes) or None
    return out
