"""Time is an output: each request that reads private data is answered at a deadline fixed before
it runs, from public facts only (the table's row count, the request's cost bound, the lanes'
reservations and the machine's load as public synthetic work measures it), never earlier. Work
still running `RESERVE` seconds before the deadline is interrupted and answered at the deadline
with a default fixed in advance (`DeadlinePassed`, after spending what the request declared), so a
slow row cannot make an answer come later (Haeberlen, Pierce and Narayan, "Differential Privacy
Under Fire", USENIX Security 2011: predictable transactions with a timeout and a default).

A deadline is `load * (margin * typical + per_cost * extra) + max(slack, load * jitter + RESERVE)`
(`slack_alone` in place of `slack` for a request that runs alone), at least `least` seconds
(`Lanes.admit`), where `jitter` is the machine's scheduling delay measured
at start-up on fixed small works (`measure_jitter`). For a release (`Releases`), `typical` is the
time of a release of the same shape (aggregate kinds and parameters, grouping, public or private
keys, spec or SQL) with every expression a bare column and no filter, measured on synthetic rows of
the dataset's public schema and row count the first time the shape is asked for, in a window no
request runs in (`Lanes.exclusive`); `per_cost` is the time per unit of cost fitted at start-up on
the same rows with the costliest string work the checker admits (`calibrate_dataset`); `extra` is
the request's public cost bound beyond bare columns (`bayesdp.expressions.RowExpression.cost` summed
over its filters and expressions, `release_cost`), priced at that worst case so that a CASE branch
the synthetic rows do not take still fits. A holdout query's `Model` is fitted the same way on the
public training table, its cheapest point a bare numeric column (`calibrate_holdout`). Each is timed
twice (`Expected`): alone, and with every lane running it at once; a request admitted when every
lane is idle (or will be at the end of the probe's window, with no request before it) and no other
request is being read or checked reserves them all and gets the first, any other one lane and the
second. `load` comes from a fixed synthetic probe
run every `probe` seconds in a window that reserves every lane, once no request's own Python work
runs (`Lanes.probing`; `Lanes.active` marks that work, in the service's request threads): the
probe's recent time over its time at start-up, never below the load factor the request's shape
was timed at. Every timing is divided by the load factor of its moment, so a deadline follows the
machine without re-timing the shapes.

Hooks for the service: `run_with_deadline(work, expected, on_cut, lanes)` reserves lanes at
admission (`Lanes.admit`: the reservation, and so the answer's time, is fixed from the deadlines
of the requests before it and the probe's public timings, never from how long their work took),
runs `work` in its own thread from the reservation's start, and returns at its end; engine
connections opened by that work pass through `watch(connection)`, so that the cut-off can
interrupt them; `check()` inside the work refuses to go on once the request is cut off (call it,
under the lock the cut-off takes, before a step that changes state).
"""

from __future__ import annotations

import contextlib
import contextvars
import statistics
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from bayesdp.errors import BayesdpError, InvalidParameter, check_keys
from bayesdp.expressions import RowExpression, row_expression
from bayesdp.holdout import table_means
from bayesdp.serve.caught import caught, in_context
from bayesdp.tables.engines.duckdb import NUMERIC, ident

T = TypeVar("T")

@dataclass(frozen=True)
class TimingConfig:
    """`pad`: answer at the deadline (off only for tests that do not measure time); `margin`:
    deadline over the calibrated typical time (the work is cut off `RESERVE` seconds before the
    deadline); `slack`: the least seconds added to the deadline of a request that runs beside
    other lanes' work, for the machine's scheduling delays, which do not grow with the work
    (more when the delays measured at start-up, scaled by the load factor, plus `RESERVE`, are
    more: `deadline_of`); `slack_alone`: the same for a request that runs alone (`RESERVE` and
    15 ms: in 576 alone requests on a quiet machine the work ran at most 4.7 ms past the
    margin, but about one in 80 meets a pause of 10–15 ms); `least`: the
    shortest deadline in seconds; `runs`: timed runs per calibration point; `lanes`: padded
    requests that run at once; `probe`: seconds between runs of the load probe (`Load`; 0:
    never, deadlines then as timed); `refresh`: seconds between re-timings of the release shapes
    asked for meanwhile, in a window no request runs in (`Releases.refresh`; 0: never)."""

    pad: bool = True
    margin: float = 1.3
    slack: float = 0.03
    slack_alone: float = 0.02
    least: float = 0.01
    runs: int = 5
    lanes: int = 2
    refresh: float = 0.0
    probe: float = 1.0


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
    for name, lo in (("margin", 1.0), ("slack", 0.0), ("slack_alone", 0.0), ("least", 0.0), ("refresh", 0.0),
                     ("probe", 0.0)):
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


