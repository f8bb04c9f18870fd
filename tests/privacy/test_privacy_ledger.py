"""Ledger: atomic spends, accounting, concurrent processes, SIGKILL, and files it must refuse."""

import contextlib
import dataclasses
import hashlib
import json
import multiprocessing
import os
import signal
import sqlite3
import threading
import time

import pytest

from bayesdp import errors
from bayesdp.errors import BudgetExceeded, InvalidParameter, LedgerError
from bayesdp.privacy import Dependence, Guarantee, Noise, compose, zcdp_epsilon
from bayesdp.privacy.ledger import Ledger


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Lap:
    noise = "laplace"

    def __init__(self, epsilon):
        self.scale, self.sensitivity = 1 / epsilon, 1.0
        noise = Noise(self.noise, scale=self.scale, sensitivity=self.sensitivity)
        self.guarantee = Guarantee(epsilon, noise=(noise,))


def test_basic_spend_history_and_remaining(tmp_path):
    led = Ledger(tmp_path / "l.db", budget=Guarantee(1.0, delta=1e-6, unit="user"))
    assert led.remaining() == Guarantee(1.0, delta=1e-6, unit="user")
    for i in range(9):
        led.spend(Guarantee(0.1, delta=1e-7, unit="user"), f"q{i}")
    assert led.remaining().epsilon == pytest.approx(0.1, abs=1e-12)
    rec = led.spend(Guarantee(0.1, delta=1e-7, unit="user"), "last")
    assert rec.label == "last" and abs(rec.time - time.time()) < 60
    with pytest.raises(BudgetExceeded, match=r"remaining: ε=0 per user"):
        led.spend(Guarantee(0.01, unit="user"), "one too many")
    hist = Ledger(tmp_path / "l.db").history()  # reopened from disk
    assert [h.label for h in hist] == [f"q{i}" for i in range(9)] + ["last"]
    assert hist[0].guarantee == Guarantee(0.1, delta=1e-7, unit="user")
    assert led.spent() == compose([h.guarantee for h in hist])


def test_refused_spend_records_nothing_and_names_what_remains(tmp_path):
    led = Ledger(tmp_path / "l.db", budget=Guarantee(1.0))
    led.spend(Guarantee(0.75), "a")
    with pytest.raises(BudgetExceeded, match=r"'b'.*remaining: ε=0.25 per row"):
        led.spend(Guarantee(0.5), "b")
    assert [h.label for h in led.history()] == ["a"]
    led.spend(Guarantee(0.25), "c")  # exactly the rest is allowed


def test_a_pure_epsilon_budget_says_it_refuses_a_spends_delta(tmp_path):
    led = Ledger(tmp_path / "l.db", budget=Guarantee(3.0))
    with pytest.raises(BudgetExceeded, match=r"remaining: ε=3 per row.*allows no δ, and the spend has δ > 0"):
        led.spend(Guarantee(0.5, delta=1e-12), "fit")
    with pytest.raises(BudgetExceeded) as refused:
        led.spend(Guarantee(4.0), "too much")
    assert "δ" not in str(refused.value).split("remaining")[1]


def test_zcdp_accounting_beats_basic(tmp_path):
    budget = Guarantee(4.0, delta=1e-5)
    z = Ledger(tmp_path / "z.db", budget=budget, accounting="zcdp")
    for i in range(50):  # basic: 5.0, over budget
        z.spend(Lap(0.1), f"z{i}")
    assert z.spent().rho == pytest.approx(50 * 0.1**2 / 2, rel=1e-12)
    assert z.spent().epsilon <= 4.0
    fresh = Ledger(tmp_path / "z0.db", budget=budget, accounting="zcdp").remaining().rho
    assert z.remaining().rho == pytest.approx(fresh - 0.25, rel=1e-9)
    assert zcdp_epsilon(fresh, 1e-5) == pytest.approx(4.0, rel=1e-9)
    with pytest.raises(BudgetExceeded):
        Ledger(tmp_path / "b.db", budget=budget).spend(Guarantee(5.0), "x")


