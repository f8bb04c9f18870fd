"""Time is an output: each request that reads private data is answered at a deadline fixed before
it runs, from public facts only (the table's row count and the request's cost bound), never
earlier. Work still running `RESERVE` seconds before the deadline is interrupted and answered at the
deadline with a default fixed in advance (`DeadlinePassed`, after spending what the request
declared), so a slow row cannot make an answer come later (Haeberlen, Pierce and Narayan,
"Differential Privacy Under Fire", USENIX Security 2011: predictable transactions with a
timeout and a default).

A deadline is `margin * typical + per_cost * extra + slack`, at least `least` seconds
(`deadline_of`). For a release (`Releases`), `typical` is the time of a release of the same shape
(aggregate kinds and parameters, grouping, public or private keys, spec or SQL) with every
expression a bare column and no filter, measured on synthetic rows of the dataset's public
schema and row count the first time the shape is asked for; `per_cost` is the time per unit of
cost fitted at start-up on the same rows with the costliest string work the checker admits
(`calibrate_dataset`); `extra` is the request's public cost bound beyond bare columns
(`bayesdp.expressions.RowExpression.cost` summed over its filters and expressions,
`release_cost`), priced at that worst case so that a CASE branch the synthetic rows do not take
still fits. A holdout query's `Model` is fitted the same way on the public training table
(`calibrate_holdout`). Every timing is taken with all `lanes` busy, as requests run.

Hooks for the service: `run_with_deadline(work, seconds, on_cut, lanes)` reserves a lane for
`seconds` (`Lanes`: the reservation, and so the answer's time, is fixed at admission from the
deadlines of the requests before it, never from how long their work took), runs `work` in its
own thread from the reservation's start, and returns at its end; engine connections opened by
that work pass through `watch(connection)`, so that the cut-off can interrupt them; `check()`
inside the work refuses to go on once the request is cut off (call it, under the lock the
cut-off takes, before a step that changes state).
"""

from __future__ import annotations

import contextvars
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from bayesdp.errors import BayesdpError, InvalidParameter, check_keys
from bayesdp.expressions import RowExpression, row_expression
from bayesdp.holdout import table_means
from bayesdp.serve.caught import caught, in_context

T = TypeVar("T")

@dataclass(frozen=True)
class TimingConfig:
    """`pad`: answer at the deadline (off only for tests that do not measure time); `margin`:
    deadline over the calibrated typical time (the work is cut off `RESERVE` seconds before the
    deadline); `slack`: seconds added to every deadline, for the machine's scheduling delays,
    which do not grow with the work; `least`: the shortest deadline in seconds; `runs`: timed
    runs per calibration point at start-up; `lanes`: padded requests that run at once (each
    timing is calibrated with that many running); `refresh`: seconds between re-timings of the
    release shapes asked for meanwhile, in a window no request runs in (`Releases.refresh`; 0:
    never), so that deadlines follow the machine's load."""

    pad: bool = True
    margin: float = 1.3
    slack: float = 0.1
    least: float = 0.05
    runs: int = 5
    lanes: int = 2
    refresh: float = 15.0


def parse_timing(doc: Any, key: str = "timing") -> TimingConfig:
    """The `[timing]` table of the service configuration (all keys optional)."""
    if doc is None:
        return TimingConfig()
    if not isinstance(doc, dict):
        raise InvalidParameter(f"{key} must be a table such as {{ margin = 1.5 }}, not {doc!r}")
    check_keys(doc, [f.name for f in fields(TimingConfig)], key)
    cfg = TimingConfig(**doc)
    if not isinstance(cfg.pad, bool):
        raise InvalidParameter(f"{key}.pad must be true or false, not {cfg.pad!r}")
    for name, lo in (("margin", 1.0), ("slack", 0.0), ("least", 0.0), ("refresh", 0.0)):
        v = getattr(cfg, name)
        if not isinstance(v, int | float) or isinstance(v, bool) or not lo <= v < 1e6:
            raise InvalidParameter(f"{key}.{name} must be a number in [{lo:g}, 1e6), not {v!r}")
    for name, hi in (("runs", 100), ("lanes", 64)):
        v = getattr(cfg, name)
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= hi:
            raise InvalidParameter(f"{key}.{name} must be an integer in [1, {hi}], not {v!r}")
    return cfg


