"""The curator's service configuration (TOML), validated with errors that name the offending key.

    state = "state"                  # directory for the ledgers, analysts and audit log
    max_body_bytes = 1_000_000       # larger request bodies get 413
    rate_per_minute = 120            # per analyst (and failed logins per address and per analyst id)
                                     # a minute, then 429
    trusted_proxies = ["127.0.0.1"]  # reverse proxies whose X-Forwarded-For names the client
                                     # (addresses or networks; default none: the peer is the client)
    timing = { margin = 1.3 }        # deadlines: bayesdp.serve.timing (margin, slack, lanes, ...)
    [limits]                         # what one request may cost: see bayesdp.serve.limits
    max_bins = 10_000

    [datasets.hie]
    source = "hie.csv"               # CSV/Parquet/JSON, relative to this file
    privacy_unit = "zper"            # or false: each row is a different person
    unit_name = "person"             # what one unit is called, used as given
    unit_plural = "people"           # optional: its plural, where the console needs one
    description = "RAND Health Insurance Experiment, person-years"
    max_groups_per_unit = 1          # table-release options: defaults an analyst may override
    max_rows_per_group = 5
    budget = { epsilon = 2.0, delta = 1e-6, accounting = "basic" }   # per analyst
    analysts = ["alice", "bob"]      # only these analysts see it (default: every analyst)
    public_tables = { plans = "plans.csv" }  # public tables its SQL may JOIN (bayesdp.sql.joins)
    [datasets.hie.columns]           # the public schema: only these columns can be used
    coins = { domain = [0, 25, 50, 95, 100] }   # public keys
    meddol = { bounds = [0, 3000] }
    [datasets.hie.synthetic]         # only where privacy_unit = false
    epsilon = 1.0
    delta = 1e-9
    rows = 5000

    [holdouts.model]
    train = "train.csv"
    holdout = "holdout.csv"
    threshold = 0.04
    sigma = 0.01
    budget = 50
    share = 10                       # overflows one analyst may spend (default: the whole budget)
    analysts = ["alice"]             # only these analysts see it (default: every analyst)
"""

from __future__ import annotations

import ipaddress
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bayesdp.errors import InvalidParameter, check_keys, invalid
from bayesdp.privacy import Guarantee
from bayesdp.privacy.filters import ACCOUNTINGS, PLD_REFUSED
from bayesdp.serve.limits import Limits, parse_limits
from bayesdp.serve.timing import TimingConfig, parse_timing

_TOP = ("state", "max_body_bytes", "rate_per_minute", "trusted_proxies", "limits", "timing", "datasets",
        "holdouts")
_DATASET = ("source", "privacy_unit", "unit_name", "unit_plural", "description", "columns", "budget",
            "synthetic", "max_groups_per_unit", "max_rows_per_group", "alpha", "noise", "analysts",
            "public_tables")
_OPTIONS = ("max_groups_per_unit", "max_rows_per_group", "alpha", "noise")
_COLUMN = ("bounds", "domain", "description")
_BUDGET = ("epsilon", "delta", "accounting")
_SYNTHETIC = ("epsilon", "delta", "rows", "method", "bins")
_HOLDOUT = ("train", "holdout", "threshold", "sigma", "budget", "share", "description", "analysts")


@dataclass(frozen=True)
class Column:
    """A public column: numeric with public `bounds`, or with a public `domain` (its keys)."""

    name: str
    bounds: tuple[float, float] | None = None
    domain: tuple[Any, ...] | None = None
    description: str = ""


@dataclass(frozen=True)
class Budget:
    """What each analyst may spend on one dataset."""

    epsilon: float
    delta: float
    accounting: str

    def guarantee(self, unit: str) -> Guarantee:
        _accounting(self.accounting, "accounting")
        return Guarantee(self.epsilon, delta=self.delta, unit=unit)