def _legacy_pld(path, spends):
    """A ledger as earlier versions wrote it with accounting='pld', holding `spends` Lap(0.2)."""
    Ledger(path, budget=Guarantee(2.9, delta=1e-5)).close()
    noise = '[{"family": "laplace", "scale": 5.0, "sensitivity": 1.0}]'
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = 'pld' WHERE key = 'accounting'")
        conn.executemany(
            "INSERT INTO spends (label, time, epsilon, delta, rho, relation, unit, noise) "
            "VALUES (?, 0, 0.2, 0, NULL, 'add_remove', 'row', ?)", [(f"p{i}", noise) for i in range(spends)])
        conn.execute(f"PRAGMA user_version = {spends}")
    conn.close()


def test_a_pld_ledger_file_is_read_only_until_migrated_to_a_filter(tmp_path):
    # 15 x Lap(0.2) fit (2.9, 1e-5) under the natural PLD filter (2.81) but under no valid filter
    _legacy_pld(tmp_path / "p15.db", 15)
    old = Ledger(tmp_path / "p15.db")
    assert len(old.history()) == 15 and "not a valid filter" in old.history()[0].bound
    for read in (old.spent, old.remaining, lambda: old.spend(Lap(0.01), "more")):
        with pytest.raises(LedgerError, match=r"'pld'.*not a valid privacy filter.*migrate\('zcdp'\)"):
            read()
    with pytest.raises(LedgerError, match="bayesdp ledger migrate"):
        Ledger(tmp_path / "p15.db", accounting="zcdp")
    for accounting in ("basic", "zcdp", "advanced"):
        with pytest.raises(BudgetExceeded, match="already exceed its budget"):
            old.migrate(accounting)
    with pytest.raises(InvalidParameter, match="gdp filter"):
        old.migrate("gdp")
    assert Ledger(tmp_path / "p15.db").accounting == "pld"
    # 10 of them fit the basic filter (2.0 <= 2.9): migrated, the ledger spends again
    _legacy_pld(tmp_path / "p10.db", 10)
    Ledger(tmp_path / "p10.db").migrate("basic")
    led = Ledger(tmp_path / "p10.db", accounting="basic")
    assert led.spent().epsilon == pytest.approx(2.0) and "basic composition filter" in str(led.spent())
    led.spend(Lap(0.2), "after")
    with pytest.raises(LedgerError, match="only a ledger written with accounting 'pld'"):
        led.migrate("zcdp")


def test_zcdp_budget_in_rho(tmp_path):
    led = Ledger(tmp_path / "r.db", budget=Guarantee.zcdp(0.5), accounting="zcdp")
    led.spend(Guarantee.zcdp(0.3), "a")
    with pytest.raises(BudgetExceeded, match=r"ρ=0\.2"):
        led.spend(Guarantee.zcdp(0.25), "b")


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"budget": Guarantee(1), "accounting": "fancy"}, "accounting"),
        ({"budget": 1.0}, "budget"),
        ({"budget": Guarantee(1), "accounting": "pld"}, "accounting"),
        ({"budget": Guarantee(1), "accounting": "gdp"}, "budget"),
    ],
)
def test_bad_ledger_parameters(tmp_path, kwargs, name):
    with pytest.raises(InvalidParameter, match=name):
        Ledger(tmp_path / "x.db", **kwargs)
    assert not (tmp_path / "x.db").exists()


def test_bad_spends(tmp_path):
    led = Ledger(tmp_path / "l.db", budget=Guarantee(1))
    with pytest.raises(InvalidParameter, match="relation"):
        led.spend(Guarantee(0.1, relation="replace_one"), "a")
    with pytest.raises(InvalidParameter, match="unit"):
        led.spend(Guarantee(0.1, unit="user"), "a")
    with pytest.raises(InvalidParameter, match="label"):
        led.spend(Guarantee(0.1), " ")
    with pytest.raises(InvalidParameter, match="guarantee"):
        led.spend(0.1, "a")
    assert led.history() == []


