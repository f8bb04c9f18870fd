"""Deadlines that follow the machine (`bayesdp.serve.timing`): the lanes' alone and busy modes,
the load probe and its windows, shapes timed while no request runs, and the holdout's
calibration. A deadline may depend only on public facts: the request, the lanes' reservations
and timings of public work taken while no request's work runs."""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pytest
from serve_helpers import write_service

from bayesdp.serve import timing
from bayesdp.serve.config import load_config
from bayesdp.serve.service import Service
from bayesdp.serve.state import State

QUIET = timing.TimingConfig(slack=0.0, slack_alone=0.0, least=0.0, runs=1, probe=0.0)


def test_a_request_admitted_when_every_lane_is_idle_runs_alone_and_holds_them_all() -> None:
    lanes = timing.Lanes(2, QUIET)
    now = time.monotonic()
    start, seconds = lanes.admit(timing.Expected(alone=0.1, busy=0.3))
    assert start - now < 0.05 and seconds == pytest.approx(0.1)
    # Admitted while the first holds every lane: beside another request from now on, after it.
    second, longer = lanes.admit(timing.Expected(alone=0.1, busy=0.3))
    third, _ = lanes.admit(timing.Expected(alone=0.1, busy=0.3))
    assert longer == pytest.approx(0.3)
    assert second >= start + 0.1 and third >= start + 0.1 and abs(second - third) < 0.01


def test_the_mode_follows_reservations_never_when_work_ended() -> None:
    """The first request's work ends at once, yet the second, admitted during the first's
    reservation, waits for its end and gets the busy deadline: 0.2 + 0.4 s."""
    lanes = timing.Lanes(2, QUIET)
    expected = timing.Expected(alone=0.2, busy=0.4)
    start = time.monotonic()
    first = threading.Thread(target=timing.run_with_deadline,
                             args=(lambda: None, expected, lambda _: None, lanes))
    first.start()
    time.sleep(0.05)
    timing.run_with_deadline(lambda: None, expected, lambda _: None, lanes)
    first.join()
    took = time.monotonic() - start
    assert 0.6 <= took < 0.7, took


class Load:
    """A stand-in load probe: a fixed factor."""

    def __init__(self, factor: float) -> None:
        self._factor = factor

    def factor(self) -> float:
        return self._factor


def test_deadlines_scale_with_the_load_factor_never_below_the_one_they_were_timed_at() -> None:
    cfg = replace(QUIET, slack=0.01, slack_alone=0.01)
    lanes = timing.Lanes(2, cfg)
    lanes.load = Load(2.0)  # type: ignore[assignment]
    _, seconds = lanes.admit(timing.Expected(alone=0.1, busy=0.2))
    assert seconds == pytest.approx(2.0 * 0.1 + 0.01)
    _, seconds = lanes.admit(timing.Expected(alone=0.1, busy=0.2))
    assert seconds == pytest.approx(2.0 * 0.2 + 0.01)
    _, seconds = lanes.admit(timing.Expected(alone=0.1, busy=0.2, factor=3.0))  # timed when slower
    assert seconds == pytest.approx(3.0 * 0.2 + 0.01)


class Rounds:
    """A stand-in load probe whose rounds between timed runs read `between`, where its serving
    rounds (`factor`) read `serving`."""

    def __init__(self, between: float, serving: float) -> None:
        self.between, self.serving = between, serving

    def round(self, until: float | None) -> list[float]:
        return [self.between]

    def factor_of(self, times: list[float]) -> float:
        return statistics.mean(times)

    def factor(self) -> float:
        return self.serving


@pytest.mark.parametrize(("between", "serving"), [(1.0, 1.4), (1.4, 1.0)])
def test_a_timing_is_divided_by_the_larger_of_the_probe_s_factors(between: float, serving: float) -> None:
    """The periodic probe reads higher than its rounds run back to back between timed runs,
    while the work does not follow it: dividing by the back-to-back factor alone would scale
    every later deadline by that gap."""
    cfg = replace(QUIET, runs=3)
    expected = timing._median_time(lambda: time.sleep(0.02), cfg,
                                   Rounds(between, serving))  # type: ignore[arg-type]
    assert expected.factor == 1.4
    assert expected.alone * 1.4 >= 0.02  # the median of the timed runs, over 1.4


