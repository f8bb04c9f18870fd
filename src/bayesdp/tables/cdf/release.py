"""A released hierarchical histogram: any range count, every quantile and the CDF, from one release.

Everything here is post-processing of the noisy tree (Dwork & Roth 2014, Prop. 2.1): asking more
ranges or quantiles costs nothing more.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any, Literal

import numpy as np
import pandas as pd

from bayesdp.errors import InvalidParameter, check_finite, check_open_unit, invalid
from bayesdp.tables.cdf.aggregate import Cdf
from bayesdp.tables.cdf.tree import half_widths
from bayesdp.tables.estimate import Estimate, consistent
from bayesdp.tables.release import Release


def counted(est: Estimate) -> Estimate:
    """A count and its interval clamped at 0, which the exact count never is below (`consistent`):
    the bins' counts stay unclamped, so that their sums stay unbiased."""
    return consistent((0.0, np.inf), est)


@dataclass(frozen=True)
class CdfRelease(Release):
    """One released hierarchical histogram per group (a `Release` whose table is its bins).

    `range(a, b)` counts the values in [a, b) and `quantile(q)` finds the q-quantile, each with an
    interval: a range's covers its exact (bounded, clipped) count with probability >= 1 - α;
    the quantiles' intervals hold for all q at once with probability >= 1 - α (a band over every
    cumulative count, α/bins each). Ranges are to bin resolution: a moves down and b up to a
    bin edge (so the bins counted hold all of [a, b)), and the end bins hold the values clipped
    into the bounds. Without group columns these return plain numbers; with them, a frame with a
    row per released group."""

    @classmethod
    def of(cls, release: Release) -> CdfRelease:
        return cls(release.keys, **{f.name: getattr(release, f.name) for f in fields(release)
                                    if f.name != "keys"})

    @cached_property
    def _cdf(self) -> tuple[str, Cdf, Any]:
        (name, step), = ((n, s) for n, s in self.plan.steps.items() if isinstance(s.aggregate, Cdf))
        assert isinstance(step.aggregate, Cdf)
        return name, step.aggregate, step.parts["tree"].mechanism

    @property
    def edges(self) -> np.ndarray:
        return np.asarray(self._cdf[1].edges)

    @cached_property
    def _sums(self) -> np.ndarray:
        """Consistent cumulative counts, groups x (bins + 1), from 0."""
        x = self.estimates[self._cdf[0]].value
        return np.concatenate([np.zeros((len(x), 1)), np.cumsum(x, axis=1)], axis=1)

    def _half_widths(self, start: np.ndarray, stop: np.ndarray, alpha: float) -> np.ndarray:
        _, agg, mech = self._cdf
        norm2, top = agg.tree.weights(start, stop)
        return half_widths(mech.family, mech.scale, norm2, top, alpha)

    def _edge(self, value: float | None, default: int, name: str,
              side: Literal["left", "right"]) -> int:
        """The index of the edge at or below `value` (side "right") or at or above it ("left"),
        with a tolerance of 1e-9 of the span for edges that floats do not hit exactly."""
        if value is None:
            return default
        v = check_finite(name, value)
        e = self.edges
        slack = 1e-9 * (e[-1] - e[0]) * (1 if side == "right" else -1)
        found = int(np.searchsorted(e, v + slack, side=side))
        return int(np.clip(found - (side == "right"), 0, len(e) - 1))

    def _shaped(self, columns: dict[str, np.ndarray]) -> Any:
        if self.keys.columns.empty:
            return tuple(float(c[0]) for c in columns.values())
        return pd.concat([self.keys.reset_index(drop=True), pd.DataFrame(columns)], axis=1)

    def range(self, a: float | None = None, b: float | None = None) -> Any:
        """(estimate, low, high) of the count of values in [a, b) (None: from the lowest / to the
        highest edge), at level 1 - α: exact, as the consistent counts are a linear function of
        the noisy nodes (`tree.half_widths`); clamped at 0 (`counted`)."""
        i, j = self._edge(a, 0, "a", "right"), self._edge(b, len(self.edges) - 1, "b", "left")
        if a is not None and b is not None and not a <= b:
            raise invalid("b", b, f">= a = {a!r}")
        j = i if a is not None and a == b else max(i, j)  # [a, a) is empty
        value = self._sums[:, j] - self._sums[:, i]
        w = self._half_widths(np.array([i]), np.array([j]), self.alpha)[0] if j > i else 0.0
        est = counted(Estimate(value, value - w, value + w))
        return self._shaped({"estimate": est.value, "low": est.low, "high": est.high})

    @cached_property
    def _band(self) -> tuple[np.ndarray, np.ndarray]:
        """Bounds on every cumulative count 1..bins holding together with probability >= 1 - α."""
        k = np.arange(1, len(self.edges))
        w = self._half_widths(np.zeros_like(k), k, self.alpha / k.size)
        return self._sums[:, 1:] - w, self._sums[:, 1:] + w

    def quantiles(self, qs: Sequence[float]) -> pd.DataFrame:
        """The q-quantiles, one row per group and q: q, value, low, high (see the class)."""
        if isinstance(qs, str | bytes) or not isinstance(qs, Iterable):
            raise invalid("qs", qs, "a list of levels q in (0, 1), such as [0.25, 0.5, 0.75] "
                                    "(for one level, quantile(q))")
        levels = [check_open_unit("q", q) for q in qs]
        if not levels:
            raise InvalidParameter("quantiles() needs at least one q in (0, 1)")
        rows = [self._quantile(q) for q in levels]
        out = pd.concat([pd.DataFrame({"q": q, "value": v, "low": lo, "high": hi}) for q, (v, lo, hi)
                         in zip(levels, rows, strict=True)], ignore_index=True)
        if self.keys.columns.empty:
            return out
        keys = pd.concat([self.keys] * len(levels), ignore_index=True)
        return pd.concat([keys, out], axis=1)

    def quantile(self, q: float) -> Any:
        """(value, low, high) of the q-quantile (see the class)."""
        if isinstance(q, Iterable) and not isinstance(q, str | bytes):
            raise invalid("q", q, "one level in (0, 1) (for several, quantiles([...]))")
        v, lo, hi = self._quantile(check_open_unit("q", q))
        return self._shaped({"value": v, "low": lo, "high": hi})

    def _quantile(self, q: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where the running maximum of the consistent cumulative counts (monotone, and unbiased
        where they rise) reaches q times their total, linear within its bin; its interval from
        the band: bins whose upper cumulative bound stays below q x the total's lower bound
        hold fewer than q of the values, and those whose lower bound reaches q x the total's
        upper bound, at least q."""
        e = self.edges
        f = np.maximum.accumulate(self._sums, axis=1)
        aim = q * self._sums[:, -1:]
        k = np.clip((f[:, 1:] < aim).sum(axis=1), 0, len(e) - 2)  # the bin holding the aim
        rows = np.arange(len(f))
        below, inside = f[rows, k], f[rows, k + 1] - f[rows, k]
        share = np.where(inside > 0, (aim[:, 0] - below) / np.where(inside > 0, inside, 1.0), 0.5)
        value = e[k] + np.clip(share, 0.0, 1.0) * (e[k + 1] - e[k])
        low_f, high_f = self._band
        fewer = high_f < q * low_f[:, -1:]
        enough = low_f >= q * high_f[:, -1:]
        n = fewer.shape[1]
        last_fewer = np.where(fewer.any(axis=1), n - np.argmax(fewer[:, ::-1], axis=1), 0)
        first_enough = np.where(enough.any(axis=1), np.argmax(enough, axis=1) + 1, n)
        low, high = e[last_fewer], e[first_enough]
        return np.clip(value, low, high), low, high

    def caveats(self) -> list[str]:
        """The release's caveats, and how the intervals of ranges and quantiles hold."""
        return [*super().caveats(),
                f"Each range's and each cumulative count's interval holds on its own at "
                f"{1 - self.alpha:.0%}; the quantiles' intervals hold for all quantiles together. "
                "Ranges are to bin resolution; null values count in no bin."]

    def to_pandas(self) -> pd.DataFrame:
        """One row per group and bin: the group keys; bin_low and bin_high (the bin is [bin_low,
        bin_high)); count, count_low, count_high (the bin's consistent count, unbiased so maybe
        negative, and its interval); cumulative, cumulative_low, cumulative_high (the count below
        bin_high, clamped at 0, and its interval). Each interval holds on its own at 1 - α."""
        e, x = self.edges, self.estimates[self._cdf[0]]
        bins, groups = len(e) - 1, len(x.value)
        k = np.arange(1, bins + 1)
        cw = np.tile(self._half_widths(np.zeros_like(k), k, self.alpha), groups)
        cum = self._sums[:, 1:].ravel()
        c = counted(Estimate(cum, cum - cw, cum + cw))
        out = pd.DataFrame({"bin_low": np.tile(e[:-1], groups), "bin_high": np.tile(e[1:], groups),
                            "count": x.value.ravel(), "count_low": x.low.ravel(),
                            "count_high": x.high.ravel(), "cumulative": c.value,
                            "cumulative_low": c.low, "cumulative_high": c.high})
        keys = self.keys.loc[self.keys.index.repeat(bins)].reset_index(drop=True)
        return pd.concat([keys, out], axis=1)

    def __repr__(self) -> str:
        return f"CdfRelease({len(self)} groups, {len(self.edges) - 1} bins, {self.guarantee})"

