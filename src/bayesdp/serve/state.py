"""The service's state: analysts and their tokens, per-analyst budgets, results, the audit log.

Everything lives under the state directory: `service.db` (SQLite, WAL) holds the analysts,
budget overrides, stored results (for idempotent retries) and the audit log; each analyst has
one budget `Ledger` per dataset in `ledgers/<analyst id>/<dataset>.db`. A token is
`bdp_<analyst id>_<secret>`; only scrypt(secret) and a 32-bit check of it are stored
(bayesdp.serve.tokens).

A spend is recorded in the ledger first, with the request id in its label, then in the audit
log; `recover()` (run at start-up) completes the audit log from the ledgers, so the two always
agree after a restart. The ledgers are synced to disk on every spend; `service.db` survives a
killed process but, to keep requests fast, may lose its last rows to a power failure: the
audit log is then rebuilt from the ledgers, and a lost stored release makes its retry a new,
paid release.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bayesdp.errors import DiskFull, InvalidParameter, LedgerError, invalid
from bayesdp.privacy import Guarantee, Ledger
from bayesdp.privacy.ledger import immediate
from bayesdp.serve.body import read_stored
from bayesdp.serve.config import Budget, Config
from bayesdp.serve.tokens import new_secret

_SCHEMA = """
CREATE TABLE IF NOT EXISTS analysts (
    id TEXT PRIMARY KEY, name TEXT UNIQUE NOT NULL, salt BLOB NOT NULL, token_hash BLOB NOT NULL,
    created REAL NOT NULL, revoked REAL, token_check BLOB);
CREATE TABLE IF NOT EXISTS budgets (
    analyst TEXT NOT NULL, dataset TEXT NOT NULL, epsilon REAL NOT NULL, delta REAL NOT NULL,
    accounting TEXT NOT NULL, PRIMARY KEY (analyst, dataset));
CREATE TABLE IF NOT EXISTS results (
    id TEXT PRIMARY KEY, analyst TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL,
    dataset TEXT NOT NULL, created REAL NOT NULL, status TEXT NOT NULL, request TEXT NOT NULL,
    response TEXT, UNIQUE (analyst, kind, key));
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT, request TEXT UNIQUE NOT NULL, time REAL NOT NULL,
    analyst TEXT, method TEXT NOT NULL, path TEXT NOT NULL, dataset TEXT, what TEXT,
    status TEXT NOT NULL, spend_epsilon REAL, spend_delta REAL, spend_rho REAL, result TEXT,
    detail TEXT);
