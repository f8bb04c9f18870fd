"""Events (sets of outputs) and the candidate families an audit searches over.

Each family shapes its events on one half of the selection runs (the build half: cut points,
frequent values, their order) and counts, in one vectorized pass over the other half of both
inputs, how often every one of its events occurs, so the search is not fooled by noise it fit.
Families: threshold and interval events between quantile cuts
(StatDP's thresholds and the histogram bins of Google's stochastic tester), point masses and
likelihood-ordered unions of them for discrete outputs (the optimal event for a discrete
mechanism is a set of values, Kairouz et al. 2015 Thm 2.1), whole-vector point masses, and the
float structure of outputs (lowest set bit, declared lattice, reachability; Mironov 2012).
Only the event the search keeps is turned into an `Event` and evaluated on fresh samples.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

import numpy as np

from bayesdp.audit.floats import lowest_bit, off_lattice
from bayesdp.errors import DataError

CUTS = 64  # quantile cut points per scalar column: 2,145 interval events
TOP_VALUES = 256  # most frequent values kept for point-mass events
_SHOWN = 8  # values spelled out in the description of a union


@dataclass(frozen=True)
class Event:
    """A set S of outputs, fixed before the test samples are drawn; `contains` is vectorized."""

    description: str
    _: KW_ONLY
    contains: Callable[[np.ndarray], np.ndarray] = field(compare=False, repr=False)

    def count(self, outputs: np.ndarray) -> int:
        """How many of the outputs (one per row) lie in S."""
        hits = np.asarray(self.contains(outputs))
        if hits.shape != (len(outputs),) or hits.dtype != np.bool_:
            raise DataError(
                f"event {self.description!r} must return one boolean per output, "
                f"got dtype {hits.dtype} and shape {hits.shape} for {len(outputs)} outputs"
            )
        return int(np.count_nonzero(hits))


@dataclass(frozen=True)
class Family:
    """Hit counts of many events under each input, and how to build event i."""

    counts0: np.ndarray
    counts1: np.ndarray
    build: Callable[[int], Event]

    @property
    def size(self) -> int:
        return int(self.counts0.size)


def _column(j: int | None) -> Callable[[np.ndarray], np.ndarray]:
    if j is None:
        return lambda out: out
    return lambda out: out[:, j]


def _name(j: int | None) -> str:
    return "output" if j is None else f"output[{j}]"


def interval_family(
    b0: np.ndarray, b1: np.ndarray, s0: np.ndarray, s1: np.ndarray, j: int | None
) -> Family | None:
    """Events lo < x ≤ hi between quantile cuts of the build values (thresholds at ±inf ends)."""
    pooled = np.concatenate([b0, b1])
    pooled = pooled[np.isfinite(pooled)]
    if pooled.size == 0:
        return None
    distinct = np.unique(pooled)
    if distinct.size <= CUTS:
        cuts = distinct
    else:
        cuts = np.unique(np.quantile(pooled, np.linspace(0, 1, CUTS + 1), method="inverted_cdf"))
    edges = np.concatenate([[-np.inf], cuts, [np.inf]])
    le0 = np.searchsorted(np.sort(s0), edges, side="right")
    le1 = np.searchsorted(np.sort(s1), edges, side="right")
    le0[0] = le1[0] = 0  # the lowest edge lies below everything, -inf included
    i, k = np.triu_indices(edges.size, 1)
    name, col = _name(j), _column(j)

    def build(m: int) -> Event:
        lo, hi = float(edges[i[m]]), float(edges[k[m]])
        if i[m] == 0 and hi == np.inf:
            return Event(f"{name} is not nan", contains=lambda out: col(out) == col(out))
        if i[m] == 0:
            return Event(f"{name} <= {hi!r}", contains=lambda out: col(out) <= hi)
        text = f"{name} > {lo!r}" if hi == np.inf else f"{lo!r} < {name} <= {hi!r}"
        return Event(text, contains=lambda out: (col(out) > lo) & (col(out) <= hi))

    return Family(le0[k] - le0[i], le1[k] - le1[i], build)


def _keyed(values: np.ndarray) -> np.ndarray:
    """One comparable key per output: the value itself, or the row's bytes for vector outputs."""
    if values.ndim == 1:
        return values
    rows = np.ascontiguousarray(values)
    return rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()


