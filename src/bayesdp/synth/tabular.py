"""Synthetic tables from noisy marginals: MST (the fast default), AIM, and independent columns."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

import numpy as np
import pandas as pd

from bayesdp.errors import DataError, check_delta, check_positive_int, invalid
from bayesdp.mechanisms import Exponential
from bayesdp.mechanisms.base import check_in_range
from bayesdp.noise import Rng, resolve_rng
from bayesdp.privacy import RELATIONS, Guarantee, Ledger, Relation, charge
from bayesdp.synth.aim import Spend, aim, full_table, full_table_fits, start
from bayesdp.synth.budget import rho_for, stated
from bayesdp.synth.encode import (
    DEFAULT_BINS,
    ColumnSpec,
    categorical_spec,
    decode,
    discover_levels,
    encode,
    numeric_spec,
)
from bayesdp.synth.measure import Data, noisy
from bayesdp.synth.pgm import GraphModel, Variance
from bayesdp.synth.tree import TreeModel, fit_tree

# Cells per numeric column: a pair of columns is fitted on a table of bins² cells.
MAX_BINS = 1000
EPSILON_RANGE = (1e-12, 1e5)

METHODS = ("mst", "aim", "independent")
# Each method's model as a sentence names it, with its article ("an MST model").
MODEL_WORDS = {"mst": "an MST model", "aim": "an AIM model", "independent": "a model of independent columns"}
# Shares of the budget spent on privately discovering categorical domains, when any is needed.
DISCOVERY_RHO_SHARE = 0.1
DISCOVERY_DELTA_SHARE = 0.5


@dataclass(frozen=True)
class Synthesizer:
    """A fitted private model of a table; `sample(k)` draws synthetic rows at no further privacy cost.

    `guarantee` covers everything the data was used for (domain discovery, measurements,
    selections). `edges` are the column pairs the model keeps dependent. `n_estimate` is the
    noisy record count; `dropped` (rows outside a categorical domain) and `clipped` (numeric
    values moved into their bounds) are curator-side diagnostics, not private.
    """

    specs: tuple[ColumnSpec, ...]
    _: KW_ONLY
    model: TreeModel | GraphModel
    guarantee: Guarantee
    method: str
    n_estimate: float
    edges: tuple[tuple[str, str], ...]
    rho: float
    dropped: int = 0
    clipped: int = 0
    discovered: tuple[str, ...] = field(default=())

    @property
    def columns(self) -> list[str]:
        return [s.name for s in self.specs]

    def sample(self, k: int | None = None, *, rng: Rng | None = None, iid: bool = False) -> pd.DataFrame:
        """k synthetic rows (default: the noisy n) with the input's columns and dtypes.

        By default the rows follow the model's expected counts, rounded group by group along the
        model's tree (less sampling error); `iid=True` draws independent rows instead.
        Post-processing of the private model (W&Z Lemma 2.6(2)); the guarantee and explanation
        travel in `df.attrs`. A seeded `rng` is for tests only.
        """
        count = max(1, round(self.n_estimate)) if k is None else check_positive_int("k", k)
        if not isinstance(iid, bool):
            raise invalid("iid", iid, "True or False")
        g = resolve_rng(rng)
        df = decode(self.model.sample(count, rng=g, iid=iid), list(self.specs), rng=g)
        df.attrs["guarantee"] = self.guarantee
        df.attrs["explanation"] = self.explain()
        return df

    def marginal(self, columns: list[str]) -> np.ndarray:
        """The model's exact probability table of one or two columns (cells as in the specs)."""
        idx = [self._index(c) for c in columns]
        if len(idx) == 1:
            return self.model.marginals()[idx[0]]
        if len(idx) == 2:
            return self.model.pair(idx[0], idx[1])
        raise invalid("columns", columns, "one or two column names")

    def _index(self, name: str) -> int:
        if name not in self.columns:
            raise invalid("columns", name, f"one of {self.columns}")
        return self.columns.index(name)

    def _full_cells(self) -> int | None:
        """The cells of the full contingency table when it was measured whole (small domains)."""
        whole = tuple(range(len(self.specs)))
        theta = self.model.estimate.theta if isinstance(self.model, GraphModel) else {}
        return int(theta[whole].size) if len(whole) > 1 and whole in theta else None

    def explain(self) -> str:
        found = f" Domains of {list(self.discovered)} were discovered privately." \
            if self.discovered else ""
        cells = self._full_cells()
        if cells is None:
            pairs = ", ".join(f"{a}~{b}" for a, b in self.edges) or "none"
            measured, source = f"noisy marginals with {self.guarantee}", "noisy marginals"
            kept = f"Dependent column pairs kept: {pairs}."
            lost = " and patterns beyond the kept pairs are not preserved"
        else:
            measured = (f"the noisy full contingency table of {', '.join(self.columns)} ({cells:,} "
                        f"cells) with {self.guarantee}")
            source, lost = "noisy table", ""
            kept = ("The domain is small enough that every combination of values was measured at "
                    "once instead of by marginals, so all dependence between the columns is kept, "
                    "up to the noise.")
        return (
            f"Synthetic rows from {MODEL_WORDS[self.method]} of {len(self.specs)} columns, fitted to "
            f"{measured} (ρ = {self.rho:.4g} zCDP for the measurements). {kept}{found} Any number "
            f"of rows may be drawn at no further privacy cost; they carry no more information than "
            f"the {source}, so their count is not a sample size{lost}. "
            f"{self.guarantee.explain(n=max(1, round(self.n_estimate)))}"
        )