@dataclass(frozen=True)
class Expected:
    """Seconds of a request's work at load factor 1, before the slack (`Lanes.admit`): `alone`
    when it runs with no other lane's work, `busy` beside every lane's; timed at load `factor`,
    below which a deadline never scales it (a probe faster than when the request's shape was
    timed does not make its work faster)."""

    alone: float
    busy: float
    factor: float = 1.0


def deadline_of(work: float, factor: float, cfg: TimingConfig, jitter: float = 0.0,
                alone: bool = False) -> float:
    """`work` seconds (the margin times the typical time, plus the cost beyond bare columns
    priced at its worst case) times the load factor, plus the slack: `jitter` (the measured
    scheduling delay) times the load factor plus `RESERVE` (the work is cut off that long before
    the deadline), or `slack` (`slack_alone` for a request that runs `alone`) if more; at least
    `least`."""
    least_slack = cfg.slack_alone if alone else cfg.slack
    return max(cfg.least, factor * work + max(least_slack, factor * jitter + RESERVE if jitter else 0.0))


@dataclass(frozen=True)
class Line:
    """Seconds a request with `parts` holdout queries of total cost `cost` per row takes on one
    table at load factor 1: `fixed + per_part * (parts - 1) + per_cost * cost`, fitted on public
    data of the table's size; bare columns (cost 1 each) are its typical time, the rest extra."""

    fixed: float
    per_part: float
    per_cost: float

    def work(self, parts: int, cost: float, margin: float) -> float:
        typical = self.fixed + self.per_part * max(parts - 1, 0) + self.per_cost * parts
        return margin * typical + self.per_cost * max(cost - parts, 0.0)


@dataclass(frozen=True)
class Model:
    """`Line`s of a request alone and beside every lane's work."""

    alone: Line
    busy: Line
    factor: float = 1.0  # the largest load factor its points were timed at

    def deadline(self, parts: int, cost: float, cfg: TimingConfig) -> Expected:
        return Expected(self.alone.work(parts, cost, cfg.margin), self.busy.work(parts, cost, cfg.margin),
                        self.factor)


Point = tuple[int, float, Callable[[], Any]]  # parts, cost, a request of that shape


def calibrate(points: Sequence[Point], cfg: TimingConfig, load: Load | None = None) -> Model:
    """Fit `Model` to the median wall times of two or three requests (`_median_time`): one part
    of cost c1, one part of cost c2 > c1, and optionally several parts (of cost c3)."""
    times = [_median_time(run, cfg, load) for _, _, run in points]
    return Model(_fit(points, [t.alone for t in times]), _fit(points, [t.busy for t in times]),
                 max(t.factor for t in times))


def _fit(points: Sequence[Point], times: list[float]) -> Line:
    (_, c1, _), (_, c2, _) = points[:2]
    per_cost = max(0.0, (times[1] - times[0]) / (c2 - c1))
    fixed = max(times[0] - per_cost * c1, 0.0)
    if len(points) < 3:
        return Line(fixed, 0.0, per_cost)
    k, c3, _ = points[2]
    return Line(fixed, max(0.0, (times[2] - fixed - per_cost * c3) / (k - 1)), per_cost)


