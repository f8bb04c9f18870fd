"""The deadline machinery (`bayesdp.serve.timing`): padding, cut-off, the declared spend, the
exhausted holdout and the configuration."""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pytest
from serve_helpers import write_service

import bayesdp.serve.service as service_module
from bayesdp.errors import InvalidParameter
from bayesdp.serve import limits, timing
from bayesdp.serve.config import load_config, parse_config
from bayesdp.serve.service import AuditedLedger, Service
from bayesdp.serve.state import State


def test_an_answer_ready_early_waits_for_the_deadline() -> None:
    start = time.monotonic()
    assert timing.run_with_deadline(lambda: 7, 0.2, lambda _: -1) == 7
    assert time.monotonic() - start >= 0.2


def test_an_error_ready_early_waits_for_the_deadline_too() -> None:
    def fail() -> int:
        raise ValueError("from the data")

    start = time.monotonic()
    with pytest.raises(ValueError, match="from the data"):
        timing.run_with_deadline(fail, 0.2, lambda _: -1)
    assert time.monotonic() - start >= 0.2


def test_slow_engine_work_is_interrupted_and_the_default_answers_at_the_deadline() -> None:
    con = duckdb.connect()
    # Minutes of work (a cross join of ten billion rows), on a relation built before the work
    # runs, as the service builds a query's relation while it prepares the request.
    relation = timing.watch(con.cursor()).sql("SELECT count(*) FROM range(100000) a, range(100000) b "
                                              "WHERE a.range * b.range % 7 = 3")

    ended = threading.Event()

    def slow() -> int:
        try:
            return int(relation.fetchall()[0][0])
        finally:
            ended.set()

    start = time.monotonic()
    assert timing.run_with_deadline(slow, 0.3, lambda _: -1) == -1
    took = time.monotonic() - start
    assert 0.3 <= took < 0.3 + 0.25, took
    assert ended.wait(5), "the engine went on with the cut-off request's query"


def test_a_request_s_time_limit_also_stops_the_queries_its_deadline_thread_opens() -> None:
    """The request's Work (`limits.working`) follows its work into the deadline thread, so a
    query opened there (as a holdout query's) stops at the time limit, long before the cut-off."""
    con = duckdb.connect()

    def slow() -> int:
        return int(limits.cursor(con).sql("SELECT count(*) FROM range(100000) a, range(100000) b "
                                          "WHERE a.range * b.range % 7 = 3").fetchall()[0][0])

    with limits.working(limits.Work(), 0.2), pytest.raises(duckdb.InterruptException):
        timing.run_with_deadline(slow, 2.0, lambda _: -1)


class Spends:
    def __init__(self) -> None:
        self.labels: list[str] = []

    def spend(self, guarantee: Any, label: str) -> None:
        self.labels.append(label)


def test_a_cut_off_spends_what_was_declared_once_and_the_work_can_no_longer_spend() -> None:
    spends = Spends()
    guarded = timing.GuardedLedger(spends)
    guarded.cut_off(["declared"], "cut")
    assert spends.labels == ["cut"]
    with pytest.raises(timing.Interrupted):
        guarded.spend("late", "work")
    assert spends.labels == ["cut"]


def test_a_cut_off_after_the_work_spent_spends_nothing_more() -> None:
    spends = Spends()
    guarded = timing.GuardedLedger(spends)
    guarded.spend("g", "work")
    guarded.cut_off(["declared"], "cut")
    assert spends.labels == ["work"]


def test_a_cut_off_between_two_spends_spends_the_second() -> None:
    """A release that learns bounds spends twice: cut off between them, it still costs both."""
    spends = Spends()
    guarded = timing.GuardedLedger(spends)
    guarded.spend("bounds", "work")
    guarded.cut_off(["bounds", "aggregates"], "cut")
    assert spends.labels == ["work", "cut"]


