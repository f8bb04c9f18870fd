"""The HTTP API (Starlette): authentication, limits, the audit log and error handling around
the Service. Responses carry only released values and public metadata; an error shows its
public message, and an unexpected one only an error id (the trace goes to the server log).
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import duckdb
import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from bayesdp.errors import BayesdpError, BudgetExceeded, DiskFull, InvalidParameter, LedgerError
from bayesdp.jsonable import guarantee_json
from bayesdp.report import write_release_report
from bayesdp.serve.auth import Gate, RateLimiter, Refused
from bayesdp.serve.body import parse_body
from bayesdp.serve.config import Config
from bayesdp.serve.limits import Busy, Interrupted, Pool, TooCostly, interruptible
from bayesdp.serve.openapi import docs_page, openapi_schema
from bayesdp.serve.service import AuditedLedger, DatasetNotFound, Service
from bayesdp.serve.state import UNWRITABLE, Analyst, State
from bayesdp.serve.timing import DeadlinePassed
from bayesdp.serve.wire import release_from_json
from bayesdp.sql import SqlError

log = logging.getLogger("bayesdp.serve")

# The console runs only its own inline script and talks only to this origin.
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
       "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")

# Shown for errors whose text may depend on the data.
GENERIC = ("the request could not be answered from the data; the curator can see why in the "
           "audit log (request id {rid})")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


@dataclass
class Call:
    """One authenticated request: who, its id, its JSON body; `status` and `result` for the audit."""

    request: Request
    analyst: Analyst
    rid: str
    body: Any
    status: int = 200
    result: str | None = None
    detail: str | None = None
    dataset: str | None = None  # for the audit log, when the request names it only in its SQL
    headers: dict[str, str] = field(default_factory=dict)


def public_message(exc: BaseException, rid: str) -> str:
    """What an analyst may read of an error: the public message of an error about parameters or
    the budget, or of one whose data-dependent part was set aside as `private_detail`; for any
    other (an engine's message may quote data values) only a pointer to the audit log."""
    if isinstance(exc, BayesdpError) and (exc.private_detail is not None
                                          or isinstance(exc, InvalidParameter | BudgetExceeded)):
        return exc.public_message
    return GENERIC.format(rid=rid)


def create_app(config: Config) -> Starlette:
    """The service's ASGI app: state recovered from the last run, datasets loaded."""
    state = State(config)
    recovered = state.recover()
    if recovered:
        log.warning("recovered %d request(s) interrupted by the last stop", recovered)
    service = Service(config, state)
    limiter = RateLimiter(config.rate_per_minute)
    # Failed authentications per client address and analyst id: each costs an audit row.
    gate = Gate(state, config.rate_per_minute)
    report_lock = threading.Lock()
    pool = Pool(config.limits)

    async def read_json(request: Request) -> Any:
        if request.method != "POST":
            return None
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > config.max_body_bytes:
            raise ApiError(413, "too_large", f"the request body has {int(declared):,} bytes; the limit "
                           f"is {config.max_body_bytes:,}")
        chunks, size = [], 0
        # A body slower than body_seconds (or shorter than its Content-Length) must not hold a worker.
        with anyio.move_on_after(config.limits.body_seconds) as reading:
            async for chunk in request.stream():
                size += len(chunk)
                if size > config.max_body_bytes:
                    raise ApiError(413, "too_large",
                                   f"the request body exceeds {config.max_body_bytes:,} bytes")
                chunks.append(chunk)
        if reading.cancelled_caught:
            raise ApiError(408, "body_timeout", f"the request body did not arrive within "
                           f"{config.limits.body_seconds:g} s", {"Connection": "close"})
        try:
            return parse_body(b"".join(chunks))
        except InvalidParameter as exc:
            raise ApiError(400, "bad_json", exc.public_message) from None

    def authenticated(request: Request) -> Analyst:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        address = request.client.host if request.client else ""
        return gate.authenticate(token.strip() if scheme.lower() == "bearer" else "", address)

    def audited(call: Call, work: Callable[[Call], Any], dataset: str | None, what: str) -> Response:
        """Run one request between its two audit-log entries (in one worker thread), never
        beside a load probe's round (`timing.Lanes.active`)."""
        with service.lanes.active():
            return _audited(call, work, dataset, what)

    def _audited(call: Call, work: Callable[[Call], Any], dataset: str | None, what: str) -> Response:
        rid, request = call.rid, call.request
        status: str
        detail: str | None
        response: Response
        result = None
        try:
            state.audit_begin(rid, call.analyst.id, request.method, request.url.path, dataset, what or None)
            out = work(call)
        except ApiError as exc:
            status, detail = str(exc.status), exc.message
            response = _error(exc.status, exc.code, exc.message, rid, exc.headers)
        except DatasetNotFound as exc:
            status, detail = "404", str(exc)
            response = _error(404, "not_found", public_message(exc, rid), rid)
        except BudgetExceeded as exc:
            status, detail = "403", str(exc)
            response = _error(403, "budget_exceeded", public_message(exc, rid), rid)
        except DeadlinePassed as exc:  # the same answer whatever made the work slow
            status, detail = "503", str(exc)
            response = _error(503, "deadline", exc.public_message, rid)
        except TooCostly as exc:
            status, detail = "413", str(exc)
            response = _error(413, "too_costly", exc.public_message, rid)
        except (Interrupted, duckdb.InterruptException, duckdb.OutOfMemoryException, MemoryError) as exc:
            status, detail = "503", f"{type(exc).__name__}: {exc}"
            response = _error(503, "stopped", "the request was stopped before it finished: the client "
                              "left, or it ran past the service's time or memory limit", rid)
        except LedgerError as exc:
            status, detail, response = "503", str(exc), unavailable(exc, rid)
        except (BayesdpError, ValueError, duckdb.Error) as exc:
            # str(exc) holds the private detail: it goes to the curator's audit log only.
            status, detail = "400", f"{type(exc).__name__}: {exc}"
            # Refused SQL points at the text it refuses: [start, end) in characters.
            sql = exc.span if isinstance(exc, SqlError) else None
            response = _error(400, "refused", public_message(exc, rid), rid, sql=sql)
        except Exception as exc:
            error_id = f"err_{secrets.token_hex(6)}"
            log.exception("error %s in %s %s (request %s)", error_id, request.method, request.url.path, rid)
            status, detail = "500", f"{error_id}: {exc!r}"
            response = _error(500, "internal", f"internal error {error_id}", rid, {}, error_id)
        else:
            status, result, detail = str(call.status), call.result, call.detail
            response = out if isinstance(out, Response) else JSONResponse(
                out, status_code=call.status, headers={"X-Request-Id": rid, **call.headers})
            state.failure = None
        recorded(state.audit_end, rid, status, result, detail, call.dataset)
        return response

    def unavailable(exc: LedgerError, rid: str) -> Response:
        """503 for records the service cannot write: the cause (a path, SQLite's words) goes
        to the curator's log; the analyst learns only that the disk is full, when it is."""
        state.failure = exc
        log.error("request %s: %s", rid, exc)
        message = why_unavailable(exc) if isinstance(exc, DiskFull) else \
            f"{UNWRITABLE}; the curator can see why in the server log (request id {rid})"
        return _error(503, "unavailable", message, rid, {"Retry-After": "60"})

    def api(work: Callable[[Call], Any], what: str = "") -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            rid = f"req_{secrets.token_hex(8)}"
            path = request.url.path
            try:
                analyst = await run_in_threadpool(authenticated, request)
            except Refused as refused:
                if refused.wait:  # not logged: one row per refused guess would fill the disk
                    return _too_many(refused.wait, rid, "failed authentications")
                exc = ApiError(401, "unauthorized", "a valid token is required: Authorization: Bearer "
                               "<token>", {"WWW-Authenticate": "Bearer"})
                await run_in_threadpool(recorded, _audit_refused, state, rid, request, exc)
                return _error(exc.status, exc.code, exc.message, rid, exc.headers)
            wait = limiter.retry_after(analyst.id)
            if wait:
                return _too_many(wait, rid, "requests")
            dataset = request.path_params.get("dataset")
            try:
                body = await read_json(request)
                if isinstance(body, dict) and isinstance(body.get("dataset"), str):
                    dataset = body["dataset"]
                call = Call(request, analyst, rid, body)
                if not what:  # reads stored state only: never waits behind the computing requests
                    return await run_in_threadpool(audited, call, work, dataset, what)
                try:
                    return await pool.run(audited, call, interruptible(work), dataset, what,
                                          receive=request.receive)
                except Busy:
                    raise ApiError(503, "busy", "every worker is busy and the queue is full; retry shortly",
                                   {"Retry-After": "1"}) from None
            except ApiError as exc:
                await run_in_threadpool(recorded, state.audit_begin, rid, analyst.id, request.method, path,
                                        dataset, what or None)
                await run_in_threadpool(recorded, state.audit_end, rid, str(exc.status), None, exc.message)
                return _error(exc.status, exc.code, exc.message, rid, exc.headers)

        return endpoint

    # -- endpoints ---------------------------------------------------------------------

    def datasets(call: Call) -> Any:
        return {"datasets": service.datasets_json(call.analyst.id),
                "holdouts": [service.holdouts[h].metadata() for h in state.holdouts_for(call.analyst.id)]}

    def budget(call: Call) -> Any:
        return {"analyst": call.analyst.name, "datasets": service.budget_json(call.analyst.id)}

    def body_of(call: Call) -> dict[str, Any]:
        if not isinstance(call.body, dict):
            raise ApiError(400, "bad_request", 'the body must be a JSON object {"dataset": ..., '
                           '"spec": {...}} or {"dataset": ..., "sql": "SELECT ..."}')
        return call.body

    def preview(call: Call) -> Any:
        body = body_of(call)
        ds = service.dataset_of(body, call.analyst.id)
        call.dataset = ds.name
        return service.preview(ds, body, call.analyst.id)

    def idempotency_key(call: Call) -> str:
        key = call.request.headers.get("idempotency-key") or call.rid
        if len(key) > 200:
            raise ApiError(400, "bad_request", "Idempotency-Key must be at most 200 characters")
        return key

    def claimed(call: Call, kind: str, key: str, dataset: str) -> tuple[str, dict[str, Any] | None]:
        """A new result id, or the stored response of an earlier request with this key."""
        status, result_id, stored = state.claim(call.analyst.id, kind, key, dataset, call.body, call.rid)
        call.result = result_id
        if status == "done":
            call.headers["Idempotent-Replayed"] = "true"
            return result_id, stored
        if status == "conflict":
            raise ApiError(422, "key_reused", "this idempotency key was used for a different request; "
                           "use a new key for a new request")
        if status == "pending":
            raise ApiError(409, "in_progress", "a request with this idempotency key is still running; "
                           "retry later with the same key")
        if status in ("failed", "interrupted"):
            raise ApiError(409, "interrupted", f"the request with this idempotency key ({result_id}) "
                           "stopped after its spend was recorded and released nothing; send the "
                           "request again with a new idempotency key")
        return result_id, None

    def spending(call: Call, kind: str, key: str, ds_name: str,
                 run: Callable[[AuditedLedger], dict[str, Any]]) -> Any:
        result_id, stored = claimed(call, kind, key, ds_name)
        if stored is not None:
            return stored
        ledger = AuditedLedger(state.ledger(call.analyst.id, ds_name), state, call.rid)
        try:
            doc = run(ledger)
        except BaseException:
            # With a full disk this write fails too: the result stays pending, and the next
            # start settles it from the ledger (`State.recover`).
            recorded(state.abandon, result_id, ledger.spent)
            raise
        doc.update(id=result_id, dataset=ds_name, remaining=guarantee_json(ledger.ledger.remaining()))
        doc.setdefault("created", time.time())
        state.complete(result_id, doc)
        call.status = 201
        return doc

    def release(call: Call) -> Any:
        body = body_of(call)
        ds = service.dataset_of(body, call.analyst.id)
        call.dataset = ds.name

        def run(ledger: AuditedLedger) -> dict[str, Any]:
            doc, call.detail = service.release(ds, body, ledger)
            return doc

        return spending(call, "release", idempotency_key(call), ds.name, run)

    def releases(call: Call) -> Any:
        return {"releases": [{"id": r["id"], "dataset": r["dataset"], "created": r["created"],
                              "guarantee": r["guarantee"], "label": r["label"], "spec": r["spec"]}
                             for r in state.results(call.analyst.id, "release")]}

    def stored_release(call: Call) -> dict[str, Any]:
        doc = state.result(call.analyst.id, call.request.path_params["id"])
        if doc is None or not doc["id"].startswith("rel_"):
            raise ApiError(404, "not_found", f"no release {call.request.path_params['id']!r} of yours")
        call.result = doc["id"]
        return doc

    def report(call: Call) -> Response:
        doc = stored_release(call)
        # The report draws with matplotlib's pyplot, whose state is global: one report at a time.
        with report_lock, tempfile.TemporaryDirectory() as tmp:
            path = write_release_report(release_from_json(doc), Path(tmp) / "report.html",
                                        title=f"Private release {doc['id']} of {doc['dataset']}")
            return HTMLResponse(path.read_text(encoding="utf-8"))

    def holdout(call: Call) -> Any:
        name = call.request.path_params["name"]
        visible = state.holdouts_for(call.analyst.id)
        if name not in visible:
            raise ApiError(404, "not_found", f"no holdout named {name!r}; the holdouts are {sorted(visible)}")
        return service.holdouts[name]

    def holdout_queries(call: Call) -> Any:
        h = holdout(call)
        body = call.body if isinstance(call.body, dict) else {}
        answers = h.query(body.get("queries"), call.analyst.id)
        return {"answers": [{"value": a.value, "source": a.source, "budget_left": a.budget_left}
                            for a in answers], "holdout": h.metadata()}

    def holdout_train(call: Call) -> Response:
        return PlainTextResponse(holdout(call).train_csv(), media_type="text/csv")

    def synthetic(call: Call) -> Any:
        ds = service.dataset(call.request.path_params["dataset"], call.analyst.id)
        if ds.synthetic is None:
            raise ApiError(404, "not_found", f"the dataset {ds.name!r} offers no synthetic data")
        out = synthetic_path(call.analyst.id, ds.name)
        return spending(call, "synthetic", ds.name, ds.name,
                        lambda ledger: service.synthesize(ds, ledger, out))

    def synthetic_path(analyst_id: str, dataset: str) -> Path:
        return config.state / "synthetic" / analyst_id / f"{dataset}.csv"

    def synthetic_data(call: Call) -> Response:
        ds = service.dataset(call.request.path_params["dataset"], call.analyst.id)
        path = synthetic_path(call.analyst.id, ds.name)
        if not any(r["dataset"] == ds.name for r in state.results(call.analyst.id, "synthetic")):
            raise ApiError(404, "not_found", f"you have no synthetic data of {ds.name!r} yet: POST "
                           f"/v1/synthetic/{ds.name} releases it (once, against your budget)")
        return FileResponse(path, media_type="text/csv", filename=f"{ds.name}-synthetic.csv")

    async def health(request: Request) -> Response:
        # After a failure to record, a thorough check: only a write that needs room clears it.
        problem = await run_in_threadpool(state.writable, state.failure is not None)
        if problem is None and isinstance(state.failure, DiskFull):
            state.failure = None  # space was freed: the records can be written again
        problem = problem or state.failure
        if problem is not None:
            return JSONResponse({"status": "unavailable", "reason": why_unavailable(problem)},
                                status_code=503)
        return JSONResponse({"status": "ok"})

    async def openapi(request: Request) -> Response:
        return JSONResponse(openapi_schema())

    async def docs(request: Request) -> Response:
        return HTMLResponse(docs_page())

    console_page = jinja2.Environment(
        loader=jinja2.PackageLoader("bayesdp.serve", "templates"), autoescape=True
    ).get_template("console.html").render(title="bayesdp: private releases")

    async def console(request: Request) -> Response:
        # The page holds no data: it signs in with the token and calls the API from the browser.
        return HTMLResponse(console_page, headers={"Content-Security-Policy": CSP,
                                                   "X-Content-Type-Options": "nosniff"})

    routes = [
        Route("/", console),
        Route("/health", health),
        Route("/openapi.json", openapi),
        Route("/docs", docs),
        Route("/v1/datasets", api(datasets)),
        Route("/v1/budget", api(budget)),
        Route("/v1/preview", api(preview, "preview"), methods=["POST"]),
        Route("/v1/releases", api(release, "release"), methods=["POST"]),
        Route("/v1/releases", api(releases)),
        Route("/v1/releases/{id}", api(stored_release)),
        Route("/v1/releases/{id}/report", api(report)),
        Route("/v1/holdouts/{name}/queries", api(holdout_queries, "holdout"), methods=["POST"]),
        Route("/v1/holdouts/{name}/train", api(holdout_train)),
        Route("/v1/synthetic/{dataset}", api(synthetic, "synthetic"), methods=["POST"]),
        Route("/v1/synthetic/{dataset}", api(synthetic_data)),
    ]
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        service.close()
        state.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.service = service
    return app


def _too_many(wait: float, rid: str, what: str) -> JSONResponse:
    return _error(429, "rate_limited", f"too many {what}; retry in {wait:.1f} s", rid,
                  {"Retry-After": str(max(1, round(wait)))})


def _audit_refused(state: State, rid: str, request: Request, exc: ApiError) -> None:
    state.audit_begin(rid, None, request.method, request.url.path)
    state.audit_end(rid, str(exc.status), None, exc.message)


def why_unavailable(exc: LedgerError) -> str:
    """What anyone may read of a failure to record: whether the disk is full, no path or detail."""
    return f"{UNWRITABLE}: disk full" if isinstance(exc, DiskFull) else UNWRITABLE


def recorded(write: Callable[..., None], *args: Any) -> None:
    """A write to the service's records after the answer is decided: if it fails (a full
    disk), the answer still goes out and the curator's log says what was not written."""
    try:
        write(*args)
    except LedgerError as exc:
        log.error("not recorded (%s): %s", getattr(write, "__name__", write), exc)


def _error(status: int, code: str, message: str, rid: str, headers: dict[str, str] | None = None,
           error_id: str | None = None, sql: tuple[int, int] | None = None) -> JSONResponse:
    err: dict[str, Any] = {"code": code, "message": message}
    if error_id:
        err["id"] = error_id
    if sql is not None:
        err["sql"] = {"start": sql[0], "end": sql[1]}
    return JSONResponse({"error": err, "request_id": rid}, status_code=status,
                        headers={"X-Request-Id": rid, **(headers or {})})
