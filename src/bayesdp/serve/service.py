"""What the service does for an analyst, independent of HTTP: previews, releases, holdout
queries and synthetic data, each through the library's own release paths.

The datasets are loaded once into one in-memory DuckDB database (public columns and the
privacy unit only); each request works on its own cursor. Every analyst expression goes through
`bayesdp.expressions.row_expression`. Spends go to the analyst's ledger before anything is
computed from noise, with the request id in the label so the audit log can be rebuilt from it.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
from sqlglot import exp

from bayesdp import tables
from bayesdp.errors import (
    CuratorWarning,
    DataError,
    InvalidParameter,
    check_finite,
    check_positive_int,
    invalid,
)
from bayesdp.expressions import RowExpression, fold, resolve_column, row_expression
from bayesdp.holdout import ReusableHoldout, table_means
from bayesdp.jsonable import frame_json, guarantee_json
from bayesdp.privacy import Guarantee, Ledger, Spend
from bayesdp.privacy.filters import Filter, filter_for
from bayesdp.privacy.ledger import Proposal
from bayesdp.serve import limits, timing
from bayesdp.serve.caught import caught
from bayesdp.serve.config import Config, Dataset, Holdout
from bayesdp.serve.schema import check_columns, check_sized
from bayesdp.serve.state import State
from bayesdp.serve.wire import release_json
from bayesdp.sql import Translation, public_warnings, release_translation, translate
from bayesdp.sql.bigquery import Learn, preview, spends
from bayesdp.sql.translate import parse
from bayesdp.synth.tabular import check_fit, fit_guarantee
from bayesdp.tables.engines.duckdb import ident
from bayesdp.tables.query import usefulness_warnings
from bayesdp.tables.source import engine_for
from bayesdp.tables.spec import RELEASE_KEYS, build, check_spec


class AuditedLedger:
    """An analyst's ledger that also writes each spend to the audit log, labelled by request."""

    def __init__(self, ledger: Ledger, state: State, request_id: str) -> None:
        self.ledger, self.state, self.request_id = ledger, state, request_id
        self.spent = False

    def spend(self, guarantee: Any, label: str) -> Spend:
        record = self.ledger.spend(guarantee, f"{self.request_id} {label}")
        self.spent = True
        self.state.audit_spend(self.request_id, record.guarantee)
        return record


def budget_json(ledger: Ledger | Filter) -> dict[str, Any]:
    """A ledger's budget, spent (its filter's total, named in `filter`), the largest next spend,
    the share used in the filter's own sums, and its spends counted without reading them; a
    Filter stands for a ledger not created yet."""
    if isinstance(ledger, Filter):
        return {"budget": guarantee_json(ledger.budget), "spent": guarantee_json(ledger.nothing_spent()),
                "remaining": guarantee_json(ledger.remaining_of(ledger.nothing)),
                "accounting": ledger.name, "filter": ledger.title, "used": 0.0, "releases": 0}
    return {"budget": guarantee_json(ledger.budget), "spent": guarantee_json(ledger.spent()),
            "remaining": guarantee_json(ledger.remaining()), "accounting": ledger.accounting,
            "filter": ledger.filter.title, "used": ledger.used(), "releases": ledger.count()}


def proposer(budget: Ledger | Filter) -> Callable[[list[Guarantee]], Proposal]:
    """What the analyst's privacy filter would make of spends now (`Proposal`), the ledger's sums
    read once; a Filter stands for a ledger not created yet (nothing spent)."""
    return budget.proposer() if isinstance(budget, Ledger) else lambda spends: Proposal.of(budget, spends)


def largest_epsilon(admits: Callable[[float], bool], start: float, steps: int = 52) -> float:
    """The largest ε that `admits`, to 2^-steps of it below (0 if none; at most 2^64·start): every
    filter's charge grows with a spend's ε, so what it admits is an interval (0, top]; doubling
    from `start` brackets top (a spend at a small δ may pass the budget's ε under zCDP), then
    bisection."""
    lo, hi = 0.0, start
    for _ in range(64):
        if not admits(hi):
            break
        lo, hi = hi, 2 * hi
    else:
        return lo
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if admits(mid) else (lo, mid)
    return lo


