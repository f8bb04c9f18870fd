"""What one request may cost the service, and the means to stop it.

A request's cost is checked from the request alone (its bins, public keys, aggregates, filters,
expression and SQL text, holdout queries) before anything runs or is spent, so a refusal never
depends on the data. The engine is capped as a backstop: DuckDB's memory and threads for the
service's database, each request's queries interrupted when its client disconnects or its
wall-clock limit passes, and requests run in a bounded pool with a bounded queue.

    [limits]                       # in the service configuration; every key is optional
    max_cells = 100_000            # released numbers: public keys × (bins of each histogram, 1 per other)
    max_bins = 10_000              # histogram bins (edges less one) of all aggregates together
    max_aggregates = 100
    max_where = 32                 # filter conditions
    max_expression_chars = 10_000  # all row expressions together: filters, columns, conditions, queries
    max_sql_chars = 20_000
    max_holdout_queries = 100      # per request
    max_text_chars = 1_000         # a private table's text values are cut to this many characters
                                   # when the service loads it: a row's text, and the work an
                                   # expression does on it, is bounded by a public length
    max_seconds = 60               # a request's engine work is interrupted after this (backstop)
    body_seconds = 10              # to receive a request's headers (else the connection is closed)
                                   # and its body (else 408 and the connection is closed)
    memory_limit = "2GB"           # DuckDB memory_limit of the service's database
    process_memory = "4GB"         # the server process's data memory (RLIMIT_DATA): past it, 503
    threads = 2                    # DuckDB threads
    workers = 4                    # previews, releases, holdout queries computing at once (threads)
    queue = 64                     # requests waiting beyond the workers, else 503 with Retry-After
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import re
import resource
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from typing import Any, TypeVar

import anyio
import duckdb

from bayesdp.errors import InvalidParameter, check_keys, invalid

T = TypeVar("T")


@dataclass(frozen=True)
class Limits:
    """The service's per-request limits (see the module docstring for their meaning)."""

    max_cells: int = 100_000
    max_bins: int = 10_000
    max_aggregates: int = 100
    max_where: int = 32
    max_expression_chars: int = 10_000
    max_sql_chars: int = 20_000
    max_holdout_queries: int = 100
    max_text_chars: int = 1_000
    max_seconds: float = 60.0
    body_seconds: float = 10.0
    memory_limit: str = "2GB"
    process_memory: str = "4GB"
    threads: int = 2
    workers: int = 4
    queue: int = 64


_MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(i?)B", re.IGNORECASE)


def _bytes(size: str) -> int:
    """A size as DuckDB reads it: KB, MB, ... are powers of 1000, KiB, MiB, ... of 1024."""
    m = _MEMORY.fullmatch(size.strip())
    assert m is not None
    number, prefix, binary = m.groups()
    return int(float(number) * (1024 if binary else 1000) ** " KMGT".index(prefix.upper() or " "))


def parse_limits(v: Any) -> Limits:
    """The [limits] table of a service configuration, validated key by key."""
    if not isinstance(v, dict):
        raise invalid("limits", v, "a table such as { max_bins = 10000 }")
    check_keys(v, [f.name for f in fields(Limits)], "limits")
    for key, value in v.items():
        if key in ("memory_limit", "process_memory"):
            if not isinstance(value, str) or not _MEMORY.fullmatch(value.strip()):
                raise invalid(f"limits.{key}", value, 'a size such as "2GB" or "512MB"')
        elif key in ("max_seconds", "body_seconds"):
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                    or value <= 0:
                raise invalid(f"limits.{key}", value, "a finite number of seconds > 0")
        elif isinstance(value, bool) or not isinstance(value, int) or value < (key != "queue"):
            raise invalid(f"limits.{key}", value, f"an integer >= {int(key != 'queue')}")
    return Limits(**v)


class TooCostly(InvalidParameter):
    """A request over one of the service's limits (HTTP 413); the message names the limit."""


def _check(what: str, value: int, limit: int, key: str) -> None:
    if value > limit:
        raise TooCostly(f"{what} is {value:,}; the service allows at most {limit:,} "
                        f"(limits.{key} in its configuration)")


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _bins(item: dict[str, Any]) -> int:
    """The bins a histogram entry asks for: its count, or its edges less one."""
    bins = item.get("bins", 10)
    if isinstance(bins, int) and not isinstance(bins, bool):
        return bins
    return max(len(bins) - 1, 0) if isinstance(bins, list) else 0


def check_spec(spec: dict[str, Any], limits: Limits) -> None:
    """Refuse a spec whose size is over the limits, from the spec alone (no data is read)."""
    aggregates = spec.get("aggregates")
    items = list(aggregates.values()) if isinstance(aggregates, dict) else []
    _check("the number of aggregates", len(items), limits.max_aggregates, "max_aggregates")
    where = _texts(spec.get("where", []))
    _check("the number of where conditions", len(where), limits.max_where, "max_where")
    histograms = [i for i in items if isinstance(i, dict) and i.get("kind") == "histogram"]
    bins = sum(_bins(i) for i in histograms)
    _check("the number of histogram bins", bins, limits.max_bins, "max_bins")
    keys = spec.get("keys")
    groups = len(keys) if isinstance(keys, list) else 1
    cells = groups * (bins + len(items) - len(histograms))
    _check("the number of released values (public keys × bins and aggregates)", cells, limits.max_cells,
           "max_cells")
    texts = where + [t for i in items if isinstance(i, dict)
                     for t in _texts([i.get("column"), i.get("condition")])]
    _check("the length of the request's expressions", sum(map(len, texts)), limits.max_expression_chars,
           "max_expression_chars")