LEARNT = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, privacy_unit_column = user) "
          "COUNT(*) AS n FROM visits")


def test_a_cut_off_costs_the_same_wherever_it_stops_a_release_with_learnt_bounds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the work is when its deadline passes depends on the data (its time does): cut off
    before any spend or between the learnt bounds' spend and the aggregates', the budget left is
    that of a release that finished, so that it tells nothing of where the cut-off fell."""
    config = load_config(write_service(tmp_path))
    svc = Service(config, State(config))
    spend = timing.GuardedLedger.spend
    spent = []
    for cut_at in (0, 1, None):  # before the first spend, before the second, never
        token = svc.state.add_analyst(f"analyst{cut_at}")
        analyst = next(a for a in svc.state.analysts() if token.split("_")[1] == a.id)
        ledger = AuditedLedger(svc.state.ledger(analyst.id, "visits"), svc.state, "req_1")

        def run(work: Any, seconds: Any, cut: Any, lanes: Any, cut_at: int | None = cut_at) -> Any:
            made = []

            def counted(self: timing.GuardedLedger, guarantee: Any, label: str) -> Any:
                if len(made) == cut_at:
                    cut(1.0)  # the deadline passes now: spends what is left, raises DeadlinePassed
                made.append(label)
                return spend(self, guarantee, label)

            monkeypatch.setattr(timing.GuardedLedger, "spend", counted)
            try:
                return work()
            finally:
                monkeypatch.setattr(timing.GuardedLedger, "spend", spend)

        monkeypatch.setattr(timing, "run_with_deadline", run)
        try:
            svc.release(config.datasets["visits"], {"sql": LEARNT}, ledger)
        except timing.DeadlinePassed:
            assert cut_at is not None
        budget = ledger.ledger.spent()
        spent.append((round(budget.epsilon, 12), budget.delta, len(ledger.ledger.history())))
    assert spent[0] == spent[1] == spent[2], spent


@pytest.fixture
def service(tmp_path: Path) -> Service:
    config = load_config(write_service(tmp_path))
    config = replace(config, timing=timing.TimingConfig(runs=1, margin=5.0))  # no cut-off when loaded
    return Service(config, State(config))


def test_a_release_cut_off_spends_its_plan_and_says_so_whatever_the_data(
        service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing.Releases, "deadline", lambda *args: 0.001)
    state = service.state
    analyst = state.add_analyst("ann").split("_")[1]
    ledger = AuditedLedger(state.ledger(analyst, "visits"), state, "req_1")
    spec = {"epsilon": 0.5, "aggregates": {"n": {"kind": "count"}}}
    with pytest.raises(timing.DeadlinePassed) as caught:
        service.release(service.config.datasets["visits"], {"dataset": "visits", "spec": spec}, ledger)
    assert "passed its deadline" in caught.value.public_message
    assert ledger.ledger.spent().epsilon == pytest.approx(0.5)
    assert len(ledger.ledger.history()) == 1


def test_an_exhausted_holdout_answers_without_reading_a_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config(write_service(tmp_path))
    state = State(config)
    state.save_holdout_state("model", config.holdouts["model"].budget, False)
    holdout = Service(config, state).holdouts["model"]
    analyst = state.add_analyst("ann").split("_")[1]

    def read(*args: Any) -> Any:
        raise AssertionError("the exhausted holdout read its rows")

    monkeypatch.setattr(service_module, "table_means", read)
    answers = holdout.query(["spend > 5", "spend > 6"], analyst)
    assert [(a.value, a.source) for a in answers] == [(None, "exhausted")] * 2


def test_deadlines_follow_the_cost_bound(service: Service) -> None:
    ds = service.config.datasets["visits"]
    cheap, _, options = service.query(ds, {"epsilon": 1.0, "aggregates": {"n": {"kind": "count"}}})
    costly, _, _ = service.query(ds, {"epsilon": 1.0, "aggregates": {"n": {"kind": "count"}}, "where": [
        "length(replace(replace(replace(replace(shop, 'a', 'aa'), 'a', 'aa'), 'a', 'aa'), 'a', 'aa')) > 0"]})
    cfg = timing.TimingConfig(runs=1, least=0.0)
    # 10 ms per unit of cost (its worst case: no margin on it), every release shape 10 ms.
    deadlines = timing.Releases(service.deadlines["visits"].synthetic, timing.Expected(0.01, 0.01), cfg)

    def run(q: Any) -> None:
        time.sleep(0.01)

    cost = timing.query_cost(costly.table.filters)
    assert cost > 50
    for mode in ("alone", "busy"):
        gap = getattr(deadlines.deadline(costly, options, run, "spec"), mode) - \
            getattr(deadlines.deadline(cheap, options, run, "spec"), mode)
        assert gap == pytest.approx(0.01 * cost, abs=0.05)


def config_doc(root: Path, timing_doc: Any = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"state": "s", "datasets": {"d": {
        "source": str(write_service(root).parent / "people.csv"), "privacy_unit": False,
        "columns": {"spend": {"bounds": [0, 10]}}, "budget": {"epsilon": 1.0}}}}
    return doc if timing_doc is None else {**doc, "timing": timing_doc}


@pytest.mark.parametrize(("timing_doc", "named"), [
    ({"margin": 0.5}, "timing.margin"), ({"least": -1}, "timing.least"), ({"pad": "yes"}, "timing.pad"),
    ({"runs": 0}, "timing.runs"), ({"lanes": 0}, "timing.lanes"), ({"lanes": 1.5}, "timing.lanes"),
    ({"slack": -1}, "timing.slack"), ({"spare": 1}, "unknown key"),
    ([1], "timing must be a table")])
def test_bad_timing_settings_are_refused_by_name(tmp_path: Path, timing_doc: Any, named: str) -> None:
    with pytest.raises(InvalidParameter, match=named):
        parse_config(config_doc(tmp_path, timing_doc), tmp_path)


def test_answers_are_padded_unless_the_configuration_says_otherwise(tmp_path: Path) -> None:
    assert parse_config(config_doc(tmp_path), tmp_path).timing == timing.TimingConfig(pad=True)
    assert not parse_config(config_doc(tmp_path, {"pad": False}), tmp_path).timing.pad


def test_a_release_that_fails_on_the_synthetic_rows_still_gets_a_deadline(service: Service) -> None:
    ds = service.config.datasets["visits"]
    query, _, options = service.query(ds, {"epsilon": 1.0, "aggregates": {"n": {"kind": "count"}}})

    def fails(q: Any) -> Any:
        time.sleep(0.01)
        raise ValueError("made-up rows")

    expected = service.deadlines["visits"].deadline(query, options, fails, "spec")
    assert min(expected.alone, expected.busy) >= 0.01


def test_every_deadline_has_the_slack_for_scheduling_delays(service: Service) -> None:
    ds = service.config.datasets["visits"]
    query, _, options = service.query(ds, {"epsilon": 1.0, "aggregates": {"n": {"kind": "count"}}})
    cfg = timing.TimingConfig(runs=1, least=0.0, slack=0.3, slack_alone=0.2)
    deadlines = timing.Releases(service.deadlines["visits"].synthetic, timing.Expected(0.0, 0.0), cfg)
    expected = deadlines.deadline(query, options, lambda q: time.sleep(0.01), "spec")
    lanes = timing.Lanes(2, cfg)
    # The slack is added once (a second would put it past 0.4 or 0.6 s); the 0.25 s allow a
    # loaded machine. A request alone gets `slack_alone`, one beside another lane's `slack`.
    for slack in (0.2, 0.3):
        _, seconds = lanes.admit(expected)
        assert cfg.margin * 0.01 + slack <= seconds < cfg.margin * 0.01 + slack + 0.25


def test_a_shape_is_timed_with_bare_columns_and_no_filter_whatever_asked_first(service: Service) -> None:
    """The typical time of a shape does not depend on which request asked for it first: it is
    timed with every expression the bare column and every row passing, all lanes busy."""
    ds = service.config.datasets["visits"]
    seen: list[Any] = []
    running = threading.Semaphore(0)

    def run(q: Any) -> None:
        seen.append(q)
        running.release()

    deadlines = timing.Releases(service.deadlines["visits"].synthetic, timing.Expected(0.0, 0.0),
                                timing.TimingConfig(runs=2, lanes=3), service.deadlines["visits"].bare)
    query, _, options = service.query(ds, {"epsilon": 1.0, "where": ["shop = 'a'"], "aggregates": {
        "s": {"kind": "sum", "column": "length(replace(shop, 'a', 'aa'))", "bounds": [0, 4]}}})
    deadlines.deadline(query, options, run, "spec")
    assert len(seen) == 1 + 2 * (3 + 1)  # a warm-up, then 2 rounds of 3 lanes and 2 runs alone
    assert {q.table.filters for q in seen} == {()}
    assert {e.text for q in seen for e in q.expressions.values()} == {'"spend"'}
    assert len({id(q.table.engine) for q in seen}) == len(seen)  # a cursor each: runs at once


def test_lanes_reserve_from_deadlines_never_from_when_work_ended() -> None:
    """On one lane, the second request's answer comes at the end of both reservations, however
    soon the first one's work ended; on two lanes, both run at once."""
    for count, expected in ((1, 0.5), (2, 0.3)):
        lanes = timing.Lanes(count)
        start = time.monotonic()
        first = threading.Thread(target=timing.run_with_deadline,
                                 args=(lambda: None, 0.2, lambda _: None, lanes))
        first.start()
        time.sleep(0.02)  # admitted second
        timing.run_with_deadline(lambda: None, 0.3, lambda _: None, lanes)
        first.join()
        took = time.monotonic() - start
        assert expected <= took < expected + 0.1, (count, took)