def point_family(
    b0: np.ndarray, b1: np.ndarray, s0: np.ndarray, s1: np.ndarray, j: int | None,
    rows: bool = False,
) -> Family | None:
    """Point masses of the values most frequent in the build runs, and unions ordered by their ratio."""
    keys = np.concatenate([_keyed(b0), _keyed(b1)])
    values, inverse, total = np.unique(keys, return_inverse=True, return_counts=True)
    if values.size == keys.size:  # every output distinct: no point carries mass
        return None
    ratio = np.log(
        (np.bincount(inverse[: len(b0)], minlength=values.size) + 0.5)
        / (np.bincount(inverse[len(b0) :], minlength=values.size) + 0.5)
    )
    keep = np.argsort(-total, kind="stable")[:TOP_VALUES]
    values, ratio = values[keep], ratio[keep]
    c0, c1 = _tally(values, _keyed(s0)), _tally(values, _keyed(s1))
    # Unions of the m values most in favour of input 0 (resp. 1) in the build runs, m = 2..K.
    order = np.argsort(ratio, kind="stable")
    ups, downs = order[::-1], order
    members = [np.array([v]) for v in range(values.size)]
    counts0, counts1 = [c0], [c1]
    for seq in (ups, downs):
        counts0.append(np.cumsum(c0[seq])[1:])
        counts1.append(np.cumsum(c1[seq])[1:])
        members += [seq[: m + 1] for m in range(1, seq.size)]
    name = "output" if rows else _name(j)
    col = _column(j)

    def display(v: np.generic) -> str:
        if rows:
            return repr(np.frombuffer(v.tobytes(), dtype=b0.dtype).tolist())
        return repr(v.item())

    def build(m: int) -> Event:
        chosen = values[members[m]]
        shown = ", ".join(display(v) for v in chosen[:_SHOWN])
        more = f", ... ({chosen.size} values)" if chosen.size > _SHOWN else ""
        text = f"{name} == {shown}" if chosen.size == 1 else f"{name} in {{{shown}{more}}}"
        if rows:
            return Event(text, contains=lambda out: np.isin(_keyed(np.asarray(out)), chosen))
        nan = bool(np.any(chosen != chosen))
        return Event(
            text, contains=lambda out: np.isin(col(out), chosen) | (nan & (col(out) != col(out)))
        )

    return Family(np.concatenate(counts0), np.concatenate(counts1), build)


def precision_family(
    b0: np.ndarray, b1: np.ndarray, s0: np.ndarray, s1: np.ndarray, j: int | None
) -> Family:
    """"x is (not) a multiple of 2^k" for every k seen in the build runs (Haney et al. 2022)."""
    ks = np.unique(np.concatenate([lowest_bit(b0), lowest_bit(b1)]))
    low0, low1 = np.sort(lowest_bit(s0)), np.sort(lowest_bit(s1))
    below0 = np.searchsorted(low0, ks, side="left")
    below1 = np.searchsorted(low1, ks, side="left")
    name, col = _name(j), _column(j)

    def build(m: int) -> Event:
        k = int(ks[m % ks.size])
        if m < ks.size:
            return Event(f"{name} is not a multiple of 2^{k}", contains=lambda out: lowest_bit(col(out)) < k)
        return Event(f"{name} is a multiple of 2^{k}", contains=lambda out: lowest_bit(col(out)) >= k)

    return Family(
        np.concatenate([below0, low0.size - below0]),
        np.concatenate([below1, low1.size - below1]),
        build,
    )


def single(event: Event, s0: np.ndarray, s1: np.ndarray) -> Family:
    """A family of one explicit event (declared lattice, reachability, or given by the caller)."""
    return Family(
        np.array([event.count(s0)]), np.array([event.count(s1)]), lambda _m: event
    )


def lattice_event(grid: float, j: int | None) -> Event:
    """Outputs off the lattice the mechanism declares (it promises every output is a multiple)."""
    name, col = _name(j), _column(j)
    return Event(
        f"{name} is not a multiple of the declared grid {grid!r}",
        contains=lambda out: off_lattice(col(out), grid),
    )


def _tally(values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """How often each of the (distinct) `values` occurs among `keys`."""
    order = np.argsort(values, kind="stable")
    ranked = values[order]
    at = np.searchsorted(ranked, keys).clip(0, ranked.size - 1)
    match = ranked[at] == keys
    if ranked.dtype.kind == "f":
        match |= np.isnan(ranked[at]) & np.isnan(keys)
    counts = np.zeros(values.size, dtype=np.int64)
    counts[order] = np.bincount(at[match], minlength=values.size)
    return counts


def auto_families(
    b0: np.ndarray, b1: np.ndarray, s0: np.ndarray, s1: np.ndarray
) -> list[Family]:
    """Every automatic family for outputs of shape (n,) or (n, k): built on b, counted on s."""
    families: list[Family | None] = []
    columns = [None] if b0.ndim == 1 else list(range(b0.shape[1]))
    numeric = np.issubdtype(b0.dtype, np.number) or b0.dtype == np.bool_
    for j in columns:
        c0, c1, d0, d1 = (x if j is None else x[:, j] for x in (b0, b1, s0, s1))
        if numeric:
            f0, f1, e0, e1 = (c.astype(np.float64) for c in (c0, c1, d0, d1))
            families.append(interval_family(f0, f1, e0, e1, j))
        families.append(point_family(c0, c1, d0, d1, j))
        if np.issubdtype(b0.dtype, np.floating):
            families.append(precision_family(c0, c1, d0, d1, j))
    if b0.ndim == 2 and b0.shape[1] > 1 and numeric:
        families.append(point_family(b0, b1, s0, s1, None, rows=True))
    return [f for f in families if f is not None]