class DeadlinePassed(BayesdpError):
    """A request's work passed its deadline and was stopped; what it declared was spent."""


class Interrupted(Exception):
    """Raised inside work that was cut off, so it stops before changing any state."""


def query_cost(expressions: Sequence[RowExpression | str]) -> float:
    """The per-row cost bound of a request's expressions (a bare column costs 1); public, from
    the request's structure only."""
    return sum(e.cost if isinstance(e, RowExpression) else 1.0 for e in expressions)


def release_cost(query: Any) -> float:
    """The cost bound of a release: `query_cost` of its filters and aggregates' expressions."""
    return query_cost([*query.table.filters, *query.expressions.values()])


def deadline_of(typical: float, extra: float, cfg: TimingConfig) -> float:
    """`margin` times the typical seconds of the request with bare columns, plus `extra` seconds
    of expression work priced at its worst case, plus `slack`; at least `least`."""
    return max(cfg.least, cfg.margin * typical + extra + cfg.slack)


@dataclass(frozen=True)
class Model:
    """Seconds a request with `parts` holdout queries of total cost `cost` per row takes on one
    table: `fixed + per_part * (parts - 1) + per_cost * cost`, fitted on public data of the
    table's size; bare columns (cost 1 each) are its typical time, the rest is `extra`."""

    fixed: float
    per_part: float
    per_cost: float

    def deadline(self, parts: int, cost: float, cfg: TimingConfig) -> float:
        typical = self.fixed + self.per_part * max(parts - 1, 0) + self.per_cost * parts
        return deadline_of(typical, self.per_cost * max(cost - parts, 0.0), cfg)


Point = tuple[int, float, Callable[[], Any]]  # parts, cost, a request of that shape


def calibrate(points: Sequence[Point], cfg: TimingConfig) -> Model:
    """Fit `Model` to the median wall times of two or three requests (`_median_time`): one part
    of cost c1, one part of cost c2 > c1, and optionally several parts (of cost c3)."""
    times = [_median_time(run, cfg) for _, _, run in points]
    (_, c1, _), (_, c2, _) = points[:2]
    per_cost = max(0.0, (times[1] - times[0]) / (c2 - c1))
    fixed = max(times[0] - per_cost * c1, 0.0)
    if len(points) < 3:
        return Model(fixed, 0.0, per_cost)
    k, c3, _ = points[2]
    return Model(fixed, max(0.0, (times[2] - fixed - per_cost * c3) / (k - 1)), per_cost)


def _median_time(run: Callable[[], Any], cfg: TimingConfig) -> float:
    """Median wall time of `run()` over `runs` rounds of `lanes` runs at once (each lane as busy
    as when requests fill them all), after one untimed run that warms the engine's caches.
    `run` opens its own engine cursor: the runs of a round share no connection."""
    times: list[float] = []
    with caught():  # about made-up rows: dropped
        run()
        for _ in range(cfg.runs):
            times += _round(run, cfg.lanes, None)
    return statistics.median(times)