def test_a_cost_timed_at_a_busier_moment_prices_only_the_cost() -> None:
    """The cost per unit is timed once at start-up; a busy moment then must not hold every
    bare-column release's deadline to that moment's factor, nor let the cost's part fall below
    its own timing."""
    typical = timing.Expected(alone=0.1, busy=0.2, factor=1.0)
    per_cost = timing.Expected(alone=0.01, busy=0.02, factor=2.0)
    assert timing.priced(typical, per_cost, 0.0, 1.3) == timing.Expected(0.13, 0.26, 1.0)
    cfg = replace(QUIET, slack=0.0, slack_alone=0.0)
    lanes = timing.Lanes(2, cfg)
    lanes.load = Load(1.0)  # type: ignore[assignment]
    _, seconds = lanes.admit(timing.priced(typical, per_cost, 3.0, 1.3))
    assert seconds == pytest.approx(0.13 + 3 * 0.01 * 2.0)  # the cost's own timing, unscaled
    quick = timing.Expected(alone=0.01, busy=0.02, factor=0.5)
    lanes = timing.Lanes(2, cfg)
    lanes.load = Load(3.0)  # type: ignore[assignment]
    _, seconds = lanes.admit(timing.priced(typical, quick, 3.0, 1.3))
    assert seconds == pytest.approx(3.0 * (0.13 + 3 * 0.01))  # both scaled by the load now


class Probed:
    """A stand-in engine cursor for the probe: records when each probe query runs."""

    def __init__(self, log: list[tuple[float, float]]) -> None:
        self.log = log

    def execute(self, sql: str) -> Probed:
        start = time.monotonic()
        time.sleep(0.003)
        self.log.append((start, time.monotonic()))
        return self

    def fetchall(self) -> list[Any]:
        return []


def test_the_load_probe_runs_only_in_windows_no_request_runs_in() -> None:
    """The probe's timings set every later deadline, so they must not see a request's work
    (whose length may depend on its data): the probe runs in windows that reserve every lane."""
    probes: list[tuple[float, float]] = []
    lanes = timing.Lanes(2, timing.TimingConfig(probe=0.02, runs=1), lambda: Probed(probes))
    windows: list[tuple[float, float]] = []  # when each window was entered, and its end
    window = lanes.window

    @contextlib.contextmanager
    def logged(seconds: float, needs: float) -> Iterator[float]:
        with window(seconds, needs) as end:
            windows.append((time.monotonic(), end))
            yield end

    lanes.window = logged
    work: list[tuple[float, float]] = []
    lock = threading.Lock()

    def busy() -> None:  # CPU work to its cut-off at least, as a row that matches might cause
        start = time.monotonic()
        try:
            while time.monotonic() - start < 0.035:
                timing.check()  # stops once cut off, as an engine query is interrupted
        finally:
            with lock:
                work.append((start, time.monotonic()))

    def client() -> None:
        for _ in range(8):
            timing.run_with_deadline(busy, 0.04, lambda _: None, lanes)

    started = time.monotonic()
    clients = [threading.Thread(target=client) for _ in range(3)]
    for c in clients:
        c.start()
    for c in clients:
        c.join()
    assert len([v for v in windows if v[0] >= started]) >= 4, "the probe did not run while requests did"
    # A window entered before its end (a loaded machine may wake the probe's thread after it: no
    # round then) is entered once every request's work before it has stopped, and a probe that
    # starts in it meets none. (A probe thread that starts or runs past its window's end may meet
    # the next request's work; its time then counts as the whole window, fixed in advance.)
    during = [v for v in windows if started <= v[0] < v[1]]
    assert not [(v, w) for v in during for w in work if w[0] < v[0] < w[1]]
    in_windows = [p for p in probes if any(v[0] <= p[0] < v[1] for v in during)]
    inside = [(p, w) for p in in_windows for w in work if w[0] < p[0] < w[1]]
    assert in_windows and not inside, inside[:3]


@pytest.fixture
def service(tmp_path: Path) -> Service:
    config = load_config(write_service(tmp_path))
    config = replace(config, timing=timing.TimingConfig(runs=1))
    return Service(config, State(config))