def _median_time(run: Callable[[], Any], cfg: TimingConfig, load: Load | None) -> Expected:
    """Median wall times of `run()` over `runs` runs alone and `runs` rounds of `lanes` runs at
    once (each lane as busy as when requests fill them all), after one untimed run that warms
    the engine's caches; divided by the load factor that probe rounds between them show, or
    by the serving probe's recent factor (`Load.factor`) if more: a deadline then scales a
    timing only by load beyond either. `run`
    opens its own engine cursor: the runs of a round share no connection."""
    alone: list[float] = []
    busy: list[float] = []
    probes: list[float] = []
    with caught():  # about made-up rows: dropped
        run()
        for _ in range(cfg.runs):
            busy += _round(run, cfg.lanes, None)
            if cfg.lanes > 1:
                alone += _round(run, 1, None)
            if load is not None:
                probes += load.round(None)
    # The periodic probe reads up to ~1.4 times its back-to-back rounds here while the work does
    # not follow it: the larger of the two keeps that gap out of a deadline's scale.
    factor = 1.0 if load is None else max(load.factor_of(probes), load.factor())
    b = statistics.median(busy) / factor
    return Expected(statistics.median(alone) / factor if alone else b, b, factor)


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
    time that shape is asked for (in a window no request runs in), with no filter (all rows
    pass, as many as the data may let through) and every expression the bare column `bare`;
    plus `per_cost` seconds per unit of the request's cost bound beyond bare columns."""

    def __init__(self, synthetic: Callable[[], Any], per_cost: Expected, cfg: TimingConfig,
                 bare: RowExpression | None = None, lanes: Lanes | None = None) -> None:
        self.synthetic, self.per_cost, self.cfg, self.bare = synthetic, per_cost, cfg, bare
        self.lanes = lanes or Lanes(cfg.lanes)
        self._typical: dict[Any, Expected] = {}
        self._lock = threading.Lock()
        self._runs: dict[Any, Callable[[], None]] = {}  # a run of each shape on the synthetic rows
        self._recent: dict[Any, deque[float]] = {}  # its last timings (`refresh`)
        self._asked: set[Any] = set()  # the shapes asked for since the last refresh

    def deadline(self, query: Any, options: dict[str, Any], run: Callable[[Any], Any], kind: str,
                 joined: tuple[str, ...] = (), made_up: Callable[[], Any] | None = None) -> Expected:
        """The work of `run(query)` (a release of `kind`: "spec" or "sql") before the load factor
        and slack (`Lanes.admit`); measures `run` on the synthetic rows the first time a release
        of this shape is asked for. A query that joins public tables (`joined`: its JOIN clauses,
        part of its shape) is measured as `made_up()` builds it: the same query over the
        synthetic rows joined with the public tables themselves (public, their size included)."""
        key = (kind, joined, *_shape(query, options))
        with self._lock:  # one measurement at a time: requests of a new shape wait for it
            typical = self._typical.get(key)
            if typical is None:
                self._runs[key] = once = lambda: _attempt(lambda: run(self._stand_in(query, made_up)))
                with self.lanes.exclusive():
                    typical = self._typical[key] = _median_time(once, self.cfg, self.lanes.load)
                self._recent[key] = deque([typical.busy], maxlen=RECENT)
            self._asked.add(key)
        extra = max(release_cost(query) - (0 if self.bare is None else len(query.expressions)), 0.0)
        return priced(typical, self.per_cost, extra, self.cfg.margin)

    def refresh(self) -> None:
        """Re-time each shape asked for since the last refresh: one round of `lanes` runs at once
        on the synthetic rows, in a window that reserves every lane (`Lanes.reserve_all`), so
        that no request's work runs in it and the timing follows the machine's load, never a
        request's data. A round not done by the end of its window (twice the shape's typical
        time, plus the slack) counts as the whole window, which is known then, before any
        request runs. The typical time (busy, at load factor 1) becomes the largest of the last
        `RECENT` timings: it rises at once and falls back over a few refreshes."""
        with self._lock:
            asked, self._asked = self._asked, set()
        for key in asked:
            factor = self.lanes.factor()
            busy = self._typical[key].busy
            window = deadline_of(2 * busy, factor, self.cfg, self.lanes.jitter)
            with self.lanes.window(window, 1.5 * factor * busy) as end, caught():  # made-up rows' warnings
                times = _round(self._runs[key], self.cfg.lanes, end)
            took = statistics.median(times) if len(times) == self.cfg.lanes else window
            with self._lock:
                self._recent[key].append(took / factor)
                self._typical[key] = replace(self._typical[key], busy=max(self._recent[key]))

    def _stand_in(self, query: Any, made_up: Callable[[], Any] | None) -> Any:
        """`query`'s shape on the synthetic rows (a new cursor each time, for runs at once)."""
        bare = query.expressions if self.bare is None else dict.fromkeys(query.expressions, self.bare)
        rows = replace(query.table, engine=self.synthetic()) if made_up is None else made_up().table
        return replace(query, table=replace(rows, filters=()), expressions=bare)