def _round(run: Callable[[], Any], lanes: int, until: float | None) -> list[float]:
    """The wall times of `lanes` runs of `run()` at once; with `until` (a `time.monotonic()`),
    only those done by then (the others go on in their threads, unwaited)."""
    times: list[float] = []
    lock = threading.Lock()

    def timed() -> None:
        start = time.perf_counter()
        run()
        took = time.perf_counter() - start
        with lock:
            times.append(took)

    threads = [threading.Thread(target=in_context(timed), name="bayesdp-calibration", daemon=True)
               for _ in range(lanes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(None if until is None else max(until - time.monotonic(), 0.0))
    with lock:
        return list(times)


class Releases:
    """Deadlines of releases on one dataset: `margin` times the typical time of a release of the
    same shape, measured on synthetic rows of the dataset's public schema and size the first
    time that shape is asked for, with no filter (all rows pass, as many as the data may let
    through) and every expression the bare column `bare`; plus `per_cost` seconds per unit of
    the request's cost bound beyond bare columns (`deadline_of`)."""

    def __init__(self, synthetic: Callable[[], Any], per_cost: float, cfg: TimingConfig,
                 bare: RowExpression | None = None) -> None:
        self.synthetic, self.per_cost, self.cfg, self.bare = synthetic, per_cost, cfg, bare
        self._typical: dict[Any, float] = {}
        self._lock = threading.Lock()
        self._runs: dict[Any, Callable[[], None]] = {}  # a run of each shape on the synthetic rows
        self._recent: dict[Any, deque[float]] = {}  # its last timings (`refresh`)
        self._asked: set[Any] = set()  # the shapes asked for since the last refresh

    def deadline(self, query: Any, options: dict[str, Any], run: Callable[[Any], Any], kind: str,
                 joined: tuple[str, ...] = (), made_up: Callable[[], Any] | None = None) -> float:
        """The deadline of `run(query)` (a release of `kind`: "spec" or "sql"); measures `run` on
        the synthetic rows the first time a release of this shape is asked for. A query that
        joins public tables (`joined`: its JOIN clauses, part of its shape) is measured as
        `made_up()` builds it: the same query over the synthetic rows joined with the public
        tables themselves (public, their size included)."""
        key = (kind, joined, *_shape(query, options))
        with self._lock:  # one measurement at a time: requests of a new shape wait for it
            typical = self._typical.get(key)
            if typical is None:
                self._runs[key] = once = lambda: _attempt(lambda: run(self._stand_in(query, made_up)))
                typical = self._typical[key] = _median_time(once, self.cfg)
                self._recent[key] = deque([typical], maxlen=RECENT)
            self._asked.add(key)
        extra = release_cost(query) - (0 if self.bare is None else len(query.expressions))
        return deadline_of(typical, self.per_cost * max(extra, 0.0), self.cfg)

    def refresh(self, lanes: Lanes) -> None:
        """Re-time each shape asked for since the last refresh: one round of `lanes` runs at once
        on the synthetic rows, in a window that reserves every lane (`Lanes.reserve_all`), so
        that no request's work runs in it and the timing follows the machine's load, never a
        request's data. A round not done by the end of its window (twice the shape's typical
        time, plus the slack) counts as the whole window, which is known then, before any
        request runs. The typical time becomes the largest of the last `RECENT` timings: it rises
        with the load at once and falls back over a few refreshes."""
        with self._lock:
            asked, self._asked = self._asked, set()
        for key in asked:
            window = 2 * self._typical[key] + self.cfg.slack
            start = lanes.reserve_all(window)
            time.sleep(max(start - time.monotonic(), 0.0))
            with caught():  # about made-up rows: dropped
                times = _round(self._runs[key], self.cfg.lanes, start + window)
            took = statistics.median(times) if len(times) == self.cfg.lanes else window
            with self._lock:
                self._recent[key].append(took)
                self._typical[key] = max(self._recent[key])
            time.sleep(max(start + window - time.monotonic(), 0.0))

    def _stand_in(self, query: Any, made_up: Callable[[], Any] | None) -> Any:
        """`query`'s shape on the synthetic rows (a new cursor each time, for runs at once)."""
        bare = query.expressions if self.bare is None else dict.fromkeys(query.expressions, self.bare)
        rows = replace(query.table, engine=self.synthetic()) if made_up is None else made_up().table
        return replace(query, table=replace(rows, filters=()), expressions=bare)


def _attempt(run: Callable[[], Any]) -> None:
    """Run a release on made-up rows: if it fails there, the time it took still counts (and the
    analyst is answered from the real rows, at a deadline)."""
    try:
        run()
    except Exception:  # any failure on made-up rows says nothing about the data
        return


def _shape(query: Any, options: dict[str, Any]) -> tuple[Any, ...]:
    """What a release's time depends on besides its expressions and the data: public."""
    def numbers(a: Any) -> tuple[Any, ...]:
        values = [getattr(a, f.name) for f in fields(a)] if is_dataclass(a) else []
        return tuple(v for v in values if isinstance(v, int | float | tuple) and not isinstance(v, bool))

    kinds = tuple(sorted((type(a).__name__, repr(numbers(a))) for a in query.aggregates.values()))
    keys = None if query.keys is None else len(query.keys)
    rest = tuple(sorted((k, repr(v)) for k, v in options.items() if k not in ("epsilon", "delta", "alpha")))
    return kinds, query.by, keys, rest


class _Request:
    """One request's deadline state: the connections its work opened, and whether it was cut."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cut = False
        self.connections: list[Any] = []

    def watch(self, connection: Any) -> None:
        with self.lock:
            self.connections.append(connection)
            if self.cut:
                connection.interrupt()

    def cut_off(self) -> None:
        with self.lock:
            self.cut = True
            for c in self.connections:
                c.interrupt()


_current = threading.local()

RECENT = 3  # re-timings a shape's typical time is the largest of (`Releases.refresh`)
PENDING = 16  # connections a thread keeps for its next timed request (previews open some too)
RESERVE = 0.05  # seconds before the deadline at which work still running is cut off, so that the
                # default answer (its spend written) is ready by the deadline; at most a quarter


class Lanes:
    """`count` lanes for padded requests. A request reserves, at admission, the lane free
    soonest, from when it is free (its last reservation's end, or now) for its deadline's
    seconds; it runs from the start of its reservation and is answered at its end. Reservations
    are made from deadlines only (public), never from when work ended: one request's private
    running time moves no other request's answer. Each runs beside at most `count - 1` others,
    as the calibration had them (`TimingConfig.lanes`)."""

    def __init__(self, count: int) -> None:
        self._free = [0.0] * count
        self._lock = threading.Lock()

    def reserve(self, seconds: float) -> float:
        """The start (`time.monotonic()`) of a reservation of `seconds` on the lane free soonest."""
        with self._lock:
            lane = min(range(len(self._free)), key=self._free.__getitem__)
            start = max(time.monotonic(), self._free[lane])
            self._free[lane] = start + seconds
            return start

    def reserve_all(self, seconds: float) -> float:
        """The start of a reservation of every lane at once for `seconds`, when all are free."""
        with self._lock:
            start = max(time.monotonic(), *self._free)
            self._free = [start + seconds] * len(self._free)
            return start


def watch(connection: T) -> T:
    """Register an engine connection opened by the current request's work, or by this thread
    while it prepares a request (the next `run_with_deadline` on this thread adopts it), so that
    the cut-off interrupts it; returns it."""
    request: _Request | None = getattr(_current, "request", None)
    if request is not None:
        request.watch(connection)
    else:
        if not hasattr(_current, "pending"):
            _current.pending = deque(maxlen=PENDING)
        _current.pending.append(connection)
    return connection


def check() -> None:
    """Raise `Interrupted` if the current request has been cut off."""
    request: _Request | None = getattr(_current, "request", None)
    if request is not None and request.cut:
        raise Interrupted("the request passed its deadline")


def run_with_deadline(work: Callable[[], T], seconds: float | None, on_cut: Callable[[], T],
                      lanes: Lanes | None = None) -> T:
    """`work()`'s result or exception, given out `seconds` after its start and not before; if
    `work` is still running `RESERVE` seconds before then, its connections are interrupted and
    `on_cut()` answers instead. It starts at once, or at its reservation on `lanes`.
    `seconds=None` runs `work` as it is (no padding)."""
    if seconds is None:
        return work()
    start = time.monotonic() if lanes is None else lanes.reserve(seconds)
    wait = start - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    return _padded(work, start, seconds, on_cut)


def _padded(work: Callable[[], T], start: float, seconds: float, on_cut: Callable[[], T]) -> T:
    request = _Request()
    pending = getattr(_current, "pending", ())
    request.connections.extend(pending)  # the relations a query was built on run there
    if pending:
        pending.clear()
    done = threading.Event()
    box: dict[str, Any] = {}
    context = contextvars.copy_context()  # the request's limits.Work, for the cursors `work` opens

    def worker() -> None:
        _current.request = request
        try:
            box["value"] = context.run(work)
        except BaseException as exc:  # handed to the caller at the deadline
            box["error"] = exc
        finally:
            _current.request = None
            done.set()

    threading.Thread(target=worker, name="bayesdp-deadline", daemon=True).start()
    answer = box
    cut_at = start + seconds - min(RESERVE, seconds / 4)
    if not done.wait(max(cut_at - time.monotonic(), 0.0)):
        request.cut_off()
        answer = {}  # the work may still finish: its result is not the answer
        try:
            answer["value"] = on_cut()
        except BaseException as exc:
            answer["error"] = exc
    left = start + seconds - time.monotonic()
    if left > 0:
        time.sleep(left)
    if "error" in answer:
        raise answer["error"]
    value: T = answer["value"]
    return value


def passed(seconds: float) -> DeadlinePassed:
    """The default answer of a cut-off request (its text is the same whatever the data)."""
    return DeadlinePassed(
        f"the request passed its deadline of {seconds:.3g} s (fixed before it ran, from the "
        "table's size and the request's cost) and was stopped; what it declared was spent, "
        "as for an answer. Ask for less work per row (fewer or simpler expressions)",
        private_detail="cut off at the deadline")


class GuardedLedger:
    """A request's ledger that a cut-off closes: the work can no longer spend after it, and the
    cut-off spends the declared spends the work has not made yet (a release with learnt bounds
    spends twice), so that a cut-off costs the same wherever it stops the work."""

    def __init__(self, ledger: Any) -> None:
        self.ledger = ledger
        self.spends = 0
        self._lock = threading.Lock()
        self._cut = False

    @property
    def spent(self) -> bool:
        return self.spends > 0

    def spend(self, guarantee: Any, label: str) -> Any:
        with self._lock:
            if self._cut:
                raise Interrupted("the request passed its deadline")
            self.spends += 1
            return None if self.ledger is None else self.ledger.spend(guarantee, label)

    def cut_off(self, declared: list[Any], label: str) -> None:
        """Close the ledger and spend `declared[k:]`, the k first spends having been made."""
        with self._lock:
            self._cut = True
            left, self.spends = declared[self.spends:], max(self.spends, len(declared))
            if self.ledger is not None:  # a release run without a ledger records nothing
                for guarantee in left:
                    self.ledger.spend(guarantee, label)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def costly_expression(column: str, sample: str = "1") -> str:
    """A calibration expression over `column`: its text doubled four times (16-fold, the
    checker's limit) by replacing the most common character of `sample`, one of its values;
    replacing many matches is the costliest work per unit of cost the checker admits."""
    c = max(sample, key=sample.count) if sample else "1"
    literal, doubled = "'" + c.replace("'", "''") + "'", "'" + (c * 2).replace("'", "''") + "'"
    text = f"CAST({_quoted(column)} AS VARCHAR)"
    for _ in range(4):
        text = f"replace({text}, {literal}, {doubled})"
    return f"length({text}) >= 0"


def longest_text(ds: Any) -> tuple[str, str]:
    """The column with the longest public value as text, and that value (calibration reads
    strings as long as the data's may be, by the schema)."""
    values = [(str(v), c.name) for c in ds.columns.values() for v in (c.domain or c.bounds or ())]
    value, name = max(values, key=lambda x: len(x[0]), default=("1", next(iter(ds.columns))))
    return name, value


def synthetic_frame(ds: Any, rows: int) -> pd.DataFrame:
    """Rows of the dataset's public schema (its unit, bounds and domains) for calibration; a
    fixed seed, since these rows are made up and released nowhere."""
    rng = np.random.default_rng(0)
    data: dict[str, Any] = {}
    if ds.privacy_unit:
        data[ds.privacy_unit] = rng.integers(0, max(1, rows // 2), rows)
    for c in ds.columns.values():
        if c.domain:
            data[c.name] = [c.domain[i] for i in rng.integers(0, len(c.domain), rows)]
        else:
            lo, hi = c.bounds or (0.0, 1.0)
            data[c.name] = rng.uniform(lo, hi, rows)
    return pd.DataFrame(data)


def calibration_name(dataset: str) -> str:
    """The name the synthetic rows of `dataset` are loaded under (`calibrate_dataset`)."""
    return f"{dataset}#calibration"


def calibrate_dataset(service: Any, ds: Any, cfg: TimingConfig) -> Releases:
    """`Releases` of `ds`, on synthetic rows of its public schema as many as its own, loaded as
    the service's dataset `NAME#calibration`; its cost per unit from a count with and without a
    costly filter; the bare column of its shapes a bounded (numeric) column, if it has one."""
    cal = replace(ds, name=calibration_name(ds.name))
    frame = synthetic_frame(ds, service.rows("ds", ds.name))
    service.db.register("calibration_rows", frame)
    try:
        service.db.execute(f"CREATE OR REPLACE TABLE {_quoted('ds_' + cal.name)} AS "
                           "SELECT * FROM calibration_rows")
    finally:
        service.db.unregister("calibration_rows")
    count = {"aggregates": {"n": {"kind": "count"}}, "epsilon": 1.0, "delta": 1e-9}

    def point(spec: dict[str, Any]) -> Point:
        query, _, options = service.query(cal, spec)

        def run() -> Any:  # a query on its own cursor for each run
            return service.query(cal, spec)[0].release(**options)
        return len(query.aggregates), release_cost(query), run

    costly = {**count, "where": [costly_expression(*longest_text(ds))]}
    model = calibrate([point(count), point(costly)], cfg)
    bounded = [c.name for c in ds.columns.values() if c.bounds]
    bare = row_expression(_quoted(bounded[0]), list(ds.columns)) if bounded else None
    return Releases(lambda: service.query(cal, count)[0].table.engine, model.per_cost, cfg, bare)


def calibrate_holdout(connection: Any, train: str, holdout_rows: int, columns: list[str],
                      cfg: TimingConfig) -> Model:
    """`Model` of holdout queries, timed on the public training table (`train`, quoted) and a
    table of its rows repeated to the holdout's size in place of the holdout, the costly query
    growing the training table's longest text."""
    stand_in = _quoted(train.strip('"') + "#calibration")
    connection.execute(f"CREATE OR REPLACE TABLE {stand_in} AS SELECT t.* FROM {train} AS t, "
                       f"range(CAST(ceil({holdout_rows} / (SELECT count(*) FROM {train})) AS BIGINT)) "
                       f"LIMIT {holdout_rows}")
    texts = [f"CAST({_quoted(c)} AS VARCHAR)" for c in columns]
    longest = connection.execute("SELECT " + ", ".join(f"arg_max({t}, length({t}))" for t in texts) +
                                 f" FROM {train}").fetchall()[0]
    value, column = max(zip([v or "" for v in longest], columns, strict=True), key=lambda x: len(x[0]))
    cheap = row_expression(_quoted(columns[0]), columns)
    costly = row_expression(costly_expression(column, value), columns)

    def point(queries: list[RowExpression]) -> Point:
        return len(queries), query_cost(queries), \
            lambda: table_means(connection.cursor(), [train, stand_in], queries)

    return calibrate([point([cheap]), point([costly]), point([cheap] * 4)], cfg)
