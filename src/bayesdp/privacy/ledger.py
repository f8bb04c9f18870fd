"""A persistent privacy budget: every spend recorded in SQLite (WAL), atomically, before release.

`spend()` runs in one `BEGIN IMMEDIATE` transaction: it reads what was spent, checks the
budget and inserts the new spend, so concurrent processes serialise and a process killed at
any instant leaves either the whole spend or none of it. A caller releases a result only
after `spend()` returns, so no release exists without its record.

A ledger is its file *and* its `-wal` file: in WAL mode a committed spend lives in the -wal
until a checkpoint copies it into the main file, so a copy of the main file alone (taken while
a process runs, or after one crashed) can lack recent spends and would show budget that was
already spent. `Ledger.backup()` (`bayesdp ledger backup`) copies both consistently through
SQLite's online backup API.

The high-water mark detects such a stale copy. Each spend stores its id (ids only grow) in the
SQLite header's user_version inside its transaction, and, once committed, writes the same
number straight into the main file's header (bytes 60-63), outside the WAL. So the main file's
header always names the newest committed spend, while its pages hold only the checkpointed
ones: opened without its -wal, a file whose header is ahead of its last spend id is behind
its own history, and opening it raises LedgerError instead of restoring spent budget. A
checkpoint copies the header page with the same number, so the original file (with its -wal)
never trips the check. Limits: a crash between a commit and the header write leaves that one
spend undetected in a main-file-only copy; a slow writer can lower the mark a concurrent one
raised (the mark only ever errs low, so it never rejects a sound file).

The budget is a privacy filter (`bayesdp.privacy.filters`): it holds although each spend is
chosen after seeing the answers to the earlier ones. A filter reads only a few running sums of
what the spends charge; the ledger keeps them in its meta table (key "totals", with the id of the
last spend they cover), updated in each spend's transaction, so a spend reads O(1) rows whatever
the history. The sums are exact fractions, rounded once when read, so they decide exactly as
math.fsum over the whole history would. Spends recorded after the stored sums (by a bayesdp that
kept none) are added in on the next read, so files need no migration either way.

Files written with the former "pld" accounting (not a valid filter under such choices) open
read-only until `migrate()` moves them to a filter that admits every spend they hold.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import KW_ONLY, asdict, dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

from bayesdp.errors import BudgetExceeded, DiskFull, InvalidParameter, LedgerError, invalid
from bayesdp.privacy.dependence import Dependence
from bayesdp.privacy.filters import ACCOUNTINGS, FILTERS, PLD_REFUSED, Filter, Sums, filter_for
from bayesdp.privacy.guarantee import Guarantee, check_compatible
from bayesdp.privacy.noise import Noise

Accounting = Literal["basic", "zcdp", "gdp", "advanced"]
LEGACY = "pld"  # written by earlier versions; read-only until migrated (see the module)
APP = "bayesdp-ledger"
FORMAT = "1"
SQLITE_MAGIC = b"SQLite format 3\x00"
BUSY_TIMEOUT_S = 60.0
USER_VERSION_OFFSET = 60  # SQLite file header: the 4-byte big-endian user_version
TOTALS = "totals"  # the meta key of the filter's running sums (see the module)
# One descriptor per ledger file for the header writes, kept open for the process's life:
# closing any descriptor of a file drops every POSIX lock the process holds on it, SQLite's too.
_HEADER_FDS: dict[tuple[int, int], int] = {}

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE spends (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    label TEXT NOT NULL,
    time REAL NOT NULL,
    epsilon REAL NOT NULL,
    delta REAL NOT NULL,
    rho REAL,
    relation TEXT NOT NULL,
    unit TEXT NOT NULL,
    noise TEXT
);
"""


@dataclass(frozen=True)
class Spend:
    """One recorded spend: its label, its time (Unix seconds, UTC), its guarantee and the filter
    that admitted it into its ledger's budget."""

    label: str
    _: KW_ONLY
    time: float
    guarantee: Guarantee
    bound: str = ""