def test_a_new_shape_is_timed_in_a_window_no_request_runs_in(service: Service) -> None:
    """A shape's typical time sets every later deadline of that shape: it is timed after the
    requests already admitted end, and none starts meanwhile."""
    ds = service.config.datasets["visits"]
    query, _, options = service.query(ds, {"epsilon": 1.0, "aggregates": {"n": {"kind": "count"}}})
    lanes = timing.Lanes(2, QUIET)
    deadlines = timing.Releases(service.deadlines["visits"].synthetic, timing.Expected(0.0, 0.0),
                                QUIET, lanes=lanes)
    runs: list[float] = []
    request = threading.Thread(target=timing.run_with_deadline,
                               args=(lambda: None, 0.3, lambda _: None, lanes))
    admitted = time.monotonic()
    request.start()
    time.sleep(0.02)
    deadlines.deadline(query, options, lambda q: runs.append(time.monotonic()), "spec")
    ended = time.monotonic()
    request.join()
    assert runs and min(runs) >= admitted + 0.3
    assert lanes.admit(0.01)[0] >= ended - 0.01  # no request admitted meanwhile ran before its end


def test_the_holdout_s_cheapest_calibration_query_is_a_bare_numeric_column(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A bare text column is cast to a number row by row: as the cheapest point it made every
    holdout deadline that of the worst cost-1 query."""
    con = duckdb.connect()
    con.execute("CREATE TABLE train AS SELECT 'shop ' || (range % 7) AS shop, range * 1.5 AS spend "
                "FROM range(1000)")
    asked: list[list[str]] = []

    def means(cursor: Any, tables: list[str], queries: list[Any]) -> tuple[list[float], list[float]]:
        asked.append([q.text for q in queries])
        return [0.0] * len(queries), [0.0] * len(queries)

    monkeypatch.setattr(timing, "table_means", means)
    timing.calibrate_holdout(con, "train", 500, ["shop", "spend"], QUIET)
    assert asked[0] == ['"spend"']


def test_a_request_admitted_during_the_probe_s_window_runs_alone_after_it() -> None:
    """The probe's window holds every lane with public work: the request admitted during it is
    the only one when the window ends, so it runs alone then, at the alone deadline (it was
    given the busy one, twice as long here, whenever the probe had just run)."""
    lanes = timing.Lanes(2, QUIET)
    start = lanes.reserve_all(0.2)
    begins, seconds = lanes.admit(timing.Expected(alone=0.1, busy=0.3))
    assert begins == pytest.approx(start + 0.2) and seconds == pytest.approx(0.1)
    # It holds every lane: the next one waits for it and runs beside a third, busy.
    after, longer = lanes.admit(timing.Expected(alone=0.1, busy=0.3))
    assert after == pytest.approx(start + 0.3) and longer == pytest.approx(0.3)
    # Behind lanes busy at once (a queue), a window is followed by busy requests, as before it.
    start = lanes.reserve_all(0.2)
    _, seconds = lanes.admit(timing.Expected(alone=0.1, busy=0.3))
    assert seconds == pytest.approx(0.3)


def test_the_slack_is_the_machine_s_measured_jitter_when_it_is_more_than_configured() -> None:
    """The lanes measure the scheduling delay of small works run as requests are; a deadline's
    slack is that delay, scaled by the load factor, plus the time the cut-off keeps for the
    default answer (`RESERVE`), or the configured `slack` if more."""
    con = duckdb.connect()
    lanes = timing.Lanes(2, QUIET, con.cursor)
    assert 0.0 < lanes.jitter < 0.5
    lanes.load = Load(2.0)  # type: ignore[assignment]
    _, seconds = lanes.admit(timing.Expected(alone=0.1, busy=0.2))
    assert seconds == pytest.approx(2.0 * (0.1 + lanes.jitter) + timing.RESERVE)  # cut off at 2 * (...)
    lanes.cfg = replace(QUIET, slack=1.0)
    _, seconds = lanes.admit(timing.Expected(alone=0.1, busy=0.2))
    assert seconds == pytest.approx(2.0 * 0.2 + 1.0)


def test_a_request_that_runs_alone_gets_the_smaller_slack() -> None:
    """Alone, no other lane's work runs beside it: `slack_alone`; beside one, `slack`."""
    lanes = timing.Lanes(2, replace(QUIET, slack=0.3, slack_alone=0.02))
    assert lanes.admit(timing.Expected(alone=0.1, busy=0.2))[1] == pytest.approx(0.12)
    assert lanes.admit(timing.Expected(alone=0.1, busy=0.2))[1] == pytest.approx(0.5)


def _in_thread(fn: Any) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)
    thread.start()
    return thread