Fitted = tuple[TreeModel | GraphModel, float, list[tuple[int, int]]]


@dataclass
class _Measurements:
    """Noisy 1-way and 2-way marginals, each measured once, for the tree fit (`fit_tree`)."""

    sizes: list[int]
    one: dict[int, tuple[np.ndarray, Variance]] = field(default_factory=dict)
    two: dict[tuple[int, int], tuple[np.ndarray, Variance]] = field(default_factory=dict)

    def add(self, key: int | tuple[int, int], y: np.ndarray, var: Variance) -> None:
        store: dict = self.one if isinstance(key, int) else self.two  # type: ignore[type-arg]
        store[key] = (y.astype(np.float64), var)

    def fit(self) -> tuple[TreeModel, float]:
        d = len(self.sizes)
        keys = list(self.two)
        return fit_tree(
            self.sizes, [self.one[i][0] for i in range(d)], [self.one[i][1] for i in range(d)],
            keys, [self.two[e][0] for e in keys], [float(self.two[e][1]) for e in keys],
        )

    def result(self) -> Fitted:
        model, n_hat = self.fit()
        return model, n_hat, list(self.two)


def _components(d: int, edges: list[tuple[int, int]]) -> np.ndarray:
    comp = np.arange(d)
    for i, j in edges:
        comp[comp == comp[j]] = comp[i]
    return comp


def _mst(data: Data, rho: float, s1: float, s2: float, rng: Rng) -> Fitted:
    """MST (McKenna, Miklau & Sheldon 2021, Alg. 1): ρ/3 on 1-way marginals, ρ/3 on a private
    maximum spanning tree by d−1 exponential mechanisms (each ε²/8-zCDP, Cesar & Rogers 2021),
    ρ/3 on the chosen 2-way marginals, all after compressing rare levels. When the domain is
    small against n·ρ (`full_table_fits`), the last 2ρ/3 measure the full table instead."""
    d = len(data.sizes)
    share = rho / 3.0 if d > 1 else rho
    sigma1 = math.sqrt(d * s2 / (2.0 * share))
    first = start(data, sigma1, rng)
    if d > 1 and full_table_fits(first, rho - share, s2):
        return full_table(first, rho - share, s2, rng, Spend())
    small, maps, weights = first.data, first.maps, first.weights
    meas = _Measurements(small.sizes)
    for m in first.measurements:
        meas.add(m.clique[0], m.y, m.var)
    model, n_hat = meas.fit()
    if d == 1:
        return model.expand(maps, weights), n_hat, []
    eps_round = math.sqrt(8.0 * share / (d - 1))
    allpairs = [(i, j) for i in range(d) for j in range(i + 1, d)]
    score = dict(zip(allpairs, small.errors(model.pair, n_hat, allpairs), strict=True))
    chosen: list[tuple[int, int]] = []
    for _ in range(d - 1):
        comp = _components(d, chosen)
        cand = [p for p in allpairs if comp[p[0]] != comp[p[1]]]
        chooser = Exponential(eps_round, sensitivity=s1)
        pick = cand[chooser.select_index(np.array([score[p] for p in cand]), rng=rng)]
        chosen.append(pick)
    sigma2 = math.sqrt((d - 1) * s2 / (2.0 * share))
    for i, j in chosen:
        meas.add((i, j), noisy(small.two(i, j), sigma2, rng), sigma2**2)
    model, n_hat = meas.fit()
    return model.expand(maps, weights), n_hat, chosen