def check_sql(text: str, limits: Limits) -> None:
    _check("the length of the SQL", len(text), limits.max_sql_chars, "max_sql_chars")


def check_holdout(queries: list[str], limits: Limits) -> None:
    _check("the number of holdout queries", len(queries), limits.max_holdout_queries, "max_holdout_queries")
    _check("the length of the request's expressions", sum(map(len, queries)), limits.max_expression_chars,
           "max_expression_chars")


def cap_process(limits: Limits) -> None:
    """Cap the server process's data memory: an allocation past it fails (DuckDB's with an
    out-of-memory error, Python's with MemoryError, both answered 503) instead of the machine
    swapping or the kernel killing the server. Called by `bayesdp serve`, never in a library."""
    cap = _bytes(limits.process_memory)
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    soft = cap if hard == resource.RLIM_INFINITY else min(cap, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


def configure(db: duckdb.DuckDBPyConnection, limits: Limits) -> None:
    """Cap the service's database: memory (spilling to disk where DuckDB can) and threads."""
    db.execute(f"SET memory_limit = '{limits.memory_limit.strip()}'")
    db.execute(f"SET threads = {limits.threads}")


class Interrupted(InvalidParameter):
    """A request's engine work was stopped: its client left, or it ran past its time limit."""


class Work:
    """The DuckDB cursors one request computes on, so that its queries can be interrupted from
    another thread (a disconnect, a time limit, a deadline)."""

    def __init__(self) -> None:
        self._cursors: list[duckdb.DuckDBPyConnection] = []
        self._lock = threading.Lock()
        self.reason: str | None = None

    def cursor(self, db: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
        with self._lock:
            if self.reason is not None:
                raise Interrupted(f"the request was stopped: {self.reason}")
            cursor = db.cursor()
            self._cursors.append(cursor)
            return cursor

    def interrupt(self, reason: str) -> None:
        """Stop every query of the request now, and refuse it new ones."""
        with self._lock:
            if self.reason is None:
                self.reason = reason
            for c in self._cursors:
                c.interrupt()


_current: contextvars.ContextVar[Work | None] = contextvars.ContextVar("bayesdp_serve_work", default=None)


def cursor(db: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A new cursor on `db`, registered with the current request's Work (if any)."""
    work = _current.get()
    return db.cursor() if work is None else work.cursor(db)


@contextlib.contextmanager
def working(work: Work, max_seconds: float) -> Iterator[Work]:
    """Make `work` the current request's, interrupted after `max_seconds` of wall clock."""
    token = _current.set(work)
    timer = threading.Timer(max_seconds, work.interrupt, (f"it ran past {max_seconds:g} s",))
    timer.daemon = True
    timer.start()
    try:
        yield work
    finally:
        timer.cancel()
        _current.reset(token)


def interruptible(fn: Callable[..., T]) -> Callable[..., T]:
    """`fn`, whose failure after its request was interrupted is reported as Interrupted (the
    library turns DuckDB's interruption into a DataError, like any engine failure)."""

    def run(*args: Any) -> T:
        try:
            return fn(*args)
        except Exception:
            work = _current.get()
            if work is not None and work.reason is not None:
                raise Interrupted(f"the request was stopped: {work.reason}") from None
            raise

    return run


class Busy(Exception):
    """Every worker is busy and the queue is full (HTTP 503 with Retry-After)."""


class Pool:
    """At most `workers` requests computing at once in worker threads, `queue` more waiting;
    the event loop (and so /health and the cheap endpoints) stays free."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._limiter = anyio.CapacityLimiter(limits.workers)
        self._admitted = 0  # touched on the event loop only

    async def run(self, fn: Callable[..., T], *args: Any, receive: Callable[[], Any] | None = None,
                  work: Work | None = None) -> T:
        """`fn(*args)` in a worker thread as `work` (a new Work by default: a caller that keeps it
        can interrupt it, at a deadline say); interrupted when `receive` reports the client's
        disconnect or after limits.max_seconds."""
        if self._admitted >= self.limits.workers + self.limits.queue:
            raise Busy
        self._admitted += 1
        work = work or Work()

        def in_thread() -> T:
            with working(work, self.limits.max_seconds):
                return fn(*args)

        try:
            async with anyio.create_task_group() as tg:
                if receive is not None:
                    tg.start_soon(_watch, receive, work)
                out = await anyio.to_thread.run_sync(in_thread, limiter=self._limiter)
                tg.cancel_scope.cancel()
            return out
        finally:
            self._admitted -= 1


async def _watch(receive: Callable[[], Any], work: Work) -> None:
    """Interrupt `work` when the client disconnects (the body, if any, was read already)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            work.interrupt("the client disconnected")
            return
