"""Columns as integer codes over public (or privately discovered) domains, and back."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bayesdp.errors import DataError, check_positive_int, invalid
from bayesdp.noise import Rng, discrete_gaussian

DEFAULT_BINS = 16


@dataclass(frozen=True)
class ColumnSpec:
    """How one column is coded: categorical `levels`, or numeric cell `edges` from public bounds."""

    name: str
    levels: np.ndarray | None
    edges: np.ndarray | None
    dtype: Any
    integer: bool = False

    @property
    def size(self) -> int:
        return len(self.levels) if self.levels is not None else len(self.edges) - 1  # type: ignore[arg-type]

    @property
    def label(self) -> list[str]:
        """Readable cell names (levels, or bin ranges)."""
        if self.levels is not None:
            return [str(v) for v in self.levels]
        e = self.edges
        assert e is not None
        return [f"[{e[i]:.4g}, {e[i + 1]:.4g})" for i in range(len(e) - 1)]


def numeric_spec(name: str, series: pd.Series, bounds: object, bins: int) -> ColumnSpec:
    """`bins` equal-width cells on public bounds. An integer column gets `bins` integer-aligned
    cells of near-equal width (one per value when it has at most `bins` values), and a warning
    when a cell holds several values, which sampling then spreads uniformly."""
    try:
        lo, hi = (float(v) for v in bounds)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise invalid(f"bounds[{name!r}]", bounds, "a (lo, hi) pair of numbers") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise invalid(f"bounds[{name!r}]", bounds, "finite (lo, hi) with lo < hi")
    m = check_positive_int("bins", bins)
    integer = pd.api.types.is_integer_dtype(series.dtype)
    if integer:
        lo, hi = math.ceil(lo), math.floor(hi)
        values = hi - lo + 1
        cells = min(m, values)
        edges = lo - 0.5 + (np.arange(cells + 1) * values) // cells
        if values > cells:
            warnings.warn(f"column {name!r}: {values} integer values in {cells} cells, so a cell "
                          f"holds up to {math.ceil(values / cells)} values and synthetic values "
                          f"spread evenly over them; pass bins >= {values} for one cell per value",
                          UserWarning, stacklevel=4)
    else:
        edges = np.linspace(lo, hi, m + 1)
    if len(edges) < 3:
        raise DataError(f"column {name!r} has a single cell on bounds {bounds}: drop it")
    return ColumnSpec(name, None, edges, series.dtype, integer)


def categorical_spec(name: str, series: pd.Series, levels: object) -> ColumnSpec:
    lv = pd.unique(pd.Series(list(levels)))  # type: ignore[call-overload]
    if len(lv) < 2:
        raise DataError(
            f"column {name!r} has a single value {list(lv)!r} in its domain: a constant column "
            "carries nothing to synthesize; drop it and add it back after sampling"
        )
    return ColumnSpec(name, np.asarray(lv, dtype=object), None, series.dtype)


def discover_levels(
    series: pd.Series, sigma: float, delta: float, *, rng: Rng
) -> tuple[np.ndarray, float]:
    """Levels whose count plus discrete Gaussian(σ) noise clears τ = 1 + σ√(2 ln(1/δ)) (partition selection).

    A level held by a single record survives with probability at most δ (the discrete Gaussian
    is σ²-sub-Gaussian, Canonne, Kamath & Steinke 2020), so the set of levels costs (ρ, δ) with
    ρ = Δ²/(2σ²). Levels are never read from the data for free. Returns the levels and the threshold.
    """
    counts = series.dropna().value_counts(sort=False)
    noisy = counts.to_numpy() + discrete_gaussian(sigma, len(counts), rng)
    tau = 1.0 + sigma * math.sqrt(2.0 * math.log(1.0 / delta))
    kept = counts.index.to_numpy(dtype=object)[noisy >= tau]
    try:
        kept = np.sort(kept)
    except TypeError:
        kept = kept[np.argsort(kept.astype(str))]
    return kept, tau


def encode(data: pd.DataFrame, specs: list[ColumnSpec], strict: bool) -> tuple[np.ndarray, int, int]:
    """Integer codes (n, d); rows with a value outside a categorical domain, or a missing or
    non-numeric value in a numeric column, are dropped and counted (no row left: zero rows).

    Numeric values outside their bounds are clipped into the end cells and counted. Returns
    (codes, dropped rows, clipped values). With `strict`, a dropped row is an error instead: a
    check for the data holder, whose outcome depends on the data (not private).
    """
    cols = []
    keep = np.ones(len(data), dtype=bool)
    clipped = 0
    for spec in specs:
        s = data[spec.name]
        if spec.levels is not None:
            code = pd.Index(spec.levels).get_indexer(s).astype(np.int64)
            if (code < 0).any():  # levels given as text for a numeric column (CLI, JSON schema)
                text = pd.Index(spec.levels.astype(str)).get_indexer(s.astype(str))
                code = np.where(code < 0, text, code)
            outside = code < 0
            if strict and outside.any():
                bad = pd.unique(s[outside])[:5]
                raise DataError(
                    f"column {spec.name!r} has values outside its declared domain; add them to "
                    f"domain[{spec.name!r}] or pass strict=False to drop those rows (they are counted)",
                    private_detail=f"{int(outside.sum())} values, e.g. {list(bad)!r}")
            keep &= ~outside
        else:
            e = spec.edges
            assert e is not None
            x = pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64)
            missing = np.isnan(x)
            if strict and missing.any():
                raise DataError(
                    f"column {spec.name!r} has missing or non-numeric values; fill them first, "
                    "give the column a categorical domain or pass strict=False to drop those rows",
                    private_detail=f"{int(missing.sum())} values")
            keep &= ~missing
            out = (x < e[0]) | (x > e[-1])
            clipped += int(out.sum())
            code = np.clip(np.searchsorted(e, x, side="right") - 1, 0, len(e) - 2)
        cols.append(code)
    codes = np.column_stack(cols) if cols else np.zeros((len(data), 0), dtype=np.int64)
    return codes[keep], int((~keep).sum()), clipped


def decode(codes: np.ndarray, specs: list[ColumnSpec], *, rng: Rng) -> pd.DataFrame:
    """Codes back to values: levels, or uniform within a numeric cell (integers: uniform integer)."""
    out: dict[str, object] = {}
    for j, spec in enumerate(specs):
        c = codes[:, j]
        if spec.levels is not None:
            values = pd.Series(spec.levels[c], dtype=object)
            try:
                out[spec.name] = values.astype(spec.dtype)
            except (TypeError, ValueError):
                out[spec.name] = values
        else:
            e = spec.edges
            assert e is not None
            u = e[c] + rng.random(len(c)) * (e[c + 1] - e[c])
            out[spec.name] = np.floor(u + 0.5).astype(spec.dtype) if spec.integer \
                else u.astype(spec.dtype)
    return pd.DataFrame(out)