def _independent(data: Data, rho: float, s1: float, s2: float, rng: Rng) -> Fitted:
    """Every column's 1-way marginal with all of ρ, no dependence: the baseline."""
    d = len(data.sizes)
    meas = _Measurements(data.sizes)
    sigma = math.sqrt(d * s2 / (2.0 * rho))
    for i in range(d):
        meas.add(i, noisy(data.one(i), sigma, rng), sigma**2)
    return meas.result()


_FITTERS: dict[str, Callable[[Data, float, float, float, Rng], Fitted]] = {
    "mst": _mst, "aim": aim, "independent": _independent}


def _specs(
    data: pd.DataFrame,
    bounds: dict[str, object],
    domain: dict[str, object],
    bins: int | dict[str, int],
) -> tuple[list[ColumnSpec], list[str]]:
    """Specs for the columns with public domains or bounds, and the names needing discovery."""
    specs: list[ColumnSpec] = []
    discover = _to_discover(data, bounds, domain)
    for name in data.columns:
        s = data[name]
        if name in domain:
            specs.append(categorical_spec(name, s, domain[name]))
        elif name in discover:
            specs.append(ColumnSpec(name, None, None, s.dtype))
        else:
            m = bins.get(name, DEFAULT_BINS) if isinstance(bins, dict) else bins
            specs.append(numeric_spec(name, s, bounds[name], m))
    return specs, discover


def _to_discover(data: pd.DataFrame, bounds: dict[str, object], domain: dict[str, object]) -> list[str]:
    """The columns whose levels are found privately, from the schema alone (names and dtypes):
    neither a public domain nor numeric. A numeric column needs public bounds."""
    discover: list[str] = []
    for name, dtype in data.dtypes.items():
        if name in domain:
            continue
        if pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
            if name not in bounds:
                raise DataError(
                    f"column {name!r} is numeric and has no bounds: pass bounds={{{name!r}: "
                    "(lo, hi)}} from public knowledge (not from the data), or domain="
                    f"{{{name!r}: [levels]}} to treat it as categorical"
                )
        else:
            discover.append(str(name))
    return discover


def _selected(data: object, columns: list[str] | None) -> pd.DataFrame:
    """The data as a frame of `columns` (None: all), refused when they are missing or none."""
    frame = data if isinstance(data, pd.DataFrame) else pd.DataFrame(data)  # type: ignore[call-overload]
    if columns is not None:
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise DataError(f"columns {missing} are not in the data (it has {list(frame.columns)})")
        frame = frame[list(columns)]
    if frame.shape[1] == 0:
        raise DataError("the table has no columns")
    return frame


def _nonempty(frame: pd.DataFrame) -> pd.DataFrame:
    if len(frame) == 0:
        raise DataError("the table is empty (no rows)")
    return frame


def _budget(frame: pd.DataFrame, epsilon: float, delta: float, bounds: dict[str, object],
            domain: dict[str, object], relation: Relation) -> tuple[float, float, Guarantee]:
    """The δ of level discovery, the ρ of the fit and the guarantee, from the schema alone."""
    delta_extra = DISCOVERY_DELTA_SHARE * delta if _to_discover(frame, bounds, domain) else 0.0
    rho = rho_for(epsilon, delta - delta_extra)
    return delta_extra, rho, stated([rho], delta - delta_extra, delta_extra, relation)


def fit_guarantee(data: object, epsilon: float, delta: float = 1e-9, columns: list[str] | None = None,
                  bounds: dict[str, object] | None = None, domain: dict[str, object] | None = None,
                  relation: Relation = "add_remove") -> Guarantee:
    """The guarantee `synthesize` with these arguments states, from the schema alone (column
    names and types): to spend it before the data are read."""
    return _budget(_selected(data, columns), epsilon, delta, dict(bounds or {}), dict(domain or {}),
                   relation)[2]


def check_fit(data: object, columns: list[str] | None = None, bounds: dict[str, object] | None = None,
              domain: dict[str, object] | None = None, bins: int | dict[str, int] = DEFAULT_BINS) -> None:
    """Raise, for the data holder, if these data leave `synthesize` nothing to fit (no rows, or
    every row dropped for a value outside the declared domains or missing): `synthesize` itself
    then fits zero rows, a defined outcome, so that whether it fails never depends on the data;
    a service checks its data once at start-up. Only private level discovery can still fail,
    on its noisy counts (a differentially private outcome)."""
    frame = _nonempty(_selected(data, columns))
    specs, discover = _specs(frame, dict(bounds or {}), dict(domain or {}), bins)
    if not len(encode(frame, [s for s in specs if s.name not in discover], strict=False)[0]):
        raise DataError(
            "every row has a value outside the declared domains (or a missing value in a numeric "
            "column): check the levels (and their types) given in domain",
            private_detail=f"all {len(frame)} rows")