def test_unwritable_place_is_a_ledger_error(tmp_path):
    with pytest.raises(LedgerError, match="cannot create"):
        Ledger(tmp_path / "no" / "such" / "dir.db", budget=Guarantee(1))
    with pytest.raises(LedgerError):
        Ledger(tmp_path, budget=Guarantee(1))  # a directory
    assert list(tmp_path.iterdir()) == []


def test_existing_ledger_keeps_its_budget(tmp_path):
    Ledger(tmp_path / "l.db", budget=Guarantee(1))
    with pytest.raises(LedgerError, match="refusing to change"):
        Ledger(tmp_path / "l.db", budget=Guarantee(2))
    with pytest.raises(LedgerError, match="refusing to switch"):
        Ledger(tmp_path / "l.db", accounting="zcdp")
    with pytest.raises(LedgerError, match="no ledger"):
        Ledger(tmp_path / "missing.db")


def _other_sqlite(path):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    conn.execute("INSERT INTO meta VALUES ('app', 'something else')")
    conn.commit()
    conn.close()


def _corrupt_ledger(path):
    led = Ledger(path, budget=Guarantee(100.0))
    for i in range(200):
        led.spend(Guarantee(0.1), f"spend number {i} " + "x" * 40)
    led.close()  # the last connection checkpoints every page into the file: none is left in the -wal
    data = bytearray(path.read_bytes())
    assert len(data) > 3 * 4096
    data[2 * 4096 : 2 * 4096 + 300] = b"\xff" * 300  # clobber a b-tree page header and cells
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "make",
    [
        lambda p: p.write_text("name,age\nada,36\n"),
        lambda p: p.write_bytes(os.urandom(8192)),
        lambda p: p.write_bytes(b""),
        _other_sqlite,
        _corrupt_ledger,
        lambda p: p.write_bytes(b"SQLite format 3\x00" + b"\x00" * 50),
    ],
    ids=["csv", "random", "empty", "other-sqlite", "corrupt-ledger", "truncated"],
)
def test_refuses_foreign_or_corrupt_files_without_touching_them(tmp_path, make):
    path = tmp_path / "budget.db"
    make(path)
    before = sha(path)
    with pytest.raises(LedgerError, match="ledger"):
        Ledger(path, budget=Guarantee(1.0))
    with pytest.raises(LedgerError):
        Ledger(path)
    assert sha(path) == before


def _spend_until_refused(path, tag, conn):
    """Child process: ask for 10 spends of 0.1 and report how many were granted."""
    led = Ledger(path, budget=Guarantee(2.5))
    ok = 0
    for i in range(10):
        try:
            led.spend(Guarantee(0.1), f"{tag}-{i}")
            ok += 1
        except BudgetExceeded:
            pass
    conn.send(ok)


def test_concurrent_processes_never_exceed_the_budget(tmp_path):
    ctx = multiprocessing.get_context("fork")  # children start at once, without re-importing
    path = tmp_path / "shared.db"  # created by whichever process gets there first
    pipes = [ctx.Pipe() for _ in range(6)]
    procs = [
        ctx.Process(target=_spend_until_refused, args=(path, f"w{k}", child))
        for k, (_, child) in enumerate(pipes)
    ]
    for p in procs:
        p.start()
    granted = sum(parent.recv() for parent, _ in pipes)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    led = Ledger(path)
    assert granted == len(led.history()) == 25  # 25 × 0.1 = 2.5 exactly, 60 asked for
    assert led.spent().epsilon <= 2.5
    assert len({h.label for h in led.history()}) == 25