def check_request(request: dict[str, Any]) -> None:
    """The keys of a preview or release request and the values outside its spec or SQL, checked
    before anything is read or spent (the spec's own values are `check_spec`'s)."""
    sql = "sql" in request
    allowed = ("dataset", "sql", "epsilon", "delta", "group_size") if sql else \
        ("dataset", "spec", "group_size")
    unknown = sorted(set(request) - set(allowed))
    if unknown:
        raise invalid("request keys", unknown, "dataset, sql and optionally epsilon, delta and group_size "
                      "(the other options go in the query or come from the dataset)" if sql else
                      "dataset, spec and optionally group_size (the options go in the spec)")
    if request.get("group_size") is not None:
        check_positive_int("group_size", request["group_size"])
    for key in ("epsilon", "delta"):
        if sql and request.get(key) is not None:
            check_finite(key, request[key])


def _cut(column: str, chars: int) -> str:
    """The column's text cut to `chars` characters, under its own name."""
    return f"left({ident(column)}, {chars}) AS {ident(column)}"


def _warn_cut(rel: duckdb.DuckDBPyRelation, texts: list[str], chars: int, key: str) -> None:
    """Tell the curator how many text values were cut to `chars` characters (exact: curator only)."""
    if not texts:
        return
    counts = rel.aggregate(", ".join(f"count(*) FILTER (length({ident(c)}) = {chars})" for c in texts))
    cut = [f"{int(k):,} of {c!r}" for c, k in zip(texts, counts.fetchall()[0], strict=True) if k]
    if cut:
        warnings.warn(f"curator only: {key}: text values of {chars:,} characters or more were cut to "
                      f"{chars:,} (limits.max_text_chars): {', '.join(cut)}", CuratorWarning, stacklevel=3)


def _table_name(kind: str, name: str) -> str:
    return ident(f"{kind}_{name}")