def priced(typical: Expected, per_cost: Expected, extra: float, margin: float) -> Expected:
    """`margin` times a shape's `typical` time plus `extra` cost units at `per_cost`, at the
    shape's load factor: the cost's part never below its own timing (at `per_cost.factor`),
    and the shape's part never held to that timing's factor (a cost timed at a busier moment
    does not make the bare shape slower)."""
    price = extra * max(per_cost.factor, typical.factor) / typical.factor
    return Expected(margin * typical.alone + per_cost.alone * price,
                    margin * typical.busy + per_cost.busy * price, typical.factor)


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
RESERVE = 0.005  # seconds before the deadline at which work still running is cut off, so that the
                # default answer (its spend written: 0.97 ms p50, 1.56 ms at most in 50) is
                # ready by the deadline; at most a quarter
PROBES = 3  # probe rounds the load factor is taken over (`Load`)
PROBE_ROWS = 5_000_000  # rows of the probe's engine query: about 20 ms, several scheduler slices
JITTER_RUNS = 100  # small works timed at start-up for the slack (`measure_jitter`) ...
JITTER_QUANTILE = 0.99  # ... its quantile: the share of requests whose delay it covers
JITTER_ROWS = 10_000  # rows of that small work's engine query (well under a millisecond)


class Load:
    """The machine's load as seen by a fixed synthetic probe (an engine query over made-up rows,
    `lanes` at once, each on its own cursor from `connect()`), run in a window that reserves
    every lane, so that no request's work runs beside it: its times depend on the machine and
    the service's public work, never on a request's data. `factor()` is the median over the last
    `PROBES` rounds of a round's mean time over the mean at start-up (the probe spans several
    scheduler slices, so its time, like a request's, is its work over the share of the CPU it
    got; the median drops a round that met a passing stall). Only ratios of factors matter
    (`_median_time` divides each timing by the factor of its moment): the start-up mean cancels."""

    def __init__(self, connect: Callable[[], Any], cfg: TimingConfig) -> None:
        self.connect, self.cfg = connect, cfg
        self._lock = threading.Lock()
        self.probe()  # warms the engine
        times = [t for _ in range(cfg.runs) for t in self.round(None)]
        self.baseline = statistics.mean(times)
        self._rounds: deque[list[float]] = deque([times[-cfg.lanes:]], maxlen=PROBES)

    def probe(self) -> None:
        """The fixed public work a probe runs (the same every time)."""
        self.connect().execute(f"SELECT sum(hash(range)) FROM range({PROBE_ROWS})").fetchall()

    def round(self, until: float | None) -> list[float]:
        """The times of `lanes` probes at once (`_round`); one not done by `until` counts as
        ending then."""
        start = time.perf_counter()
        times = _round(self.probe, self.cfg.lanes, until)
        late = time.perf_counter() - start
        return times + [late] * (self.cfg.lanes - len(times))

    def factor_of(self, times: list[float]) -> float:
        """The load factor probe `times` show."""
        return statistics.mean(times) / self.baseline

    def factor(self) -> float:
        with self._lock:
            return statistics.median(self.factor_of(r) for r in self._rounds)

    def measure(self, lanes: Lanes) -> None:
        """One probe round in a window of every lane, three times the probe's time at the
        current load factor, once the work of requests before it has stopped (work cut off at
        its deadline may take a while to stop: if the window has passed by then, no round) and
        no request is `Lanes.active`, or with 1.5 probe times of the window left."""
        probe = self.baseline * self.factor()  # a round's time now
        with lanes.window(3 * probe, 1.5 * probe) as end:
            if time.monotonic() >= end:
                return
            times = self.round(end)
        with self._lock:
            self._rounds.append(times)


def _probing(lanes: weakref.ref[Lanes], every: float, stop: threading.Event) -> None:
    """Run the load probe every `every` seconds while the lanes live, until `stop` is set."""
    while not stop.is_set() and (mine := lanes()) is not None:
        assert mine.load is not None
        try:
            mine.load.measure(mine)
        except Exception:  # the engine was closed: the service is going away
            return
        mine = None
        stop.wait(every)