def synthesize(
    data: object,
    epsilon: float,
    delta: float = 1e-9,
    columns: list[str] | None = None,
    bounds: dict[str, object] | None = None,
    method: str = "mst",
    domain: dict[str, object] | None = None,
    bins: int | dict[str, int] = DEFAULT_BINS,
    relation: Relation = "add_remove",
    strict: bool = False,
    *,
    ledger: Ledger | None = None,
    rng: Rng | None = None,
) -> Synthesizer:
    """Fit a private synthesizer to a table, (ε, δ)-DP through zCDP accounting.

    Categorical levels come from `domain` (public) or are discovered privately (10% of ρ and half
    of δ, shared by the columns that need it); numeric columns need public `bounds` and are cut
    into `bins` equal cells, values drawn uniformly within a cell on output. Rows with a value
    outside a declared domain are dropped and counted (`strict=True`: an error). A seeded `rng`
    is for tests only: it makes the noise predictable. `epsilon` in [1e-12, 1e5] (spent in
    zCDP, which stays finite there), `delta` in [1e-300, 1), `bins` at most MAX_BINS per column.
    With `ledger`, the guarantee is spent once the schema (column names and types) is known and
    before any value is read. After it nothing fails on the data's values (`strict=True` aside):
    rows with a missing or non-numeric value in a numeric column are dropped and counted too,
    and a table with no row left (or none at all) is fitted as zero rows; only private level
    discovery can still refuse, on its noisy counts.
    """
    check_in_range("epsilon", epsilon, EPSILON_RANGE)
    if not check_delta("delta", delta) >= 1e-300:
        raise invalid("delta", delta, "in [1e-300, 1): zCDP accounting and level discovery need δ > 0")
    for m in (bins.values() if isinstance(bins, dict) else [bins]):
        if check_positive_int("bins", m) > MAX_BINS:
            raise invalid("bins", m, f"a positive integer up to {MAX_BINS:,} (pair tables hold bins² cells)")
    if method not in METHODS:
        raise invalid("method", method, f"one of {METHODS}")
    if relation not in RELATIONS:
        raise invalid("relation", relation, f"one of {RELATIONS}")
    frame = _selected(data, columns)
    bounds, domain = dict(bounds or {}), dict(domain or {})
    delta_extra, rho, guarantee = _budget(frame, epsilon, delta, bounds, domain, relation)
    charge(ledger, guarantee, f"synthesize ({method})")
    specs, discover = _specs(frame, bounds, domain, bins)
    g = resolve_rng(rng)
    s2 = 2.0 if relation == "replace_one" else 1.0  # squared L2 sensitivity of one histogram
    s1 = 2.0 if relation == "replace_one" else 1.0  # L1 sensitivity of one histogram
    rho_main = rho
    if discover:
        rho_disc = DISCOVERY_RHO_SHARE * rho
        rho_main = rho - rho_disc
        sigma = math.sqrt(len(discover) * s2 / (2.0 * rho_disc))
        for k, spec in enumerate(specs):
            if spec.name in discover:
                levels, tau = discover_levels(frame[spec.name], sigma, delta_extra / len(discover), rng=g)
                if len(levels) < 2:
                    raise DataError(
                        f"column {spec.name!r}: {len(levels)} level(s) cleared the private "
                        f"discovery threshold {tau:.4g}; give domain={{{spec.name!r}: [levels]}} "
                        "or drop the column"
                    )
                specs[k] = categorical_spec(spec.name, frame[spec.name], levels)
    codes, dropped, clipped = encode(frame, specs, strict)
    sizes = [s.size for s in specs]
    model, n_hat, pairs = _FITTERS[method](Data(codes, sizes), rho_main, s1, s2, g)
    names = [s.name for s in specs]
    return Synthesizer(
        specs=tuple(specs), model=model,
        guarantee=guarantee,
        method=method, n_estimate=n_hat,
        edges=tuple((names[i], names[j]) for i, j in pairs),
        rho=rho, dropped=dropped, clipped=clipped, discovered=tuple(discover),
    )