@dataclass(frozen=True)
class Totals:
    """A filter's running sums through spend `through` (0: no spend), each exact: every charge
    is a float, so a Fraction holds their sum without rounding."""

    accounting: str
    through: int
    sums: tuple[Fraction, ...]

    @classmethod
    def empty(cls, rule: Filter) -> Totals:
        return cls(rule.name, 0, (Fraction(0),) * rule.width)

    @classmethod
    def load(cls, text: str) -> Totals | None:
        """The stored sums, or None when they are unreadable (then the history is summed again)."""
        try:
            d = json.loads(text)
            return cls(str(d["accounting"]), int(d["through"]), tuple(map(Fraction, d["sums"])))
        except (ValueError, TypeError, KeyError, ZeroDivisionError):
            return None

    def dump(self) -> str:
        return json.dumps({"accounting": self.accounting, "through": self.through,
                           "sums": [str(x) for x in self.sums]})

    def plus(self, charge: Sums, through: int) -> Totals:
        return Totals(self.accounting, through,
                      tuple(a + Fraction(c) for a, c in zip(self.sums, charge, strict=True)))

    def rounded(self) -> Sums:
        """Each sum rounded once to the nearest float: what math.fsum of the charges gives."""
        return tuple(float(x) for x in self.sums)  # int / int: correctly rounded


@dataclass(frozen=True)
class Proposal:
    """What a ledger's filter would make of spends proposed now: whether it admits them (and
    why not), the share of the budget used before them and the share they would add, in the
    filter's own sums (`Filter.used_of`). Public: it reads their parameters and the sums only."""

    admitted: bool
    used: float
    uses: float
    refused: str | None = None

    @classmethod
    def of(cls, rule: Filter, spends: Sequence[Guarantee], kept: Totals | None = None) -> Proposal:
        """`spends` after the sums `kept` (none: a budget nothing was spent from), decided as
        `Ledger.spend` decides each of them, on the exact sums."""
        kept = kept or Totals.empty(rule)
        after, refused = kept, None
        for g in spends:
            try:
                check_compatible(g, rule.budget, "this ledger's budget is a guarantee")
                rule.check(g)
            except InvalidParameter as exc:
                refused = refused or str(exc)
                continue
            after = after.plus(rule.charge(g), after.through)
        used = rule.used_of(kept.rounded())
        if refused is None and not rule.fits(after.rounded()):
            refused = f"it {exceeds(rule, kept, spends)}"
        return cls(refused is None, used, rule.used_of(after.rounded()) - used, refused)


def exceeds(rule: Filter, kept: Totals, spends: Sequence[Guarantee]) -> str:
    """Why `spends` after the sums `kept` do not fit: the budget and what remains."""
    # a pure-ε budget refuses any δ however small: say so, or the message reads as an ε shortfall
    pure = any(g.delta > 0 for g in spends) and rule.budget.delta == 0
    why = "; this budget allows no δ, and the spend has δ > 0" if pure else ""
    return (f"would exceed the budget {rule.budget} ({rule.name} accounting); "
            f"remaining: {rule.remaining_of(kept.rounded())}{why}")