def test_a_new_shape_asked_for_at_once_is_measured_once(service: Service) -> None:
    """Requests of a new shape arriving together wait for one measurement (several at once
    would slow each other and inflate the shape's typical time)."""
    ds = service.config.datasets["visits"]
    query, _, options = service.query(ds, {"epsilon": 1.0, "aggregates": {"n": {"kind": "count"}}})
    calls: list[int] = []
    cfg = timing.TimingConfig(runs=1, lanes=1)
    deadlines = timing.Releases(service.deadlines["visits"].synthetic, timing.Expected(0.0, 0.0), cfg)

    def run(q: Any) -> None:
        calls.append(1)
        time.sleep(0.05)

    threads = [threading.Thread(target=deadlines.deadline, args=(query, options, run, "spec"))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 2  # a warm-up and one timed run


def test_the_analyst_gets_the_plan_s_warnings_whatever_other_requests_catch_meanwhile(
        service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    """Releases run at once in lanes, and Python's warning capture is the process's: another
    request that starts catching warnings while this one runs takes this one's. The analyst's
    warnings are its plan's (public), not what this request's capture happened to record."""
    timed = Service.timed

    def beside_another(self: Service, *args: Any) -> Any:
        with warnings.catch_warnings(record=True):  # another request, entered later
            warnings.simplefilter("always")
            return timed(self, *args)

    monkeypatch.setattr(Service, "timed", beside_another)
    state = service.state
    analyst = state.add_analyst("ann").split("_")[1]
    ledger = AuditedLedger(state.ledger(analyst, "visits"), state, "req_1")
    spec = {"epsilon": 1e-5, "delta": 1e-9, "group_by": ["shop"], "aggregates": {"n": {"kind": "count"}}}
    doc, _ = service.release(service.config.datasets["visits"], {"dataset": "visits", "spec": spec}, ledger)
    assert any("almost certainly no group will be released" in w for w in doc["warnings"])


def test_a_window_for_every_lane_starts_when_all_are_free_and_holds_them_all() -> None:
    lanes = timing.Lanes(2)
    now = time.monotonic()
    first, _ = lanes.admit(1.0)
    lanes.admit(0.5)
    window = lanes.reserve_all(0.3)
    assert first - now < 0.05 and window >= first + 1.0  # after the longer reservation ends
    assert lanes.admit(0.1)[0] >= window + 0.3 and lanes.admit(0.1)[0] >= window + 0.3


def test_refresh_follows_the_load_on_made_up_rows_and_no_request_runs_meanwhile(service: Service) -> None:
    ds = service.config.datasets["visits"]
    query, _, options = service.query(ds, {"epsilon": 1.0, "aggregates": {"n": {"kind": "count"}}})
    cfg = timing.TimingConfig(runs=1, least=0.0, slack=0.0, margin=1.0)
    lanes = timing.Lanes(cfg.lanes)
    deadlines = timing.Releases(lambda: query.table.engine, timing.Expected(0.0, 0.0), cfg, lanes=lanes)
    took = [0.05]

    def busy(run: Any) -> float:
        return deadlines.deadline(query, options, run, "spec").busy

    assert busy(lambda q: time.sleep(took[0])) < 0.09
    took[0] = 0.5  # the machine got slower: a round overruns its window (2 x 0.05 s), which counts whole
    started = time.monotonic()
    deadlines.refresh()
    assert 0.09 < busy(lambda q: None) < 0.15
    assert lanes.admit(0.01)[0] >= started + 0.1  # the lanes were the refresh's until its window ended
    time.sleep(0.5)  # the overrunning round ends
    deadlines.refresh()  # asked for since: timed again, 0.5 s in a 0.2 s window
    assert 0.19 < busy(lambda q: None) < 0.25
    time.sleep(0.5)
    took[0] = 0.001
    for _ in range(2):  # the largest of the last three timings: falls back slowly
        deadlines.refresh()
        assert 0.19 < busy(lambda q: None) < 0.25
    deadlines.refresh()
    took[0] = 1.0  # not asked for since the last refresh: not timed
    deadlines.refresh()
    assert busy(lambda q: None) < 0.05


def test_warnings_are_caught_per_request_not_from_other_threads(
        service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    """A warning another request raises meanwhile (a curator's exact count, say) never reaches
    this request's answer or its audit entry; its own do."""
    from bayesdp import tables
    from bayesdp.errors import CuratorWarning

    service.deadlines.clear()  # no deadline: the release answers as soon as it is done
    stop = threading.Event()

    def other_request() -> None:
        while not stop.is_set():
            warnings.warn("curator only: 17 rows of another request", CuratorWarning, stacklevel=1)
            time.sleep(0.005)

    preview, release = tables.Query.preview, tables.Query.release

    def slow(original: Any) -> Any:
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            warnings.warn("this request's own", UserWarning, stacklevel=1)
            time.sleep(0.2)
            return original(self, *args, **kwargs)
        return run

    monkeypatch.setattr(tables.Query, "preview", slow(preview))
    monkeypatch.setattr(tables.Query, "release", slow(release))
    ds = service.config.datasets["visits"]
    spec = {"epsilon": 1.0, "aggregates": {"n": {"kind": "count"}}}
    other = threading.Thread(target=other_request)
    other.start()
    try:
        shown = service.preview(ds, {"dataset": "visits", "spec": spec}, "ann")["warnings"]
        _, audit = service.release(ds, {"dataset": "visits", "spec": spec}, None)  # type: ignore[arg-type]
    finally:
        stop.set()
        other.join()
    assert "this request's own" in shown and not any("17 rows" in w for w in shown), shown
    assert "this request's own" in audit and "17 rows" not in audit, audit