class Service:
    """The datasets, holdouts and state of one running service."""

    def __init__(self, config: Config, state: State) -> None:
        self.config, self.state = config, state
        self.db = duckdb.connect()
        limits.configure(self.db, config.limits)
        self._columns: dict[str, list[str]] = {}
        self._synthetic: dict[str, Guarantee] = {}  # what each dataset's synthetic data spend
        for ds in config.datasets.values():
            keep = [*([ds.privacy_unit] if ds.privacy_unit else []), *ds.columns]
            self._load("ds", ds.name, ds.source, keep, f"datasets.{ds.name}", unit=ds.privacy_unit)
            check_columns(ds, self.relation("ds", ds.name), self.db.cursor())
            for table, path in ds.public_tables.items():
                self._load("pub", f"{ds.name}.{table}", path, None,
                           f"datasets.{ds.name}.public_tables.{table}")
            if ds.synthetic is not None:  # a fit failing on the data fails here, not in a request
                check_fit(self.relation("ds", ds.name).df(), **_synthetic_args(ds))
                self._synthetic[ds.name] = self.synthetic_guarantee(ds)
        self._metadata = {ds.name: ds.sql_metadata() for ds in config.datasets.values()}
        # Deadlines: measured on synthetic data of each table's public schema and size (public),
        # alone and with all lanes busy, scaled by a load probe; padded requests run in these lanes.
        self.lanes = timing.Lanes(config.timing.lanes, config.timing,
                                  self.db.cursor if config.timing.pad else None)
        self.holdouts = {h.name: HoldoutService(self, h) for h in config.holdouts.values()}
        self.deadlines = {} if not config.timing.pad else {
            ds.name: timing.calibrate_dataset(self, ds, config.timing) for ds in config.datasets.values()}
        self._stop = threading.Event()
        self._refresher: threading.Thread | None = None
        if self.deadlines and config.timing.refresh:
            self._refresher = threading.Thread(target=_refresh, args=(weakref.ref(self), self._stop),
                                               name="bayesdp-recalibration", daemon=True)
            self._refresher.start()

    def close(self) -> None:
        """Stop the service's background work (the load probe, re-timings), once the round or
        re-timing under way ends, so that none runs in the engine while the process exits."""
        self._stop.set()
        if self._refresher is not None:
            self._refresher.join()
        self.lanes.close()

    def rows(self, kind: str, name: str) -> int:
        return int(self.relation(kind, name).aggregate("count(*)").fetchall()[0][0])

    def _load(self, kind: str, name: str, path: Path, keep: list[str] | None, key: str,
              unit: str | None = None) -> list[str]:
        """Copy a source's columns `keep` (None: all) into the service's database; returns them.
        Rows with a null `unit` belong to nobody: dropped here, once, and told to the curator,
        so that no request can observe them. A private table's text is cut to
        `limits.max_text_chars`: the work of an expression on a row, and so a request's time,
        can grow with a row's text only that far."""
        rel = engine_for(path, self.db).relation
        if unit is not None:
            quoted = ident(unit)
            nobody = int(rel.aggregate(f"count(*) - count({quoted})").fetchall()[0][0])
            if nobody:
                warnings.warn(f"curator only: {key}: {nobody:,} rows with a null privacy unit "
                              f"{unit!r} belong to nobody and are left out", CuratorWarning, stacklevel=2)
                rel = rel.filter(f"{quoted} IS NOT NULL")
        available = list(rel.columns)
        missing = [c for c in keep or [] if c not in available]
        if missing:
            raise invalid(f"{key} columns", missing, f"columns of {path.name} ({available})")
        cols = keep or available
        chars = self.config.limits.max_text_chars
        private = kind != "pub"
        if private:
            check_sized(rel, cols, key)
        texts = [c for c, t in zip(rel.columns, rel.types, strict=True)
                 if private and t.id == "varchar" and c in cols]
        select = ", ".join(_cut(c, chars) if c in texts else ident(c) for c in cols)
        self.db.execute(f"CREATE TABLE {_table_name(kind, name)} AS SELECT {select} FROM ({rel.sql_query()})")
        _warn_cut(self.relation(kind, name), texts, chars, key)
        self._columns[f"{kind}_{name}"] = cols
        return cols

    def relation(self, kind: str, name: str) -> duckdb.DuckDBPyRelation:
        """A relation over a loaded table on a new cursor (one per request and thread)."""
        return timing.watch(limits.cursor(self.db)).sql(f"SELECT * FROM {_table_name(kind, name)}")

    def dataset(self, name: Any, analyst_id: str) -> Dataset:
        """A dataset this analyst may use; one they may not is refused as one that does not exist."""
        visible = self.state.datasets_for(analyst_id)
        if not isinstance(name, str) or name not in visible:
            raise DatasetNotFound(f"no dataset named {name!r}; the datasets are {sorted(visible)}")
        return self.config.datasets[name]

    def dataset_of(self, request: dict[str, Any], analyst_id: str) -> Dataset:
        """The dataset a request names, or the table its SQL reads when it names none."""
        name, text = request.get("dataset"), request.get("sql")
        if name is None and isinstance(text, str):
            limits.check_sql(text, self.config.limits)
            from_ = parse(text)[0].args.get("from_")
            node = None if from_ is None else from_.this
            name = node.name if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier) \
                else None
            visible = self.state.datasets_for(analyst_id)
            if name not in visible:
                # Refuses the query (a construct it uses, or what it reads), pointing at the text.
                translate(text, dict.fromkeys(visible))
        return self.dataset(name, analyst_id)

    # -- metadata ------------------------------------------------------------------------

    def datasets_json(self, analyst_id: str) -> list[dict[str, Any]]:
        """Public metadata only: the schema, bounds, public keys, options and the budget."""
        out = []
        for ds in map(self.config.datasets.__getitem__, self.state.datasets_for(analyst_id)):
            b = self.state.budget(analyst_id, ds.name)
            out.append({
                "name": ds.name, "description": ds.description, "privacy_unit": ds.privacy_unit,
                "unit_name": ds.unit_name, "unit_plural": ds.unit_plural,
                "columns": [{"name": c.name, "bounds": c.bounds, "domain": c.domain,
                             "description": c.description} for c in ds.columns.values()],
                "options": ds.options,
                "budget": {"epsilon": b.epsilon, "delta": b.delta, "accounting": b.accounting},
                "synthetic": None if ds.synthetic is None else {
                    "epsilon": ds.synthetic.epsilon, "delta": ds.synthetic.delta, "rows": ds.synthetic.rows},
            })
        return out

    def budget_json(self, analyst_id: str) -> dict[str, Any]:
        """Read without creating a ledger: a budget nothing was spent from stays the curator's to
        change. Each dataset's says when its synthetic data was released and at what cost, and,
        where it offers some, what the filter would make of asking for them now
        (`synthetic_spend`, a `Proposal`: nothing to spend once released)."""
        synthetic = {r["dataset"]: {"created": r["created"], "guarantee": r["guarantee"]}
                     for r in self.state.results(analyst_id, "synthetic")}
        out = {}
        for name in self.state.datasets_for(analyst_id):
            budget = self.budget(analyst_id, name)
            out[name] = budget_json(budget)
            out[name]["synthetic"] = synthetic.get(name)
            if name in self._synthetic:
                asked = [] if name in synthetic else [self._synthetic[name]]
                out[name]["synthetic_spend"] = asdict(proposer(budget)(asked))
        return out

    def budget(self, analyst_id: str, name: str) -> Ledger | Filter:
        """The analyst's ledger on a dataset, or its filter while no ledger exists (none is created)."""
        if self.state.ledger_path(analyst_id, name).exists():
            return self.state.ledger(analyst_id, name)
        b, unit = self.state.budget(analyst_id, name), self.config.datasets[name].unit
        return filter_for(b.accounting, b.guarantee(unit))

    # -- preview and release -------------------------------------------------------------

    def query(self, ds: Dataset, spec: Any) -> tuple[tables.Query, dict[str, Any], dict[str, Any]]:
        """The library Query of a spec in the CLI's format, checked against the public schema;
        returns it with the normalised spec and the release options."""
        if not isinstance(spec, dict):
            raise invalid("spec", type(spec).__name__,
                          "a JSON object in the format of `bayesdp release --spec`")
        spec = dict(spec)
        limits.check_spec(spec, self.config.limits)
        unit = spec.setdefault("privacy_unit", ds.privacy_unit or False)
        if isinstance(unit, str) and ds.privacy_unit and fold(unit) == fold(ds.privacy_unit):
            unit = spec["privacy_unit"] = ds.privacy_unit  # the engines ignore case in names
        if unit != (ds.privacy_unit or False):
            raise invalid("privacy_unit", unit, f"{ds.privacy_unit or False!r}, the dataset's privacy unit")
        if spec.setdefault("unit_name", ds.unit_name) != ds.unit_name:
            raise invalid("unit_name", spec["unit_name"], f"{ds.unit_name!r}, what the dataset calls a unit")
        try:
            check_spec(spec, "the spec")
        except DataError as exc:
            raise SpecError(exc.args[0]) from None
        # Names are resolved among the public columns as the engines resolve them (without
        # case), so the privacy unit, however spelled, is never one of them.
        public = list(ds.columns)
        by = spec.get("group_by") or []
        if by:
            names = [self._public_column(c, public, "group_by")
                     for c in (by if isinstance(by, list) else [by])]
            spec["group_by"] = names if isinstance(by, list) else names[0]
        for name, item in spec["aggregates"].items():
            # Every text argument but the kind (a column, an expression, a share's condition, a
            # count's indicator, and any a new kind takes) reads the public columns only.
            for key, text in item.items() if isinstance(item, dict) else ():
                if key == "kind" or not isinstance(text, str):
                    continue
                if text.isidentifier():
                    self._public_column(text, public, f"aggregates.{name}.{key}")
                row_expression(text, public, role=f"aggregates.{name}.{key}")
        where = spec.get("where", [])
        where = [where] if isinstance(where, str) else where
        if not isinstance(where, list) or not all(isinstance(w, str) for w in where):
            raise invalid("where", where, "a SQL condition or a list of them")
        spec["where"] = [row_expression(w, public, role="filter").sql(dialect="duckdb") for w in where]
        options = {**ds.options, **{k: spec[k] for k in RELEASE_KEYS if k in spec}}
        try:
            query = build(self.relation("ds", ds.name), spec)
        except DataError as exc:  # building reads the schema only, never a data value
            raise SpecError(exc.args[0]) from None
        return query, spec, options

    @staticmethod
    def _public_column(name: Any, public: list[str], role: str) -> str:
        """The public column `name` names, spelled as in the schema, or a refusal."""
        column = resolve_column(name, public, role) if isinstance(name, str) else None
        if column is None:
            raise invalid(role, name, f"one of the public columns {public}")
        return column

    def translation(self, ds: Dataset, request: dict[str, Any]) -> Translation:
        """The translation of a request's SQL (`bayesdp.sql`, with the dataset's public schema as
        its metadata: privacy unit, bounds, public keys, release options); reads the schema only."""
        text = request["sql"]
        if not isinstance(text, str) or not text.strip():
            raise invalid("sql", text, f"one SELECT statement over the table {ds.name!r}")
        limits.check_sql(text, self.config.limits)
        return self._translate(ds, text, request, ds.name)

    def _translate(self, ds: Dataset, text: str, request: dict[str, Any], rows: str) -> Translation:
        """`text` translated over the loaded table `rows` (the dataset's, or its calibration
        rows) as `ds`, joined with its public tables."""
        public = {t: self.relation("pub", f"{ds.name}.{t}") for t in ds.public_tables}
        t = translate(text, {ds.name: self.relation("ds", rows), **public},
                      metadata=self._metadata[ds.name], epsilon=request.get("epsilon"),
                      delta=request.get("delta"))
        # The metadata names the unit's column; guarantees name the unit, as a spec's do.
        return replace(t, query=replace(t.query, table=replace(t.query.table, unit_name=ds.unit_name)))

    def preview(self, ds: Dataset, request: dict[str, Any], analyst_id: str) -> dict[str, Any]:
        """The expected error of a spec or SQL from public parameters (free: reads no data values),
        and what the analyst's privacy filter would make of its spends now (`Proposal`)."""
        check_request(request)
        learn, shown = None, None
        if "sql" in request:
            t = self.translation(ds, request)
            query, options, learn, shown = t.query, t.options, t.learn, t.shown
        else:
            query, _, options = self.query(ds, request.get("spec"))
        if "epsilon" not in options:
            raise InvalidParameter("epsilon is missing: give it in the spec")
        with caught() as said:  # this request's (previews read no data: their warnings are public)
            # Bounds the BigQuery clause learns are unknown until its release: its preview says so.
            df, guarantee = preview(query, learn, options, group_size=request.get("group_size"), shown=shown)
        budget = self.budget(analyst_id, ds.name)
        propose = proposer(budget)
        doc = {"dataset": ds.name, **frame_json(df), "guarantee": guarantee_json(guarantee),
               **asdict(propose(spends(query, learn, options))), "warnings": [str(w.message) for w in said]}
        if "sql" not in request:  # a spec's ε is free (the console's slider): how far it may go now

            def admits(epsilon: float) -> bool:
                try:
                    return propose(spends(query, None, {**options, "epsilon": epsilon})).admitted
                except InvalidParameter:  # an ε the spec's own per-aggregate ε do not fit in
                    return False

            doc["largest_epsilon"] = largest_epsilon(admits, budget.budget.epsilon)  # may exceed it
        return doc

    def release(self, ds: Dataset, request: dict[str, Any],
                ledger: AuditedLedger) -> tuple[dict[str, Any], str]:
        """Run a spec's release through `Query.release`, or SQL through `bayesdp.sql`, both of
        which spend on the ledger before any noise; returns its public JSON and, for the
        curator's audit log only, its exact diagnostics."""
        check_request(request)
        t = None
        with caught() as warned:  # this request's, its deadline's worker thread included
            if "sql" in request:
                t = self.translation(ds, request)
                asked: dict[str, Any] = {"sql": t.text}
                query, options = t.query, t.options
                joined = tuple(j.sql() for j in parse(t.text)[0].args.get("joins") or ())
                release = self.timed(ds, query, options, ledger, "sql", lambda q, led: release_translation(
                    replace(t, query=q), ledger=led), joined, lambda: self._translate(
                        ds, t.text, request, timing.calibration_name(ds.name)).query, t.learn)
            else:
                query, asked, options = self.query(ds, request.get("spec"))
                if "epsilon" not in options:
                    raise InvalidParameter("epsilon is missing: give it in the spec")
                release = self.timed(ds, query, options, ledger, "spec", lambda q, led: q.release(
                    ledger=led, label=asked.get("label"), **options))
        doc = release_json(replace(release, dataset=ds.name), asked, options)
        # The analyst sees the warnings the plan decides (public), as the plan states them, and
        # the bounds SQL learnt (DP values). Any other warning may depend on the data (a
        # CuratorWarning, numpy's or an engine's): the audit log gets it.
        doc["warnings"] = public = usefulness_warnings(release.plan) + (
            public_warnings(t, release) if t is not None else [])
        said = [str(w.message) for w in warned]
        return doc, " ".join([*release.curator_notes(), *(m for m in said if m not in public)])

    def timed(self, ds: Dataset, query: tables.Query, options: dict[str, Any], ledger: AuditedLedger,
              kind: str, run: Callable[[tables.Query, Any], tables.Release], joined: tuple[str, ...] = (),
              made_up: Callable[[], tables.Query] | None = None, learn: Learn | None = None
              ) -> tables.Release:
        """`run(query, ledger)` answered at the deadline of its public shape and cost on `ds`
        (`joined`, `made_up`: a query joining public tables, as `timing.Releases.deadline`);
        cut off there, it spends what the release declared and had not spent yet (`learn`: the
        SQL's bounds to learn, spent first) and raises DeadlinePassed."""
        declared = spends(query, learn, options)
        deadlines = self.deadlines.get(ds.name)
        expected = None if deadlines is None else deadlines.deadline(
            query, options, lambda q: run(q, None), kind, joined, made_up if joined else None)
        guarded = timing.GuardedLedger(ledger)

        def cut(seconds: float) -> tables.Release:
            guarded.cut_off(declared, f"{query.describe()} (cut off at its deadline)")
            raise timing.passed(seconds)

        return timing.run_with_deadline(lambda: run(query, guarded), expected, cut, self.lanes)

    # -- synthetic data ------------------------------------------------------------------

    def synthetic_guarantee(self, ds: Dataset) -> Guarantee:
        """The guarantee the synthesizer states for `ds`, from its config and schema alone (no row
        is read)."""
        assert ds.synthetic is not None
        args = _synthetic_args(ds)
        schema = self.relation("ds", ds.name).limit(0).df()
        return replace(fit_guarantee(schema, ds.synthetic.epsilon, ds.synthetic.delta, args["columns"],
                                     args["bounds"], args["domain"]), unit=ds.unit)

    def synthesize(self, ds: Dataset, ledger: AuditedLedger, out: Path) -> dict[str, Any]:
        """Spend the synthesizer's guarantee (known from the config), then fit it and sample
        `rows` rows to `out`. The data were checked at start-up (`check_fit`), so the fit
        cannot fail on them; its warnings are not passed on."""
        from bayesdp.synth import synthesize

        cfg = ds.synthetic
        if cfg is None:
            raise InvalidParameter(f"the dataset {ds.name!r} offers no synthetic data")
        frame, args = self.relation("ds", ds.name).df(), _synthetic_args(ds)
        guarantee = self._synthetic[ds.name]
        ledger.spend(guarantee, f"synthetic data of {ds.name} ({cfg.rows} rows)")
        with caught():  # not passed on
            syn = synthesize(frame, cfg.epsilon, cfg.delta, method=cfg.method, **args)
        rows = syn.sample(cfg.rows)
        out.parent.mkdir(parents=True, exist_ok=True)
        rows.to_csv(out, index=False)
        return {"dataset": ds.name, "rows": cfg.rows, "columns": list(rows.columns),
                "guarantee": guarantee_json(guarantee)}