class Ledger:
    """A privacy budget kept in an SQLite file at `path`, shared safely by many processes.

    A new file is created with `budget` (a Guarantee) and `accounting`, the privacy filter that
    keeps the budget under adaptive choices (`bayesdp.privacy.filters`): "basic" (ε and δ
    add), "zcdp" (ρ adds, against the budget's ρ or its (ε, δ) by the tight conversion), "gdp"
    (μ² adds; continuous Gaussian noise only) or "advanced" (Σε² under an advanced-composition
    bound; pays off for many small spends). "pld" is refused: it is not a valid filter. An
    existing file keeps its own budget and accounting; passing different ones is an error. A
    file that is not a bayesdp ledger, or is corrupt, raises LedgerError and is never written to.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        budget: Guarantee | None = None,
        accounting: Accounting | str | None = None,
    ) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._lock = threading.RLock()
        self._rule: Filter | None = None
        if accounting == LEGACY:
            raise InvalidParameter(PLD_REFUSED)
        if accounting is not None and accounting not in ACCOUNTINGS:
            raise invalid("accounting", accounting, f"one of {ACCOUNTINGS}")
        if budget is not None and not isinstance(budget, Guarantee):
            raise invalid("budget", budget, "a Guarantee")
        if not self.path.exists():
            if budget is None:
                raise LedgerError(f"no ledger at {self.path}; give a budget to create one")
            _check_budget(budget, accounting or "basic")
            try:
                self._create(budget, accounting or "basic")
            except (OSError, sqlite3.Error) as exc:
                raise LedgerError(f"cannot create a ledger at {self.path}: {exc}") from None
        try:
            self.budget, self.accounting = self._open()
            if budget is not None and budget != self.budget:
                raise LedgerError(
                    f"{self.path} has budget {self.budget}; refusing to change it to {budget}"
                )
            if accounting is not None and self.accounting == LEGACY:
                raise self._legacy()
            if accounting is not None and accounting != self.accounting:
                raise LedgerError(
                    f"{self.path} uses {self.accounting} accounting; "
                    f"refusing to switch to {accounting}"
                )
        except BaseException:
            self.close()
            raise

    # -- creation and validation ---------------------------------------------------------

    def _create(self, budget: Guarantee, accounting: str) -> None:
        """Build the file aside and link it into place, so that nothing is ever overwritten."""
        tmp = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex}.tmp")
        try:
            conn = sqlite3.connect(tmp, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(_SCHEMA)
                meta = {
                    "app": APP,
                    "format": FORMAT,
                    "budget": json.dumps(_guarantee_json(budget)),
                    "accounting": accounting,
                    "created": repr(time.time()),
                }
                conn.executemany("INSERT INTO meta VALUES (?, ?)", sorted(meta.items()))
            finally:
                conn.close()
            # If another process created it first, keep theirs: _open() validates it.
            with suppress(FileExistsError):
                os.link(tmp, self.path)
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{tmp}{suffix}").unlink(missing_ok=True)

    def _open(self) -> tuple[Guarantee, str]:
        """Validate the file without writing to it; return its budget and accounting."""
        try:
            with open(self.path, "rb") as f:
                head = f.read(len(SQLITE_MAGIC))
        except OSError as exc:
            raise LedgerError(f"cannot read ledger {self.path}: {exc}") from None
        if head != SQLITE_MAGIC:
            raise LedgerError(
                f"{self.path} is not a bayesdp ledger (not an SQLite database); left untouched"
            )
        try:
            with self._connect() as conn:
                meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
                if meta.get("app") != APP:
                    raise LedgerError(f"{self.path} is not a bayesdp ledger; left untouched")
                if meta.get("format") != FORMAT:
                    raise LedgerError(
                        f"{self.path} has ledger format {meta.get('format')!r}; "
                        f"this bayesdp reads format {FORMAT}"
                    )
                check = conn.execute("PRAGMA quick_check").fetchone()[0]
                if check != "ok":
                    raise LedgerError(f"ledger {self.path} is corrupt ({check}); left untouched")
                self._check_high_water(conn)
                budget = _guarantee_from(json.loads(meta["budget"]))
                accounting = meta["accounting"]
        except (KeyError, ValueError, TypeError) as exc:
            raise LedgerError(f"ledger {self.path} has a damaged header ({exc})") from None
        if accounting not in (*ACCOUNTINGS, LEGACY):
            raise LedgerError(f"ledger {self.path} names an unknown accounting {accounting!r}")
        return budget, accounting

    @property
    def filter(self) -> Filter:
        """The privacy filter that keeps this ledger's budget (LedgerError for a legacy file)."""
        if self.accounting == LEGACY:
            raise self._legacy()
        if self._rule is None or self._rule.name != self.accounting:
            self._rule = filter_for(self.accounting, self.budget)  # built once: it may solve for ρ, μ
        return self._rule

    def _legacy(self) -> LedgerError:
        return LedgerError(
            f"ledger {self.path} was written with accounting 'pld', which is not a valid privacy "
            "filter when spends are chosen after seeing earlier answers; its history can be read "
            "but nothing more can be spent from it. Move it to a filter that admits every spend "
            "it holds with Ledger(path).migrate('zcdp') (or 'gdp', 'advanced', 'basic'), or "
            "`bayesdp ledger migrate PATH --accounting zcdp`"
        )

    def _check_high_water(self, conn: sqlite3.Connection) -> None:
        mark = int(conn.execute("PRAGMA user_version").fetchone()[0])
        last = int(conn.execute("SELECT coalesce(max(id), 0) FROM spends").fetchone()[0])
        if mark > last:
            raise LedgerError(
                f"ledger {self.path} is behind its own history: its header records spend "
                f"#{mark} but its last spend is #{last}, so {mark - last} spend(s) are missing "
                f"and it would show budget that was already spent. It is probably a copy of the "
                f"file taken without its {self.path.name}-wal (or an older copy put in its "
                "place): use the original with its -wal file, or a copy made by "
                "`bayesdp ledger backup`; left untouched"
            )

    def _write_high_water(self, spend_id: int) -> None:
        """Write the spend id into the main file's header, outside the WAL (see the module)."""
        try:
            st = os.stat(self.path)
            fd = _HEADER_FDS.get((st.st_dev, st.st_ino))
            if fd is None:
                fd = _HEADER_FDS[(st.st_dev, st.st_ino)] = os.open(self.path, os.O_RDWR)
            os.pwrite(fd, spend_id.to_bytes(4, "big"), USER_VERSION_OFFSET)
            os.fsync(fd)
        except OSError as exc:
            raise LedgerError(
                f"spend #{spend_id} is recorded in {self.path}, but its high-water mark could not "
                f"be written ({exc}); treat the spend as made"
            ) from None

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """This process's connection, one thread at a time (a forked child opens its own);
        SQLite's errors become LedgerErrors that say what is wrong."""
        with self._lock:
            try:
                if self._conn is None or self._pid != os.getpid():
                    conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                           check_same_thread=False)
                    conn.execute("PRAGMA synchronous=FULL")  # a returned spend survives power loss
                    self._conn, self._pid = conn, os.getpid()
                yield self._conn
            except sqlite3.Error as exc:
                raise self._failure(exc) from None

    def _failure(self, exc: sqlite3.Error) -> LedgerError:
        """What an SQLite error means for this ledger."""
        code = str(getattr(exc, "sqlite_errorname", ""))
        if code.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")):
            folder = self.path.parent
            if not os.access(folder, os.W_OK):
                why = f"its directory {folder} is not writable"
            elif not os.access(self.path, os.W_OK):
                why = "the file is read-only"
            else:
                why = f"SQLite could not open it for writing ({exc})"
            return LedgerError(
                f"cannot write to ledger {self.path}: {why}. A ledger needs write access to its "
                f"file and to its directory (SQLite keeps {self.path.name}-wal and "
                f"{self.path.name}-shm beside it); nothing was spent"
            )
        if code.startswith("SQLITE_FULL"):
            return DiskFull(f"cannot write to ledger {self.path}: the disk is full; nothing was spent")
        if code.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
            return LedgerError(
                f"ledger {self.path} stayed locked by another process for {BUSY_TIMEOUT_S:g} s ({exc})"
            )
        return LedgerError(f"{self.path} is not a bayesdp ledger or is corrupt ({exc}); left untouched")

    def close(self) -> None:
        """Close this process's connection (reopened on next use)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __deepcopy__(self, memo: dict[int, Any]) -> Ledger:
        """The ledger is its file: a copy (as scikit-learn's clone makes) spends from the same budget."""
        return self

    def __reduce__(self) -> tuple[type[Ledger], tuple[str]]:
        """Pickled as its path: unpickling reopens the same file (its budget and accounting are in it)."""
        return (Ledger, (str(self.path),))

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- spending ------------------------------------------------------------------------

    def spend(self, guarantee: Any, label: str) -> Spend:
        """Record a spend, or raise BudgetExceeded (naming what remains) and record nothing."""
        g = guarantee if isinstance(guarantee, Guarantee) else getattr(guarantee, "guarantee", None)
        if not isinstance(g, Guarantee):
            raise invalid("guarantee", guarantee, "a Guarantee or a mechanism with .guarantee")
        if not isinstance(label, str) or not label.strip():
            raise invalid("label", label, "a non-empty string saying what the spend is for")
        check_compatible(g, self.budget, "this ledger's budget is a guarantee")
        rule = self.filter
        rule.check(g)
        with self._connect() as conn, immediate(conn):
            kept = self._totals(conn, rule)
            after = kept.plus(rule.charge(g), kept.through)
            record = Spend(label, time=time.time(), guarantee=g, bound=rule.title)
            if not rule.fits(after.rounded()):
                raise BudgetExceeded(f"spending {g} for {label!r} {exceeds(rule, kept, [g])}")
            cursor = conn.execute(
                "INSERT INTO spends (label, time, epsilon, delta, rho, relation, unit, noise)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    label,
                    record.time,
                    g.epsilon,
                    g.delta,
                    g.rho,
                    g.relation,
                    g.unit,
                    json.dumps([asdict(n) for n in g.noise]) if g.noise else None,
                ),
            )
            spend_id = int(cursor.lastrowid or 0)
            self._keep(conn, replace(after, through=spend_id))
            conn.execute(f"PRAGMA user_version = {spend_id}")
        self._write_high_water(spend_id)
        return record

    def backup(self, path: str | os.PathLike[str]) -> Path:
        """Copy this ledger, its -wal included, to a new file at `path` through SQLite's online
        backup API (consistent while other processes spend); never overwrites a file."""
        dst = Path(path)
        tmp = dst.with_name(f".{dst.name}.{uuid.uuid4().hex}.tmp")
        failed = f"cannot back up ledger {self.path} to {dst}"
        try:
            with self._connect() as conn:
                try:
                    target = sqlite3.connect(tmp)
                    try:
                        conn.backup(target)
                    finally:
                        target.close()
                except sqlite3.Error as exc:  # this side's errors are the copy's, not the ledger's
                    raise LedgerError(f"{failed}: {exc}") from None
            os.link(tmp, dst)
        except FileExistsError:
            raise LedgerError(f"{dst} already exists; a backup never overwrites a file") from None
        except OSError as exc:
            raise LedgerError(f"{failed}: {exc}") from None
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{tmp}{suffix}").unlink(missing_ok=True)
        Ledger(dst).close()  # the copy opens as a valid ledger
        return dst

    def migrate(self, accounting: Accounting | str) -> None:
        """Move a legacy "pld" ledger to the filter `accounting`, only if that filter admits every
        spend it holds: then every prefix of its history fits too (the rules only grow), so the
        interaction so far and to come is one the filter lets through."""
        if accounting not in ACCOUNTINGS:
            raise invalid("accounting", accounting, f"one of {ACCOUNTINGS}")
        if self.accounting != LEGACY:
            raise LedgerError(f"{self.path} already uses the {self.accounting} filter; "
                              "only a ledger written with accounting 'pld' is migrated")
        _check_budget(self.budget, accounting)
        rule = filter_for(accounting, self.budget)
        with self._connect() as conn, immediate(conn):
            for _, s in self._rows(conn):
                rule.check(s.guarantee)
            kept = self._totals(conn, rule)
            if kept.through and not rule.fits(kept.rounded()):
                raise BudgetExceeded(
                    f"{self.path} holds spends that already exceed its budget {self.budget} "
                    f"under the {rule.title} (total {rule.total_of(kept.rounded())}); "
                    "it stays read-only"
                )
            self._keep(conn, kept)
            conn.execute("UPDATE meta SET value = ? WHERE key = 'accounting'", (accounting,))
        self.accounting = accounting

    def rename_unit(self, unit: str) -> None:
        """Call the privacy unit of this ledger's budget and spends `unit`: the same units under
        another name (as when a service that named the unit's column now names the unit), so
        nothing is admitted that was not before."""
        renamed = replace(self.budget, unit=unit)
        with self._connect() as conn, immediate(conn):
            conn.execute("UPDATE meta SET value = ? WHERE key = 'budget'",
                         (json.dumps(_guarantee_json(renamed)),))
            conn.execute("UPDATE spends SET unit = ?", (unit,))
        self.budget, self._rule = renamed, None

    def remaining(self) -> Guarantee:
        """The largest next spend the filter admits: ε and δ (basic, advanced), ρ (zcdp), μ (gdp)."""
        rule = self.filter
        with self._connect() as conn:
            return rule.remaining_of(self._totals(conn, rule).rounded())

    def spent(self) -> Guarantee:
        """The filter's running total; the guarantee that holds under adaptive choices is the
        budget, bounded by the filter the result names (see `bayesdp.privacy.filters`)."""
        rule = self.filter
        with self._connect() as conn:
            kept = self._totals(conn, rule)
        return rule.total_of(kept.rounded()) if kept.through else rule.nothing_spent()

    def used(self) -> float:
        """The share of the budget spent, in [0, 1], in the filter's own sums (`Filter.used_of`):
        unlike ε, they add up, so spent and remaining shares make the whole budget."""
        rule = self.filter
        with self._connect() as conn:
            return rule.used_of(self._totals(conn, rule).rounded())

    def propose(self, spends: Sequence[Guarantee]) -> Proposal:
        """What the filter would make of `spends` now; records nothing."""
        return self.proposer()(spends)

    def proposer(self) -> Callable[[Sequence[Guarantee]], Proposal]:
        """`propose` against the sums as they are now, read once (for many proposals, such as a
        search for the largest admitted ε); records nothing."""
        rule = self.filter
        with self._connect() as conn:
            kept = self._totals(conn, rule)
        return lambda spends: Proposal.of(rule, spends, kept)

    def count(self) -> int:
        """How many spends are recorded, without reading them."""
        with self._connect() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM spends").fetchone()[0])

    def history(self) -> list[Spend]:
        """Every spend in the order recorded."""
        with self._connect() as conn:
            return [s for _, s in self._rows(conn)]

    # -- accounting ----------------------------------------------------------------------

    def _totals(self, conn: sqlite3.Connection, rule: Filter) -> Totals:
        """The filter's running sums through the last spend: the stored ones, plus the spends
        recorded after them (all of them when none are stored for this filter)."""
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (TOTALS,)).fetchone()
        kept = None if row is None else Totals.load(row[0])
        if kept is None or kept.accounting != rule.name:
            kept = Totals.empty(rule)
        for spend_id, s in self._rows(conn, after=kept.through):
            kept = kept.plus(rule.charge(s.guarantee), spend_id)
        return kept

    @staticmethod
    def _keep(conn: sqlite3.Connection, kept: Totals) -> None:
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (TOTALS, kept.dump()))

    def _rows(self, conn: sqlite3.Connection, after: int = 0) -> list[tuple[int, Spend]]:
        """The spends recorded after spend id `after`, with their ids, in order."""
        rows = conn.execute(
            "SELECT id, label, time, epsilon, delta, rho, relation, unit, noise FROM spends"
            " WHERE id > ? ORDER BY id", (after,)
        ).fetchall()
        bound = (f"recorded under accounting {LEGACY!r}, not a valid filter"
                 if self.accounting == LEGACY else FILTERS[self.accounting].title)
        return [
            (spend_id, Spend(
                label,
                bound=bound,
                time=t,
                guarantee=Guarantee(
                    eps,
                    delta=delta,
                    relation=relation,
                    unit=unit,
                    rho=rho,
                    noise=() if noise is None else _noise_from(json.loads(noise)),
                    dependence=self.budget.dependence,
                ),
            ))
            for spend_id, label, t, eps, delta, rho, relation, unit, noise in rows
        ]


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """One `BEGIN IMMEDIATE` transaction on an autocommit connection: committed, or rolled back
    on any error (unless SQLite already rolled it back, as a full disk makes it do: a second
    ROLLBACK would fail with "no transaction is active" and hide why)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def charge(ledger: Ledger | None, guarantee: Guarantee, label: str) -> None:
    """Record `guarantee` in `ledger` before a release path reads the data (nothing without one).

    Every release path calls this first, so a refused spend releases nothing and any error
    that could depend on the data comes after the budget it would reveal is spent.
    """
    if ledger is None:
        return
    if not isinstance(ledger, Ledger):
        raise invalid("ledger", ledger, "None or a bayesdp Ledger")
    ledger.spend(guarantee, label)


def _check_budget(b: Guarantee, accounting: str) -> None:
    if b.dependence is not None and accounting != "basic":
        raise invalid("accounting", accounting, f"'basic' for a budget under {b.dependence}")
    if accounting != "basic" and b.delta == 0:
        raise invalid("budget", b, f"a budget with δ > 0 for {accounting} accounting")


def _noise_from(stored: list[dict[str, Any]] | dict[str, Any]) -> tuple[Noise, ...]:
    """The noises of a spend; ledgers written before noise had a family stored one as a kind."""
    if isinstance(stored, dict):
        old = dict(stored)
        return (Noise(old.pop("kind"), **old),)
    return tuple(Noise(**n) for n in stored)


def _guarantee_json(g: Guarantee) -> dict[str, Any]:
    return {
        "epsilon": g.epsilon,
        "delta": g.delta,
        "rho": g.rho,
        "relation": g.relation,
        "unit": g.unit,
        **({} if g.dependence is None else {"dependence": asdict(g.dependence)}),
    }


def _guarantee_from(d: dict[str, Any]) -> Guarantee:
    dependence = d.get("dependence")
    return Guarantee(
        d["epsilon"], delta=d["delta"], relation=d["relation"], unit=d["unit"], rho=d["rho"],
        dependence=None if dependence is None else Dependence(**dependence),
    )