def _accounting(accounting: Any, key: str) -> None:
    """A service budget's privacy filter (the library's, less gdp: its releases are discrete)."""
    if accounting == "pld":
        raise InvalidParameter(f"{key}: {PLD_REFUSED}")
    if accounting not in ACCOUNTINGS or accounting == "gdp":
        raise invalid(key, accounting, "one of ('basic', 'zcdp', 'advanced'): the service's "
                      "Gaussian releases are discrete, which the gdp filter refuses")


@dataclass(frozen=True)
class Synthetic:
    """One synthetic table per analyst: its (ε, δ), row count, method and bins per numeric column."""

    epsilon: float
    delta: float
    rows: int
    method: str = "mst"
    bins: int = 16


@dataclass(frozen=True)
class Dataset:
    name: str
    source: Path
    privacy_unit: str | None
    unit_name: str
    description: str
    columns: dict[str, Column]
    budget: Budget
    options: dict[str, Any] = field(default_factory=dict)
    synthetic: Synthetic | None = None
    analysts: tuple[str, ...] | None = None  # the analysts (by name) who may use it; None: all
    public_tables: dict[str, Path] = field(default_factory=dict)  # by name, for SQL JOINs
    unit_plural: str | None = None  # the plural of unit_name, when the curator gives one

    @property
    def unit(self) -> str:
        """The unit every guarantee of the dataset names: its `unit_name` ("person"), never the
        column that holds it."""
        return self.unit_name

    @property
    def former_unit(self) -> str:
        """The unit ledgers were created with before guarantees named `unit_name`: the privacy
        unit column, or "row"."""
        return self.privacy_unit or "row"

    def sql_metadata(self) -> dict[str, Any]:
        """This dataset as `bayesdp.sql` metadata: its privacy unit, release options, column bounds
        and public keys (its domains)."""
        columns = {c.name: {**({"bounds": list(c.bounds)} if c.bounds else {}),
                            **({"keys": list(c.domain)} if c.domain else {})} for c in self.columns.values()}
        return {"tables": {self.name: {"privacy_unit": self.privacy_unit or False, **self.options,
                                       "columns": columns},
                           # One row per join key: a row joining many would take longer.
                           **{n: {"public": True, "max_rows_per_key": 1} for n in self.public_tables}}}


@dataclass(frozen=True)
class Holdout:
    name: str
    train: Path
    holdout: Path
    threshold: float
    sigma: float
    budget: int
    description: str = ""
    share: int | None = None  # the overflows one analyst may spend; None: the whole budget
    analysts: tuple[str, ...] | None = None  # the analysts (by name) who may use it; None: all


@dataclass(frozen=True)
class Config:
    state: Path
    datasets: dict[str, Dataset]
    holdouts: dict[str, Holdout]
    max_body_bytes: int = 1_000_000
    rate_per_minute: int = 120
    trusted_proxies: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)
    timing: TimingConfig = field(default_factory=TimingConfig)