class Lanes:
    """`count` lanes for padded requests. A request reserves them at admission (`admit`): every
    lane when all are idle, or will all be idle at the end of a window of public work that
    holds them all (the probe's: `reserve_all`) reserved behind idle lanes or a request that
    ran alone, and no other request is `active`, so that it runs alone; else the lane free
    soonest, from when it is free (its last reservation's end, or now); it runs from the start
    of its reservation and is answered at its end. Reservations are made from deadlines and the
    probe's timings only (public), never from when work ended: one request's private running
    time moves no other request's answer. With `connect` (new engine cursors) and `cfg.probe`,
    a `Load` probe runs every `cfg.probe` seconds in a window of every lane. `jitter` is the
    measured scheduling delay (`measure_jitter`, at load factor 1) when there is an engine to
    measure it on, else 0."""

    def __init__(self, count: int, cfg: TimingConfig | None = None,
                 connect: Callable[[], Any] | None = None) -> None:
        self._free = [0.0] * count
        self._window = 0.0  # the end of the last window of public work that held every lane
        self._lock = threading.Lock()
        self._running: dict[threading.Event, float] = {}  # admitted requests' work: set once
                                                          # stopped; the end of its reservation
        self._quiet = threading.Condition()  # requests' own Python work against a probe round
        self._active = 0  # threads in `active`, not waiting for their lane
        self._in_round = False  # a probe round runs (`probing`)
        self.cfg = cfg or TimingConfig(lanes=count)
        self.load = None if connect is None or not self.cfg.probe else Load(connect, self.cfg)
        self.jitter = 0.0 if connect is None else \
            measure_jitter(connect) / (1.0 if self.load is None else self.load.factor())
        self._stop = threading.Event()
        self._prober: threading.Thread | None = None
        if self.load is not None:
            self._prober = threading.Thread(target=_probing, name="bayesdp-load-probe", daemon=True,
                                            args=(weakref.ref(self), self.cfg.probe, self._stop))
            self._prober.start()

    def close(self) -> None:
        """Stop the load probe, once its round (if one runs) ends."""
        self._stop.set()
        if self._prober is not None:
            self._prober.join()

    def factor(self) -> float:
        return 1.0 if self.load is None else self.load.factor()

    def admit(self, expected: Expected | float, done: threading.Event | None = None) -> tuple[float, float]:
        """The start (`time.monotonic()`) and length of a request's reservation: `expected` as
        `deadline_of` makes it at the load factor (alone if every lane is idle now and no other
        request is `active`: it reserves them all; else busy, on the lane free soonest), or a
        number of seconds as it is. `done`, set when the request's work has stopped, is kept
        until then (`settle`)."""
        factor = self.factor()
        with self._lock:
            now = time.monotonic()
            idle = max(self._free)
            # Alone only if no other request is being read or checked meanwhile (`active`): its
            # Python would run beside the work (public: requests in flight, not their data).
            with self._quiet:
                others = self._active - int(getattr(_current, "lanes", None) is self)
            if isinstance(expected, Expected) and not others and \
                    (idle <= now or min(self._free) == idle == self._window):
                start = max(now, idle)
                seconds = deadline_of(expected.alone, max(factor, expected.factor), self.cfg, self.jitter,
                                      alone=True)
                self._free = [start + seconds] * len(self._free)
            else:
                seconds = expected if not isinstance(expected, Expected) else \
                    deadline_of(expected.busy, max(factor, expected.factor), self.cfg, self.jitter)
                lane = min(range(len(self._free)), key=self._free.__getitem__)
                start = max(now, self._free[lane])
                self._free[lane] = start + seconds
            if done is not None:
                self._running[done] = start + seconds
            return start, seconds

    def stopped(self, done: threading.Event) -> None:
        """A request's work has stopped (`admit`'s `done`)."""
        done.set()
        with self._lock:
            self._running.pop(done, None)

    def reserve_all(self, seconds: float) -> float:
        """The start of a reservation of every lane at once for `seconds`, when all are free."""
        with self._lock:
            start = max(time.monotonic(), *self._free)
            # Behind idle lanes or a request that ran alone (as one client's requests are), not
            # behind lanes busy at once: a request after it would then meet a queue's load.
            self._window = start + seconds if min(self._free) == max(self._free) or \
                max(self._free) <= time.monotonic() else 0.0
            self._free = [start + seconds] * len(self._free)
            return start

    @contextlib.contextmanager
    def window(self, seconds: float, needs: float) -> Iterator[float]:
        """A window of public work (a probe round, a re-timing) holding every lane for
        `seconds` (`reserve_all`): entered at its start, once the work of the requests before it
        has stopped (`settle`) and no request is `active`, or with `needs` seconds of it left
        (`probing`); yields its end (a `time.monotonic()`) and is left there."""
        start = self.reserve_all(seconds)
        time.sleep(max(start - time.monotonic(), 0.0))
        self.settle(start)
        with self.probing(start + seconds - needs):
            yield start + seconds
        time.sleep(max(start + seconds - time.monotonic(), 0.0))

    def settle(self, before: float) -> None:
        """Wait for the work of every request reserved to end by `before` to stop (cut off, it
        is interrupted), even one whose thread woke up after its reservation."""
        with self._lock:
            ended = [done for done, end in self._running.items() if end <= before]
        for done in ended:
            done.wait()

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """A request's own work outside its lane (reading and checking it, writing its answer),
        in this thread: it waits while a probe round runs, and a round waits a while for it to
        end (`probing`), so that the probe times the machine, not the next request's
        preparation beside it (a client's next request follows its answer, which a window
        follows). `run_with_deadline`'s waits do not count."""
        with self._quiet:
            self._quiet.wait_for(lambda: not self._in_round)
            self._active += 1
        _current.lanes = self
        try:
            yield
        finally:
            _current.lanes = None
            self._leave()

    def _leave(self) -> None:
        """This thread's Python work outside its lane stops (`active`, `waiting`)."""
        with self._quiet:
            self._active -= 1
            self._quiet.notify_all()

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """This thread waits for its lane or its deadline: not `active` meanwhile."""
        if getattr(_current, "lanes", None) is not self:
            yield
            return
        self._leave()
        try:
            yield
        finally:
            with self._quiet:  # no wait for a round: a reservation never starts or ends in one
                self._active += 1

    @contextlib.contextmanager
    def probing(self, until: float) -> Iterator[None]:
        """A probe round: from when no request is `active`, or from `until` (a
        `time.monotonic()`) if one still is; requests becoming active wait for its end."""
        with self._quiet:
            self._quiet.wait_for(lambda: not self._active, max(until - time.monotonic(), 0.0))
            self._in_round = True
        try:
            yield
        finally:
            with self._quiet:
                self._in_round = False
                self._quiet.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Every lane, from when all are free until the block ends (its length public: work on
        made-up rows); no request is admitted meanwhile."""
        with self._lock:
            time.sleep(max(max(self._free) - time.monotonic(), 0.0))
            for done in list(self._running):  # every admitted request's: its work has stopped
                done.wait()
            try:
                yield
            finally:
                self._free = [time.monotonic()] * len(self._free)


def measure_jitter(connect: Callable[[], Any]) -> float:
    """Seconds of the machine's scheduling delays: the `JITTER_QUANTILE` quantile, less the
    median, of the times of `JITTER_RUNS` fixed small works, each run as a request's is (in a
    thread of its own, on a new engine cursor from `connect()`, its end signalled to a waiting
    thread); a delay of the work's start or of its answer that does not grow with the work."""
    def work(done: threading.Event) -> None:
        try:
            connect().execute(f"SELECT sum(range) FROM range({JITTER_ROWS})").fetchall()
        finally:
            done.set()

    times = []
    for _ in range(JITTER_RUNS + 1):
        done = threading.Event()
        start = time.perf_counter()
        threading.Thread(target=work, args=(done,), name="bayesdp-jitter", daemon=True).start()
        done.wait()
        times.append(time.perf_counter() - start)
    times = times[1:]  # the first warms the engine
    return float(np.quantile(times, JITTER_QUANTILE) - np.median(times))


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