def _refresh(service: weakref.ref[Service], stop: threading.Event) -> None:
    """Re-time the release shapes asked for every `timing.refresh` seconds, while the service
    lives, until `stop` is set."""
    while (s := service()) is not None:
        every, s = s.config.timing.refresh, None
        if stop.wait(every) or (s := service()) is None:
            return
        for deadlines in s.deadlines.values():
            deadlines.refresh()
        s = None


def _synthetic_args(ds: Dataset) -> dict[str, Any]:
    """The public facts a synthesizer of `ds` is fitted with: columns, bounds, domains, bins."""
    assert ds.synthetic is not None
    return {"columns": list(ds.columns), "bins": ds.synthetic.bins,
            "bounds": {c.name: c.bounds for c in ds.columns.values() if c.bounds},
            "domain": {c.name: list(c.domain) for c in ds.columns.values() if c.domain}}


class SpecError(InvalidParameter):
    """A spec that does not fit the dataset's public schema (its message names public facts only)."""


class DatasetNotFound(InvalidParameter):
    """An analyst named a dataset or holdout the service does not have (HTTP 404)."""


@dataclass(frozen=True)
class Answer:
    value: float | None
    source: str
    budget_left: int


class HoldoutService:
    """One reusable holdout shared by all analysts: its budget protects the holdout's rows
    whoever asks, and each analyst may spend at most `share` of its overflows (so that no one
    exhausts it for the others). Overflows are persisted before answers leave; after a restart the holdout
    resumes with the budget left, an open run of training answers counted as one overflow
    (its threshold noise is redrawn, and an overflow costs more than the open run did)."""

    def __init__(self, service: Service, cfg: Holdout) -> None:
        self.service, self.cfg = service, cfg
        self.columns = service._load("train", cfg.name, cfg.train, None, f"holdouts.{cfg.name}.train")
        service._load("holdout", cfg.name, cfg.holdout, self.columns, f"holdouts.{cfg.name}.holdout")
        self._tables = [_table_name("train", cfg.name), _table_name("holdout", cfg.name)]
        self.n = self._rows("holdout")
        self._rows("train")
        self._lock = threading.Lock()
        base, open_run = service.state.holdout_state(cfg.name)
        self._resume(base + int(open_run))
        self.epsilon_per_overflow = ReusableHoldout(
            None, holdout=self.n, threshold=cfg.threshold, sigma=cfg.sigma, budget=1).epsilon_per_overflow
        self.model = None
        if service.config.timing.pad:
            with service.lanes.exclusive():  # no probe round beside it
                self.model = timing.calibrate_holdout(service.db, self._tables[0], self.n, self.columns,
                                                      service.config.timing, service.lanes.load)

    def _resume(self, used: int) -> None:
        """Go on with `used` overflows spent (as after a restart)."""
        self._base, self._open = used, False
        left = self.cfg.budget - used
        self._holdout = None if left < 1 else ReusableHoldout(
            None, holdout=self.n, threshold=self.cfg.threshold, sigma=self.cfg.sigma, budget=left)

    def _rows(self, kind: str) -> int:
        n = self.service.rows(kind, self.cfg.name)
        if n < 1:
            raise DataError(f"holdouts.{self.cfg.name}.{kind} has no rows")
        return n

    def metadata(self) -> dict[str, Any]:
        h = self._holdout
        left = 0 if h is None else h.budget_left
        spent = (self._base + (0 if h is None else h.overflows)) * self.epsilon_per_overflow
        return {"name": self.cfg.name, "description": self.cfg.description, "columns": self.columns,
                "threshold": self.cfg.threshold, "sigma": self.cfg.sigma, "budget": self.cfg.budget,
                "budget_left": left, "epsilon_spent": spent, "share": self.share,
                "guarantee": f"ε={spent:.6g} spent per row of the holdout (replace-one neighbours), of "
                             f"at most ε={self.cfg.budget * self.epsilon_per_overflow:.6g} once all "
                             f"{self.cfg.budget} overflows are used"}

    @property
    def share(self) -> int:
        return self.cfg.share or self.cfg.budget

    def _spent_by(self, analyst_id: str) -> int:
        return self.service.state.holdout_share_spent(self.cfg.name, analyst_id)

    def query(self, expressions: Any, analyst_id: str) -> list[Answer]:
        """Answer row-wise SQL expressions with Thresholdout, in order; once the analyst's share
        of overflows is spent, as exhausted (`budget_left` is what is left to them). Each row's
        value is the expression as a number, NULL or non-numeric as 0, clipped into [0, 1]: a
        statistical query for any expression, so whether a query fails never depends on the
        holdout's rows."""
        if isinstance(expressions, str):
            expressions = [expressions]
        if not isinstance(expressions, list) or not expressions or \
                not all(isinstance(e, str) for e in expressions):
            raise invalid("queries", expressions, "a non-empty list of SQL expressions")
        limits.check_holdout(expressions, self.service.config.limits)
        checked = [row_expression(e, self.columns, role="holdout query") for e in expressions]
        exhausted = [Answer(None, "exhausted", 0) for _ in checked]
        # Public (the holdout's budget left, the analyst's own share): answered without reading a row.
        if self._holdout is None or self._spent_by(analyst_id) >= self.share:
            return exhausted
        expected = None if self.model is None else \
            self.model.deadline(len(checked), timing.query_cost(checked), self.service.config.timing)
        return timing.run_with_deadline(lambda: self._answer(checked, exhausted, analyst_id), expected,
                                        lambda _: self._cut(len(checked), analyst_id), self.service.lanes)

    def _cut(self, queries: int, analyst_id: str) -> list[Answer]:
        """The answer of a request cut off at its deadline: no values, and each query charged
        as an overflow (the most it could have cost), so that the cut-off is paid for."""
        with self._lock:
            h = self._holdout
            used = self._base + int(self._open) + (0 if h is None else h.overflows) + queries
            used = min(used, self.cfg.budget)
            mine = min(self._spent_by(analyst_id) + queries, self.share)
            self.service.state.save_holdout_state(self.cfg.name, used, False, analyst_id, mine)
            self._resume(used)
            left = 0 if self._holdout is None else min(self._holdout.budget_left, self.share - mine)
        return [Answer(None, "deadline", left) for _ in range(queries)]

    def _answer(self, checked: list[RowExpression], exhausted: list[Answer], analyst_id: str) -> list[Answer]:
        train, holdout = table_means(timing.watch(limits.cursor(self.service.db)), self._tables, checked)
        with self._lock:
            timing.check()  # cut off meanwhile: the holdout's state is no longer this request's
            h = self._holdout
            if h is None:
                return exhausted
            used = self._spent_by(analyst_id)
            answers = []
            for t, m in zip(train, holdout, strict=True):
                if used >= self.share:
                    answers.append(Answer(None, "exhausted", 0))
                    continue
                before = h.overflows
                a = h.query_means(t, m)
                assert not isinstance(a, list)
                used += h.overflows - before
                if a.source in ("train", "holdout"):
                    self._open = a.source == "train"
                answers.append(Answer(a.value, a.source, min(int(a.budget_left or 0), self.share - used)))
            self.service.state.save_holdout_state(self.cfg.name, self._base + h.overflows, self._open,
                                                  analyst_id, used)
        return answers

    def train_csv(self) -> str:
        frame: pd.DataFrame = self.service.relation("train", self.cfg.name).df()
        return frame.to_csv(index=False)