def test_threads_share_one_ledger(tmp_path):
    led = Ledger(tmp_path / "threads.db", budget=Guarantee(2.0))
    granted = []

    def ask(k):
        for i in range(6):
            with contextlib.suppress(BudgetExceeded):
                granted.append(led.spend(Guarantee(0.125), f"t{k}-{i}"))

    threads = [threading.Thread(target=ask, args=(k,)) for k in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(granted) == len(led.history()) == 16  # 16 × 0.125 = 2, of 30 asked for


def _spend_forever(path, tag, fd):
    """Child process: spend, then 'release' (write the label) only after the spend returned."""
    led = Ledger(path, budget=Guarantee(1e6))
    i = 0
    while True:
        led.spend(Guarantee(1e-3), f"{tag}-{i}")
        os.write(fd, f"{tag}-{i}\n".encode())
        i += 1


@pytest.mark.parametrize("delay", [0.0, 0.013, 0.029])
def test_sigkill_leaves_no_half_spend_and_no_unrecorded_release(tmp_path, delay):
    ctx = multiprocessing.get_context("fork")
    path = tmp_path / "killed.db"
    out = tmp_path / "released.txt"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    for rnd in range(3):
        proc = ctx.Process(target=_spend_forever, args=(path, f"r{rnd}", fd))
        proc.start()
        deadline = time.monotonic() + 60
        while out.read_text().count(f"r{rnd}-") < 5 and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(delay)  # then kill it at an arbitrary instant
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        released = [x for x in out.read_text().split("\n") if x]
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        history = Ledger(path).history()
        recorded = [h.label for h in history]
        assert set(released) <= set(recorded)  # every release has its record
        assert len(recorded) - len(released) <= rnd + 1  # at most one unreleased spend per kill
        assert len(set(recorded)) == len(recorded) >= 5 * (rnd + 1)
        assert all(h.guarantee == Guarantee(1e-3) for h in history)
        assert Ledger(path).spent() == compose(h.guarantee for h in history)  # running sums too
    os.close(fd)


def _unprivileged(fn, *args):
    """Run fn(*args) in a forked child without root's privileges and return what it returns or
    raises. Root ignores permission bits (a chmod'ed file stays writable for it), so as root
    the child drops to the user nobody; as any other user it runs as that user."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()

    def run():
        try:
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            child.send(("ok", fn(*args)))
        except Exception as exc:  # reported to the parent as data
            child.send((type(exc).__name__, str(exc)))

    proc = ctx.Process(target=run)
    proc.start()
    result = parent.recv()
    proc.join(60)
    return result


def _open_and_spend(path):
    led = Ledger(path)
    seen = len(led.history())
    led.spend(Guarantee(0.1), "after")
    return seen


@pytest.fixture
def shared_dir():
    """A directory another user can enter (pytest's tmp_path is private to its owner)."""
    import shutil
    import tempfile

    d = tempfile.mkdtemp()
    os.chmod(d, 0o755)
    yield d
    os.chmod(d, 0o755)
    shutil.rmtree(d)


def test_a_read_only_file_is_a_ledger_error_saying_so(shared_dir):
    path = os.path.join(shared_dir, "ro.db")
    with Ledger(path, budget=Guarantee(1.0)) as led:
        led.spend(Guarantee(0.1), "before")
    os.chmod(shared_dir, 0o777)
    os.chmod(path, 0o444)
    kind, message = _unprivileged(_open_and_spend, path)
    assert kind == "LedgerError" and "the file is read-only" in message, message
    assert "corrupt" not in message
    os.chmod(path, 0o644)
    assert [h.label for h in Ledger(path).history()] == ["before"]


def test_a_read_only_directory_is_a_ledger_error_saying_so(shared_dir):
    path = os.path.join(shared_dir, "rodir.db")
    with Ledger(path, budget=Guarantee(1.0)) as led:
        led.spend(Guarantee(0.1), "before")
    os.chmod(path, 0o666)  # the file is writable: only the directory is not
    kind, message = _unprivileged(_open_and_spend, path)
    assert kind == "LedgerError" and f"its directory {shared_dir} is not writable" in message, message
    assert "corrupt" not in message


def test_a_copy_without_its_wal_is_refused_as_stale(tmp_path):
    """The failure the high-water mark exists for: 50 spends live in the -wal (no checkpoint
    yet, as after a crash); the main file copied alone holds none of them."""
    import shutil

    path = tmp_path / "live.db"
    led = Ledger(path, budget=Guarantee(10.0))
    for i in range(50):
        led.spend(Guarantee(0.1), f"s{i}")
    shutil.copy(path, tmp_path / "copy.db")
    with pytest.raises(LedgerError, match=r"behind its own history.*50 spend\(s\) are missing"):
        Ledger(tmp_path / "copy.db")
    assert len(Ledger(path).history()) == 50  # the original, with its -wal, is sound
    led.close()


def test_a_copy_after_a_clean_close_opens(tmp_path):
    import shutil

    path = tmp_path / "closed.db"
    with Ledger(path, budget=Guarantee(10.0)) as led:
        for i in range(5):
            led.spend(Guarantee(0.1), f"s{i}")
    shutil.copy(path, tmp_path / "copy.db")  # closing checkpointed the -wal into the file
    assert len(Ledger(tmp_path / "copy.db").history()) == 5


def test_backup_copies_the_wal_too_and_never_overwrites(tmp_path):
    path = tmp_path / "live.db"
    led = Ledger(path, budget=Guarantee(10.0), accounting="basic")
    for i in range(20):
        led.spend(Guarantee(0.1), f"s{i}")
    copy = led.backup(tmp_path / "backup.db")
    with Ledger(copy) as restored:
        assert [h.label for h in restored.history()] == [h.label for h in led.history()]
        assert restored.remaining() == led.remaining()
        restored.spend(Guarantee(0.1), "on the copy")  # a backup is a working ledger
    before = sha(copy)
    with pytest.raises(LedgerError, match="already exists"):
        led.backup(copy)
    assert sha(copy) == before
    led.close()


def test_a_composite_spend_keeps_all_its_noises(tmp_path):
    """One spend of two noises (three Laplace draws and a Gaussian) counts as all of them."""
    lap = Noise("laplace", scale=5.0, sensitivity=1.0, repetitions=3)
    gauss = Noise("gaussian", scale=4.0, sensitivity=1.0)
    both = Guarantee(0.6 + 1.5, delta=1e-6, noise=(lap, gauss))
    z = Ledger(tmp_path / "z.db", budget=Guarantee(4.0, delta=1e-5), accounting="zcdp")
    z.spend(both, "composite")
    rho = 3 * 0.2**2 / 2 + 1 / (2 * 16)
    assert Ledger(tmp_path / "z.db").remaining().rho == pytest.approx(z.remaining().rho, rel=1e-15)
    assert z.spent().rho == pytest.approx(rho, rel=1e-12)
    assert Ledger(tmp_path / "z.db").history()[0].guarantee.noise == (lap, gauss)


def test_spends_recorded_before_noise_had_a_family_still_count_their_noise(tmp_path):
    """Rows written when a spend stored one noise as {"kind": ...} read back as that noise."""
    path = tmp_path / "old.db"
    Ledger(path, budget=Guarantee(2.9, delta=1e-5), accounting="zcdp").close()
    old = ('{"kind": "laplace", "scale": 5.0, "sensitivity": 1.0, "grid": null, "epsilon": 0.0, '
           '"categories": 0}')
    with sqlite3.connect(path) as conn:
        conn.executemany(
            "INSERT INTO spends (label, time, epsilon, delta, rho, relation, unit, noise) "
            "VALUES (?, 0, 0.2, 0, NULL, 'add_remove', 'row', ?)", [(f"p{i}", old) for i in range(15)])
        conn.execute("PRAGMA user_version = 15")
    led = Ledger(path)
    assert led.history()[0].guarantee.noise == (Noise("laplace", scale=5.0, sensitivity=1.0),)
    assert led.spent().rho == pytest.approx(15 * 0.2**2 / 2)


def test_a_ledger_keeps_one_dependence_assumption(tmp_path):
    chain = Dependence("bdp", model="a 2-state Markov chain", fingerprint="c0ffee", length=50,
                       explanation="words")
    spend = Guarantee(0.3, relation="replace_one", dependence=chain)
    budget = Guarantee(1.0, relation="replace_one", dependence=chain)
    led = Ledger(tmp_path / "c.db", budget=budget)
    led.spend(spend, "holdout")
    reopened = Ledger(tmp_path / "c.db")
    assert reopened.budget == budget and reopened.history()[0].guarantee == spend
    assert reopened.remaining() == Guarantee(0.7, relation="replace_one", dependence=chain)
    with pytest.raises(InvalidParameter, match=r"dependence=None \(independent records\)"):
        led.spend(Guarantee(0.1, relation="replace_one"), "independent")
    with pytest.raises(InvalidParameter, match="dependence=Bayesian DP"):
        Ledger(tmp_path / "i.db", budget=Guarantee(1.0, relation="replace_one")).spend(spend, "x")
    with pytest.raises(InvalidParameter, match="accounting"):
        Ledger(tmp_path / "p.db", budget=budget, accounting="zcdp")
    assert len(reopened.history()) == 1


def test_a_full_disk_is_said_so_and_records_nothing(tmp_path):
    """SQLite rolls back by itself when the disk is full; its error is not hidden behind the
    failed second ROLLBACK ("cannot rollback - no transaction is active"). The file is capped
    at its size with max_page_count, which fails as a full disk does (SQLITE_FULL)."""
    ledger = Ledger(tmp_path / "l.db", budget=Guarantee(100.0))
    ledger.spend(Guarantee(0.1), "first")
    with ledger._connect() as conn:
        conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
    with pytest.raises(LedgerError, match="the disk is full; nothing was spent") as info:
        for i in range(1000):
            ledger.spend(Guarantee(0.01), "x" * 2000 + str(i))
    assert isinstance(info.value, errors.DiskFull)
    spent = len(ledger.history())
    ledger.close()
    assert len(Ledger(tmp_path / "l.db").history()) == spent


GAUSS = Guarantee(1e-3, delta=1e-10, noise=(Noise("gaussian", scale=1e4, sensitivity=1.0),))


def _recorded_without_running_sums(path, n):
    """`n` spends of GAUSS written as rows only, as a bayesdp that kept no running sums did."""
    noise = json.dumps([dataclasses.asdict(x) for x in GAUSS.noise])
    with sqlite3.connect(path) as conn:
        conn.executemany(
            "INSERT INTO spends (label, time, epsilon, delta, rho, relation, unit, noise)"
            " VALUES (?, ?, ?, ?, NULL, 'add_remove', 'row', ?)",
            [(f"old {i}", 0.0, GAUSS.epsilon, GAUSS.delta, noise) for i in range(n)],
        )
    conn.close()


def _sqlite_steps(led, guarantee):
    """SQLite virtual-machine steps (in tens) that `led.spend(guarantee)` takes: rows read and
    written, whatever the machine's load."""
    steps = [0]

    def tick():
        steps[0] += 1
        return 0

    with led._connect() as conn:
        conn.set_progress_handler(tick, 10)
    try:
        led.spend(guarantee, "counted")
    finally:
        with led._connect() as conn:
            conn.set_progress_handler(None, 10)
    return steps[0]


@pytest.mark.parametrize("accounting", ["basic", "zcdp", "gdp", "advanced"])
def test_a_spend_reads_as_much_after_2000_spends_as_after_10(tmp_path, accounting):
    """A spend reads the filter's running sums, not the history: the work SQLite does for it
    after 2,000 spends is within a b-tree level of the work after 10 (it grew 130-fold when each
    spend read every row). Spends recorded by a bayesdp without running sums, before or after
    them, are added in, and the sums decide exactly as math.fsum over the whole history."""
    steps = {}
    for n in (10, 2000):
        led = Ledger(tmp_path / f"{n}.db", budget=Guarantee(100.0, delta=1e-3), accounting=accounting)
        _recorded_without_running_sums(led.path, n)
        led.spend(GAUSS, "first")  # adds the rows recorded without sums in, once
        steps[n] = _sqlite_steps(led, GAUSS)
        _recorded_without_running_sums(led.path, 3)  # an older bayesdp spends after the sums
        history = [h.guarantee for h in led.history()]
        assert len(history) == n + 5
        assert led.spent() == led.filter.total(history)
        assert led.remaining() == led.filter.remaining(history)
        led.close()
    assert steps[2000] <= 1.5 * steps[10], steps