def test_a_probe_round_waits_for_requests_own_work_and_requests_wait_for_the_round() -> None:
    """The probe times the machine, not a request's preparation beside it: a round begins when
    no request is active (or at its `until`), and a request becoming active waits for it."""
    lanes = timing.Lanes(2, QUIET)

    def prepare(seconds: float) -> None:
        with lanes.active():
            time.sleep(seconds)

    start = time.monotonic()
    first = _in_thread(lambda: prepare(0.2))
    time.sleep(0.02)
    with lanes.probing(start + 5.0):
        began = time.monotonic()
        entered: list[float] = []
        second = _in_thread(lambda: (lanes.active().__enter__(), entered.append(time.monotonic())))
        time.sleep(0.2)
        ended = time.monotonic()
    first.join()
    second.join()
    assert 0.18 <= began - start < 0.5  # after the first request's work, long before `until`
    assert entered and entered[0] >= ended  # the second waited for the round


def test_a_probe_round_waits_for_active_requests_only_until_its_limit_and_not_for_waiting_ones() -> None:
    lanes = timing.Lanes(2, QUIET)

    def hold(seconds: float, waiting: bool) -> None:
        with lanes.active(), (lanes.waiting() if waiting else contextlib.nullcontext()):
            time.sleep(seconds)

    start = time.monotonic()
    busy = _in_thread(lambda: hold(2.0, False))
    time.sleep(0.02)
    with lanes.probing(start + 0.2):
        assert 0.18 <= time.monotonic() - start < 0.6  # the limit, not the request's 2 s
    busy.join()
    start = time.monotonic()
    waiter = _in_thread(lambda: hold(1.0, True))  # waits for its lane: not active
    time.sleep(0.02)
    with lanes.probing(start + 5.0):
        assert time.monotonic() - start < 0.3
    waiter.join()


def test_closing_the_lanes_stops_their_load_probe() -> None:
    """Nothing of the service's runs in the engine once it is closed (a probe round running in
    DuckDB while the interpreter exits can abort the process)."""
    lanes = timing.Lanes(2, replace(QUIET, probe=0.01), duckdb.connect().cursor)
    prober = lanes._prober
    assert prober is not None and prober.is_alive()
    lanes.close()
    assert not prober.is_alive()


def test_a_window_of_public_work_begins_once_work_cut_off_before_it_has_stopped() -> None:
    """A probe round or a re-timing never runs beside a request's work, even one that was cut
    off at its deadline and is still stopping (`Lanes.window`, `Lanes.settle`)."""
    lanes = timing.Lanes(2, QUIET)
    done = threading.Event()
    start = time.monotonic()
    lanes.admit(0.05, done)
    stopping = threading.Timer(0.3, lambda: lanes.stopped(done))
    stopping.start()
    with lanes.window(0.1, 0.0) as end:
        entered = time.monotonic()
    assert entered - start >= 0.29 and end >= start + 0.15
    stopping.join()


def test_a_request_is_not_alone_while_another_is_being_prepared() -> None:
    """Another request being read or checked (`Lanes.active`) runs its Python beside the work:
    the request gets the busy deadline, on one lane."""
    lanes = timing.Lanes(2, QUIET)
    preparing, release = threading.Event(), threading.Event()

    def prepare() -> None:
        with lanes.active():
            preparing.set()
            release.wait(5)

    other = _in_thread(prepare)
    preparing.wait(5)
    with lanes.active():  # the request itself is active too: it does not count
        _, seconds = lanes.admit(timing.Expected(alone=0.1, busy=0.3))
    release.set()
    other.join()
    assert seconds == pytest.approx(0.3)
    with lanes.active():
        _, seconds = lanes.admit(timing.Expected(alone=0.1, busy=0.3))
    assert seconds == pytest.approx(0.3)  # behind the first's reservation: busy
    lanes = timing.Lanes(2, QUIET)
    with lanes.active():
        assert lanes.admit(timing.Expected(alone=0.1, busy=0.3))[1] == pytest.approx(0.1)