def load_config(path: str | Path) -> Config:
    """Read and validate a service configuration file."""
    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidParameter(f"cannot read the service configuration {str(p)!r}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidParameter(f"cannot parse the service configuration {str(p)!r}: {exc}") from None
    return parse_config(doc, p.resolve().parent)


def parse_config(doc: dict[str, Any], base: Path) -> Config:
    """Validate a parsed configuration; relative paths are taken from `base`."""
    check_keys(doc, _TOP, "the configuration")
    if "state" not in doc:
        raise InvalidParameter("state is missing: name the service's state directory, e.g. state = \"state\"")
    datasets = _table(doc, "datasets", "")
    if not datasets:
        raise InvalidParameter("datasets is missing or empty: define at least one [datasets.NAME]")
    parsed = {n: _dataset(n, d, base) for n, d in datasets.items()}
    timing = parse_timing(doc.get("timing"))
    return Config(
        state=_path(doc["state"], "state", base),
        datasets=parsed,
        holdouts={n: _holdout(n, h, base) for n, h in _table(doc, "holdouts", "").items()},
        max_body_bytes=_int(doc.get("max_body_bytes", 1_000_000), "max_body_bytes"),
        rate_per_minute=_int(doc.get("rate_per_minute", 120), "rate_per_minute"),
        trusted_proxies=_proxies(doc.get("trusted_proxies", [])),
        limits=parse_limits(doc.get("limits", {})),
        timing=timing,
    )


def _proxies(v: Any) -> tuple[str, ...]:
    allowed = "a list of the reverse proxies' IP addresses or networks, e.g. [\"127.0.0.1\", \"10.0.0.0/8\"]"
    if not isinstance(v, list) or not all(isinstance(p, str) for p in v):
        raise invalid("trusted_proxies", v, allowed)
    for p in v:
        try:
            ipaddress.ip_network(p, strict=False)
        except ValueError:
            raise invalid("trusted_proxies", p, allowed) from None
    return tuple(v)


def _dataset(name: str, d: Any, base: Path) -> Dataset:
    key = f"datasets.{name}"
    if not isinstance(d, dict):
        raise invalid(key, d, "a table")
    check_keys(d, _DATASET, key)
    for required in ("source", "privacy_unit", "columns", "budget"):
        if required not in d:
            raise InvalidParameter(f"{key}.{required} is missing")
    unit = d["privacy_unit"]
    if not (unit is False or (isinstance(unit, str) and unit)):
        raise invalid(f"{key}.privacy_unit", unit, "a column name, or false when each row is a person")
    columns = {c: _column(c, v, f"{key}.columns.{c}") for c, v in _table(d, "columns", key).items()}
    if not columns:
        raise InvalidParameter(f"{key}.columns is empty: publish at least one column")
    options = {k: d[k] for k in _OPTIONS if k in d}
    synthetic = None
    if "synthetic" in d:
        if unit is not False:
            raise InvalidParameter(
                f"{key}.synthetic needs privacy_unit = false: synthetic data is private per row, "
                "so it protects a person only when each person has one row")
        synthetic = _synthetic(d["synthetic"], f"{key}.synthetic")
    return Dataset(
        name=name, source=_path(d["source"], f"{key}.source", base, must_exist=True),
        privacy_unit=unit or None, unit_name=_str(d.get("unit_name", unit or "person"), f"{key}.unit_name"),
        description=_str(d.get("description", ""), f"{key}.description"), columns=columns,
        budget=_budget(d["budget"], f"{key}.budget", unit or "row"), options=options, synthetic=synthetic,
        analysts=_names(d["analysts"], f"{key}.analysts") if "analysts" in d else None,
        public_tables=_public_tables(name, d, key, base),
        unit_plural=_plural(d.get("unit_plural"), f"{key}.unit_plural"))


def _public_tables(name: str, d: dict[str, Any], key: str, base: Path) -> dict[str, Path]:
    """A dataset's public tables: name -> file (public data: every column may be read)."""
    out = {}
    for table, path in _table(d, "public_tables", key).items():
        if not table.isidentifier() or table == name:
            raise invalid(f"{key}.public_tables", table, f"a table name (an identifier) other than {name!r}")
        out[table] = _path(path, f"{key}.public_tables.{table}", base, must_exist=True)
    return out


def _names(v: Any, key: str) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(n, str) and n.strip() for n in v):
        raise invalid(key, v, "a list of analyst names (those who may use it)")
    return tuple(v)


def _column(name: str, v: Any, key: str) -> Column:
    if not isinstance(v, dict):
        raise invalid(key, v, "a table such as { bounds = [0, 100] } or { domain = [\"a\", \"b\"] }")
    check_keys(v, _COLUMN, key)
    bounds = None
    if "bounds" in v:
        b = v["bounds"]
        if not (isinstance(b, list) and len(b) == 2 and all(_finite(x) for x in b) and b[0] < b[1]):
            raise invalid(f"{key}.bounds", b, "two finite numbers [lo, hi] with lo < hi")
        bounds = (float(b[0]), float(b[1]))
    domain = None
    if "domain" in v:
        dom = v["domain"]
        if not (isinstance(dom, list) and dom and len(set(map(repr, dom))) == len(dom)):
            raise invalid(f"{key}.domain", dom, "a non-empty list of distinct public values")
        domain = tuple(dom)
    return Column(name, bounds, domain, _str(v.get("description", ""), f"{key}.description"))