CREATE TABLE IF NOT EXISTS access (analyst TEXT PRIMARY KEY, datasets TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS holdouts (
    name TEXT PRIMARY KEY, overflows INTEGER NOT NULL, open INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS holdout_shares (
    name TEXT NOT NULL, analyst TEXT NOT NULL, overflows INTEGER NOT NULL, PRIMARY KEY (name, analyst));
CREATE TABLE IF NOT EXISTS health (id INTEGER PRIMARY KEY, probe BLOB NOT NULL);
"""

UNWRITABLE = "the service cannot record spends"
_PROBE = 64 * 1024  # bytes: less room than this on the state's disk counts as full


def storage_failure(path: Path, exc: sqlite3.Error) -> LedgerError:
    """An SQLite error of the service's records as a bayesdp error: a full disk says so (the
    analyst can do nothing but wait, and should know why); anything else is for the curator."""
    detail = f"{path}: {exc} ({getattr(exc, 'sqlite_errorname', type(exc).__name__)})"
    if str(getattr(exc, "sqlite_errorname", "")).startswith("SQLITE_FULL"):
        return DiskFull(f"{UNWRITABLE}: disk full", private_detail=detail)
    return LedgerError(UNWRITABLE, private_detail=detail)


def _names(datasets: list[str]) -> str:
    return json.dumps(sorted(set(datasets)))


@dataclass(frozen=True)
class Analyst:
    id: str
    name: str
    created: float
    revoked: float | None


class State:
    """The state directory of one service; safe to share between threads and processes."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.root = config.state
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(self.root / "service.db", timeout=60.0, isolation_level=None,
                                     check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)
        if "token_check" not in {r[1] for r in self._conn.execute("PRAGMA table_info(analysts)")}:
            # A state directory from before token checks: its tokens get one at their next use.
            self._conn.execute("ALTER TABLE analysts ADD COLUMN token_check BLOB")
        self._ledgers: dict[tuple[str, str], Ledger] = {}
        # The last failure to record (a full disk, a read-only ledger), until a request succeeds.
        self.failure: LedgerError | None = None

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._conn
            except sqlite3.IntegrityError:
                raise  # a constraint the caller turns into its own message
            except sqlite3.Error as exc:
                raise storage_failure(self.root / "service.db", exc) from None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._db() as conn, immediate(conn):
            yield conn

    def writable(self, thorough: bool = False) -> LedgerError | None:
        """None if the service can record spends, else why not: its disk has room, its records
        take a write (`thorough`: one of _PROBE bytes, which a nearly full database cannot
        take), and the ledgers' folder is writable."""
        disk = os.statvfs(self.root)
        if disk.f_bavail * disk.f_frsize < _PROBE:
            return DiskFull(f"{UNWRITABLE}: disk full", private_detail=f"{self.root}: "
                            f"{disk.f_bavail * disk.f_frsize} bytes free")
        try:
            for probe in (bytes(_PROBE), b"") if thorough else (b"",):
                with self._transaction() as conn:
                    conn.execute("INSERT OR REPLACE INTO health VALUES (1, ?)", (probe,))
        except LedgerError as exc:
            return exc
        folder = self.root / "ledgers"
        if folder.exists() and not os.access(folder, os.W_OK):
            return LedgerError(UNWRITABLE, private_detail=f"{folder} is not writable")
        return None

    def close(self) -> None:
        with self._lock:
            for ledger in self._ledgers.values():
                ledger.close()
            self._conn.close()

    # -- analysts and tokens -------------------------------------------------------------

    def add_analyst(self, name: str, datasets: list[str] | None = None) -> str:
        """Create an analyst (limited to `datasets` if given, see `set_access`); returns the
        token, which is shown once and never stored."""
        if not isinstance(name, str) or not name.strip() or len(name) > 100:
            raise invalid("name", name, "a non-empty analyst name of at most 100 characters")
        for d in datasets or []:
            self._dataset(d)
        analyst_id = secrets.token_hex(6)
        secret, salt, slow, check = new_secret()
        try:
            with self._transaction() as conn:
                conn.execute("INSERT INTO analysts VALUES (?, ?, ?, ?, ?, NULL, ?)",
                             (analyst_id, name, salt, slow, time.time(), check))
                if datasets is not None:
                    conn.execute("INSERT INTO access VALUES (?, ?)", (analyst_id, _names(datasets)))
        except sqlite3.IntegrityError:
            raise invalid("name", name, "a name no other analyst has") from None
        return f"bdp_{analyst_id}_{secret}"

    def analysts(self) -> list[Analyst]:
        with self._db() as conn:
            rows = conn.execute("SELECT id, name, created, revoked FROM analysts ORDER BY created").fetchall()
        return [Analyst(*r) for r in rows]

    def analyst(self, name: str) -> Analyst:
        for a in self.analysts():
            if a.name == name:
                return a
        raise invalid("analyst", name, f"one of {[a.name for a in self.analysts()]}")

    def revoke(self, name: str) -> None:
        a = self.analyst(name)
        with self._transaction() as conn:
            conn.execute("UPDATE analysts SET revoked = ? WHERE id = ? AND revoked IS NULL",
                         (time.time(), a.id))

    def credentials(self, analyst_id: str) -> tuple[Analyst, bytes, bytes, bytes | None] | None:
        """An analyst with their token's salt, slow hash and check (None for a token issued
        before checks were stored), or None for an unknown id."""
        with self._db() as conn:
            row = conn.execute("SELECT id, name, created, revoked, salt, token_hash, token_check FROM "
                               "analysts WHERE id = ?", (analyst_id,)).fetchone()
        return None if row is None else (Analyst(*row[:4]), row[4], row[5], row[6])

    def set_token_check(self, analyst_id: str, check: bytes) -> None:
        with self._transaction() as conn:
            conn.execute("UPDATE analysts SET token_check = ? WHERE id = ?", (check, analyst_id))

    # -- which datasets an analyst may use ----------------------------------------------------

    def set_access(self, name: str, datasets: list[str] | None) -> None:
        """Limit an analyst to these datasets (None: every dataset the configuration opens to them)."""
        a = self.analyst(name)
        for d in datasets or []:
            self._dataset(d)
        with self._transaction() as conn:
            conn.execute("DELETE FROM access WHERE analyst = ?", (a.id,))
            if datasets is not None:
                conn.execute("INSERT INTO access VALUES (?, ?)", (a.id, _names(datasets)))

    def datasets_for(self, analyst_id: str) -> list[str]:
        """The datasets an analyst may use: those whose configured `analysts` (if any) name them,
        among those the curator limited them to (if they did)."""
        with self._db() as conn:
            row = conn.execute("SELECT datasets FROM access WHERE analyst = ?", (analyst_id,)).fetchone()
        granted = None if row is None else set(json.loads(row[0]))
        name = self._name(analyst_id)
        return [n for n, ds in self.config.datasets.items()
                if (ds.analysts is None or name in ds.analysts) and (granted is None or n in granted)]

    def holdouts_for(self, analyst_id: str) -> list[str]:
        """The holdouts an analyst may use: those whose configured `analysts` (if any) name them."""
        name = self._name(analyst_id)
        return [n for n, h in self.config.holdouts.items() if h.analysts is None or name in h.analysts]

    def _name(self, analyst_id: str) -> str | None:
        with self._db() as conn:
            row = conn.execute("SELECT name FROM analysts WHERE id = ?", (analyst_id,)).fetchone()
        return None if row is None else str(row[0])

    # -- budgets and ledgers -------------------------------------------------------------

    def set_budget(self, name: str, dataset: str, budget: Budget) -> None:
        """Override an analyst's budget on a dataset; only before the analyst's ledger exists."""
        a, ds = self.analyst(name), self._dataset(dataset)
        budget.guarantee(ds.unit)
        if self.ledger_path(a.id, dataset).exists():
            raise InvalidParameter(f"{name} already has a ledger on {dataset!r} with budget "
                                   f"{self.ledger(a.id, dataset).budget}: a ledger's budget never changes")
        with self._transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO budgets VALUES (?, ?, ?, ?, ?)",
                         (a.id, dataset, budget.epsilon, budget.delta, budget.accounting))

    def budget(self, analyst_id: str, dataset: str) -> Budget:
        ds = self._dataset(dataset)
        with self._db() as conn:
            row = conn.execute("SELECT epsilon, delta, accounting FROM budgets WHERE analyst = ? AND "
                               "dataset = ?", (analyst_id, dataset)).fetchone()
        return ds.budget if row is None else Budget(*row)

    def ledger_path(self, analyst_id: str, dataset: str) -> Path:
        return self.root / "ledgers" / analyst_id / f"{dataset}.db"

    def ledger(self, analyst_id: str, dataset: str) -> Ledger:
        """This analyst's ledger on this dataset, created with their budget on first use."""
        with self._lock:
            key = (analyst_id, dataset)
            if key not in self._ledgers:
                b, ds = self.budget(analyst_id, dataset), self._dataset(dataset)
                path = self.ledger_path(analyst_id, dataset)
                path.parent.mkdir(parents=True, exist_ok=True)
                if path.exists():
                    # Created when guarantees named the unit's column: the same units, renamed.
                    with Ledger(path) as old:
                        if old.budget.unit == ds.former_unit != ds.unit:
                            old.rename_unit(ds.unit)
                self._ledgers[key] = Ledger(path, budget=b.guarantee(ds.unit), accounting=b.accounting)
            return self._ledgers[key]

    def _dataset(self, name: str) -> Any:
        if name not in self.config.datasets:
            raise invalid("dataset", name, f"one of {sorted(self.config.datasets)}")
        return self.config.datasets[name]

    # -- results (idempotency) -----------------------------------------------------------

    def claim(self, analyst_id: str, kind: str, key: str, dataset: str, request: dict[str, Any],
              request_id: str | None = None) -> tuple[str, str, dict[str, Any] | None]:
        """Reserve (kind, key) for this analyst: ("new", id, None), or the earlier result's
        status ("done", "pending", "failed", "interrupted", or "conflict" when the earlier
        request was a different one), id and stored response. The new id goes into the audit
        row of `request_id`, so that `recover` can tell whether an interrupted result spent."""
        result_id = f"{kind[:3]}_{secrets.token_hex(8)}"
        with self._transaction() as conn:
            row = conn.execute("SELECT id, status, response, request FROM results WHERE analyst = ? AND "
                               "kind = ? AND key = ?", (analyst_id, kind, key)).fetchone()
            if row is not None:
                if json.loads(row[3]) != request:
                    return "conflict", row[0], None
                return row[1], row[0], None if row[2] is None else read_stored(row[2])
            conn.execute("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, NULL)",
                         (result_id, analyst_id, kind, key, dataset, time.time(), json.dumps(request)))
            conn.execute("UPDATE audit SET result = ? WHERE request = ?", (result_id, request_id))
        return "new", result_id, None

    def complete(self, result_id: str, response: dict[str, Any]) -> None:
        # Strict JSON: a value no client could read fails here, not in every later listing.
        text = json.dumps(response, allow_nan=False)
        with self._transaction() as conn:
            conn.execute("UPDATE results SET status = 'done', response = ? WHERE id = ?", (text, result_id))

    def abandon(self, result_id: str, spent: bool) -> None:
        """A result that failed: kept as failed if it spent (a retry must not spend again), else freed."""
        with self._transaction() as conn:
            if spent:
                conn.execute("UPDATE results SET status = 'failed' WHERE id = ?", (result_id,))
            else:
                conn.execute("DELETE FROM results WHERE id = ?", (result_id,))

    def result(self, analyst_id: str, result_id: str) -> dict[str, Any] | None:
        """A finished result of this analyst (None for an unknown id or another analyst's)."""
        with self._db() as conn:
            row = conn.execute("SELECT response FROM results WHERE id = ? AND analyst = ? AND "
                               "status = 'done'", (result_id, analyst_id)).fetchone()
        return None if row is None else dict(read_stored(row[0]))

    def results(self, analyst_id: str, kind: str) -> list[dict[str, Any]]:
        with self._db() as conn:
            rows = conn.execute("SELECT response FROM results WHERE analyst = ? AND kind = ? AND "
                                "status = 'done' ORDER BY created", (analyst_id, kind)).fetchall()
        return [read_stored(r[0]) for r in rows]

    # -- audit log -----------------------------------------------------------------------

    def audit_begin(self, request_id: str, analyst: str | None, method: str, path: str,
                    dataset: str | None = None, what: str | None = None) -> None:
        with self._transaction() as conn:
            conn.execute("INSERT INTO audit (request, time, analyst, method, path, dataset, what, status) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, 'pending')",
                         (request_id, time.time(), analyst, method, path, dataset, what))

    def audit_spend(self, request_id: str, g: Guarantee) -> None:
        with self._transaction() as conn:
            conn.execute("UPDATE audit SET spend_epsilon = ?, spend_delta = ?, spend_rho = ? "
                         "WHERE request = ?", (g.epsilon, g.delta, g.rho, request_id))

    def audit_end(self, request_id: str, status: str, result: str | None = None,
                  detail: str | None = None, dataset: str | None = None) -> None:
        with self._transaction() as conn:
            conn.execute("UPDATE audit SET status = ?, result = COALESCE(?, result), detail = ?, "
                         "dataset = COALESCE(?, dataset) WHERE request = ?",
                         (status, result, detail, dataset, request_id))

    def audit_log(self, analyst_id: str | None = None) -> list[dict[str, Any]]:
        """The curator's view: every request, with its spend, result and private detail."""
        with self._db() as conn:
            conn.row_factory = sqlite3.Row
            try:
                q = "SELECT * FROM audit" + (" WHERE analyst = ?" if analyst_id else "") + " ORDER BY id"
                rows = conn.execute(q, (analyst_id,) if analyst_id else ()).fetchall()
            finally:
                conn.row_factory = None
        return [dict(r) for r in rows]

    def recover(self) -> int:
        """After a crash: every ledger spend gets its audit row (the ledger's label starts with the
        request id), requests left pending become "interrupted", pending results too if they
        spent (else they are dropped). Returns how many requests were pending."""
        with self._db() as conn:
            rows = conn.execute("SELECT request, status, spend_epsilon FROM audit").fetchall()
        audit = {r[0]: r for r in rows}
        for path in sorted(self.root.glob("ledgers/*/*.db")):
            analyst, dataset = path.parent.name, path.stem
            if dataset not in self.config.datasets:
                continue
            for s in self.ledger(analyst, dataset).history():
                request_id = s.label.split(" ", 1)[0]
                if request_id not in audit:
                    self.audit_begin(request_id, analyst, "?", "?", dataset, s.label)
                    self.audit_end(request_id, "recovered", detail="audit row rebuilt from the ledger")
                if request_id not in audit or audit[request_id][2] is None:
                    self.audit_spend(request_id, s.guarantee)
        pending = [r for r, row in audit.items() if row[1] == "pending"]
        for request_id in pending:
            self.audit_end(request_id, "interrupted", detail="the server stopped during this request")
        with self._transaction() as conn:
            # Stopped before its spend (its audit row, completed from the ledgers above, has
            # none): the key is freed and a retry runs anew. Stopped after it, or not linked to
            # an audit row: kept as interrupted, so that a retry cannot spend twice.
            conn.execute("DELETE FROM results WHERE status = 'pending' AND id IN (SELECT result FROM "
                         "audit WHERE result IS NOT NULL AND spend_epsilon IS NULL AND spend_rho IS NULL)")
            conn.execute("UPDATE results SET status = 'interrupted' WHERE status = 'pending'")
        return len(pending)

    # -- reusable holdouts ---------------------------------------------------------------

    def holdout_state(self, name: str) -> tuple[int, bool]:
        """(overflows spent, whether a run of training answers was open) of a holdout."""
        with self._db() as conn:
            row = conn.execute("SELECT overflows, open FROM holdouts WHERE name = ?", (name,)).fetchone()
        return (0, False) if row is None else (int(row[0]), bool(row[1]))

    def save_holdout_state(self, name: str, overflows: int, open_run: bool,
                           analyst_id: str | None = None, analyst_overflows: int = 0) -> None:
        """A holdout's state, and (in the same transaction) the overflows one analyst has spent."""
        with self._transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO holdouts VALUES (?, ?, ?)", (name, overflows, int(open_run)))
            if analyst_id is not None:
                conn.execute("INSERT OR REPLACE INTO holdout_shares VALUES (?, ?, ?)",
                             (name, analyst_id, analyst_overflows))

    def holdout_share_spent(self, name: str, analyst_id: str) -> int:
        """How many of a holdout's overflows this analyst has spent."""
        with self._db() as conn:
            row = conn.execute("SELECT overflows FROM holdout_shares WHERE name = ? AND analyst = ?",
                               (name, analyst_id)).fetchone()
        return 0 if row is None else int(row[0])