def run_with_deadline(work: Callable[[], T], expected: Expected | float | None,
                      on_cut: Callable[[float], T], lanes: Lanes | None = None) -> T:
    """`work()`'s result or exception, given out at the end of its reservation on `lanes`
    (`Lanes.admit`: for `expected`) and not before; if `work` is still running `RESERVE` seconds
    before then, its connections are interrupted and `on_cut(seconds)` answers instead.
    `expected=None` runs `work` as it is (no padding)."""
    if expected is None:
        return work()
    lanes = lanes or Lanes(1)
    done = threading.Event()
    start, seconds = lanes.admit(expected, done)
    with lanes.waiting():
        wait = start - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        return _padded(work, start, seconds, on_cut, lanes, done)


def _padded(work: Callable[[], T], start: float, seconds: float, on_cut: Callable[[float], T],
            lanes: Lanes, done: threading.Event) -> T:
    request = _Request()
    pending = getattr(_current, "pending", ())
    request.connections.extend(pending)  # the relations a query was built on run there
    if pending:
        pending.clear()
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
            lanes.stopped(done)

    threading.Thread(target=worker, name="bayesdp-deadline", daemon=True).start()
    answer = box
    cut_at = start + seconds - min(RESERVE, seconds / 4)
    if not done.wait(max(cut_at - time.monotonic(), 0.0)):
        request.cut_off()
        answer = {}  # the work may still finish: its result is not the answer
        try:
            answer["value"] = on_cut(seconds)
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
    """The default answer of a request cut off at its deadline of `seconds` (its text is the
    same whatever the data)."""
    return DeadlinePassed(
        f"the request passed its deadline of {seconds:.3g} s (fixed before it ran, from the "
        "table's size, the request's cost and the machine's load) and was stopped; what it "
        "declared was spent, as for an answer. Ask for less work per row (fewer or simpler "
        "expressions)",
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


def costly_expression(column: str, sample: str = "1") -> str:
    """A calibration expression over `column`: its text doubled four times (16-fold, the
    checker's limit) by replacing the most common character of `sample`, one of its values;
    replacing many matches is the costliest work per unit of cost the checker admits."""
    c = max(sample, key=sample.count) if sample else "1"
    literal, doubled = "'" + c.replace("'", "''") + "'", "'" + (c * 2).replace("'", "''") + "'"
    text = f"CAST({ident(column)} AS VARCHAR)"
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
    fixed seed, since these rows are made up and released nowhere. Each row is its own unit, so
    that contribution bounding keeps every row, as many as the data may let through (a table
    keyed by a row id is the common case: a unit for every two rows timed it 6% fast)."""
    rng = np.random.default_rng(0)
    data: dict[str, Any] = {}
    if ds.privacy_unit:
        data[ds.privacy_unit] = rng.permutation(rows)
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
        service.db.execute(f"CREATE OR REPLACE TABLE {ident('ds_' + cal.name)} AS "
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
    lanes = service.lanes
    with lanes.exclusive():  # no probe round beside it: each would make the other slower
        model = calibrate([point(count), point(costly)], cfg, lanes.load)
    bounded = [c.name for c in ds.columns.values() if c.bounds]
    bare = row_expression(ident(bounded[0]), list(ds.columns)) if bounded else None
    return Releases(lambda: service.query(cal, count)[0].table.engine,
                    Expected(model.alone.per_cost, model.busy.per_cost, model.factor), cfg, bare, lanes)


def calibrate_holdout(connection: Any, train: str, holdout_rows: int, columns: list[str],
                      cfg: TimingConfig, load: Load | None = None) -> Model:
    """`Model` of holdout queries, timed on the public training table (`train`, quoted) and a
    table of its rows repeated to the holdout's size in place of the holdout: the cheapest query
    a bare numeric column (the first, by the training table's types; a text column is cast row
    by row, which would be the worst cost-1 query), the costly one growing the training table's
    longest text."""
    stand_in = ident(train.strip('"') + "#calibration")
    connection.execute(f"CREATE OR REPLACE TABLE {stand_in} AS SELECT t.* FROM {train} AS t, "
                       f"range(CAST(ceil({holdout_rows} / (SELECT count(*) FROM {train})) AS BIGINT)) "
                       f"LIMIT {holdout_rows}")
    texts = [f"CAST({ident(c)} AS VARCHAR)" for c in columns]
    longest = connection.execute("SELECT " + ", ".join(f"arg_max({t}, length({t}))" for t in texts) +
                                 f" FROM {train}").fetchall()[0]
    value, column = max(zip([v or "" for v in longest], columns, strict=True), key=lambda x: len(x[0]))
    types = connection.sql(f"SELECT * FROM {train}").types
    numeric = [c for c, t in zip(columns, types, strict=True) if str(t).split("(")[0] in NUMERIC]
    cheap = row_expression(ident((numeric or columns)[0]), columns)
    costly = row_expression(costly_expression(column, value), columns)

    def point(queries: list[RowExpression]) -> Point:
        return len(queries), query_cost(queries), \
            lambda: table_means(connection.cursor(), [train, stand_in], queries)

    return calibrate([point([cheap]), point([costly]), point([cheap] * 4)], cfg, load)