def _budget(v: Any, key: str, unit: str) -> Budget:
    if not isinstance(v, dict):
        raise invalid(key, v, "a table { epsilon = ..., delta = ..., accounting = \"basic\" }")
    check_keys(v, _BUDGET, key)
    if "epsilon" not in v:
        raise InvalidParameter(f"{key}.epsilon is missing")
    accounting = v.get("accounting", "basic")
    _accounting(accounting, f"{key}.accounting")
    budget = Budget(_positive(v["epsilon"], f"{key}.epsilon"), _delta(v.get("delta", 0.0), f"{key}.delta"),
                    accounting)
    if accounting != "basic" and budget.delta == 0:
        raise invalid(f"{key}.delta", 0.0, f"> 0 with {accounting} accounting")
    budget.guarantee(unit)
    return budget


def _synthetic(v: Any, key: str) -> Synthetic:
    if not isinstance(v, dict):
        raise invalid(key, v, "a table { epsilon = ..., delta = ..., rows = ... }")
    check_keys(v, _SYNTHETIC, key)
    for required in ("epsilon", "rows"):
        if required not in v:
            raise InvalidParameter(f"{key}.{required} is missing")
    return Synthetic(_positive(v["epsilon"], f"{key}.epsilon"), _delta(v.get("delta", 1e-9), f"{key}.delta"),
                     _int(v["rows"], f"{key}.rows"), _str(v.get("method", "mst"), f"{key}.method"),
                     _int(v.get("bins", 16), f"{key}.bins"))


def _holdout(name: str, h: Any, base: Path) -> Holdout:
    key = f"holdouts.{name}"
    if not isinstance(h, dict):
        raise invalid(key, h, "a table")
    check_keys(h, _HOLDOUT, key)
    for required in ("train", "holdout", "threshold", "sigma", "budget"):
        if required not in h:
            raise InvalidParameter(f"{key}.{required} is missing")
    budget = _int(h["budget"], f"{key}.budget")
    share = None if "share" not in h else _int(h["share"], f"{key}.share")
    if share is not None and share > budget:
        raise invalid(f"{key}.share", share, f"at most the holdout's budget ({budget})")
    return Holdout(name, _path(h["train"], f"{key}.train", base, must_exist=True),
                   _path(h["holdout"], f"{key}.holdout", base, must_exist=True),
                   _positive(h["threshold"], f"{key}.threshold"), _positive(h["sigma"], f"{key}.sigma"),
                   budget, _str(h.get("description", ""), f"{key}.description"), share,
                   _names(h["analysts"], f"{key}.analysts") if "analysts" in h else None)


def _table(d: dict[str, Any], name: str, parent: str) -> dict[str, Any]:
    v = d.get(name, {})
    if not isinstance(v, dict):
        raise invalid(f"{parent}.{name}" if parent else name, v, "a table")
    return v


def _path(v: Any, key: str, base: Path, must_exist: bool = False) -> Path:
    if not isinstance(v, str) or not v:
        raise invalid(key, v, "a path (string)")
    p = Path(v).expanduser()
    p = p if p.is_absolute() else base / p
    if must_exist and not p.is_file():
        raise invalid(key, v, f"an existing file (looked for {p})")
    return p


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _positive(v: Any, key: str) -> float:
    if not _finite(v) or v <= 0:
        raise invalid(key, v, "a finite number > 0")
    return float(v)


def _delta(v: Any, key: str) -> float:
    if not _finite(v) or not 0 <= v < 1:
        raise invalid(key, v, "a number in [0, 1)")
    return float(v)


def _int(v: Any, key: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise invalid(key, v, "a positive integer")
    return v


def _plural(v: Any, key: str) -> str | None:
    if v is not None and not (isinstance(v, str) and v.strip()):
        raise invalid(key, v, "a non-empty string: the plural of unit_name")
    return v


def _str(v: Any, key: str) -> str:
    if not isinstance(v, str):
        raise invalid(key, v, "a string")
    return v
