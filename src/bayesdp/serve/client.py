"""The Python client: the builder's verbs against a remote service, returning the same Release.

    db = bdp.connect("http://127.0.0.1:8000/", token)
    r = (db.table("hie").group_by("coins", keys=[0, 25, 50, 95, 100])
           .agg(persons=bdp.count_units(), spending=bdp.mean("meddol", bounds=(0, 3000)))
           .release(epsilon=1.0))

A release is sent with an idempotency key and retried with the same key after a network
failure, so a retry never draws new noise (that would be an averaging attack) nor spends twice.
"""

from __future__ import annotations

import email.utils
import itertools
import random
import re
import time
import uuid
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from io import StringIO
from typing import Any
from urllib.parse import quote

import httpx
import pandas as pd

from bayesdp.errors import (
    BayesdpError,
    BudgetExceeded,
    InvalidParameter,
    check_nonnegative,
    check_positive,
    invalid,
)
from bayesdp.holdout import HoldoutAnswer
from bayesdp.privacy import Guarantee
from bayesdp.serve.wire import guarantee_from_json, release_from_json
from bayesdp.sql import SqlError
from bayesdp.tables import Aggregate, Release

# Waits between attempts: "full jitter" exponential backoff (a random wait up to min(CAP, BASE·2^k)),
# so that clients refused together do not all come back together.
BACKOFF_BASE_S = 0.1
BACKOFF_CAP_S = 5.0
# What a token looks like: bdp_<analyst id>_<secret> (URL-safe base64), as `analysts add` prints it.
TOKEN = re.compile(r"bdp_[0-9a-f]+_[A-Za-z0-9_-]+")


class ServiceError(BayesdpError):
    """The service refused a request; `status` is the HTTP status, the message the service's."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class ServiceUnavailable(ServiceError):
    """The service could not be reached, or kept answering "busy" (429, 503), until the client's
    `retry_for` seconds ran out; `status` is 0 when no answer came, `retry_after` what the
    service last asked for (seconds) or None."""

    def __init__(self, message: str, status: int = 0, retry_after: float | None = None):
        super().__init__(message, status)
        self.retry_after = retry_after


class Client:
    """A connection to a bayesdp service with one analyst's token.

    A request that fails on the network, or that the service refuses as too many (429) or as
    unavailable (503), is tried again after a jittered exponential backoff (or the service's
    Retry-After) for at most `retry_for` seconds in all; then `ServiceUnavailable` is raised.
    Only requests that cannot spend twice are retried after a lost answer: reads, and releases
    sent with an idempotency key.
    """

    def __init__(self, url: str, token: str, *, timeout: float = 120.0, retry_for: float = 30.0) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise invalid("url", url, "the service's http:// or https:// address")
        if not isinstance(token, str) or not TOKEN.fullmatch(token):
            # The message never quotes the token: it may be a real one with a typo.
            got = "an empty string" if token == "" else "a string of another shape" \
                if isinstance(token, str) else type(token).__name__
            raise InvalidParameter(f"token is not allowed ({got}): it must be the token `bayesdp serve "
                                   "analysts add` printed, bdp_<analyst id>_<secret>")
        self.url = url.rstrip("/")
        self.analyst_id = token.split("_")[1]
        self.retry_for = check_nonnegative("retry_for", retry_for)
        self._http = httpx.Client(base_url=self.url, timeout=check_positive("timeout", timeout),
                                  headers={"Authorization": f"Bearer {token}"})

    def __repr__(self) -> str:
        return f"<bayesdp.serve.Client {self.url} analyst {self.analyst_id}>"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check(self) -> None:
        """Ask the service whether it accepts this token (raises InvalidParameter if not)."""
        try:
            self._call("GET", "/v1/datasets")  # reads no ledger, so creates none
        except ServiceError as exc:
            if exc.status == 401:
                raise InvalidParameter(f"token for analyst {self.analyst_id} is not accepted by "
                                       f"{self.url}: it is wrong or was revoked") from None
            raise

    def _call(self, method: str, path: str, body: Any = None, key: str | None = None) -> httpx.Response:
        headers = {"Idempotency-Key": key} if key else {}
        deadline = time.monotonic() + self.retry_for
        attempt = 0
        while True:
            wait: float | None = None
            try:
                response = self._http.request(method, path, json=body, headers=headers)
            except httpx.TransportError as exc:
                # A request that never reached the service is safe to send again; one that may
                # have been processed only if it cannot spend twice.
                if method == "POST" and key is None and not isinstance(exc, httpx.ConnectError):
                    raise ServiceUnavailable(f"the connection to {self.url} failed during the "
                                             f"request ({type(exc).__name__}: {exc}); it may have "
                                             "been processed: see releases()") from None
                failure, status = f"cannot reach {self.url} ({type(exc).__name__}: {exc})", 0
            else:
                if response.status_code not in (429, 503) or _error(response).get("code") in FINAL:
                    break
                failure, status = _message(response), response.status_code
                wait = _retry_after(response.headers.get("retry-after"))
            backoff = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt)
            delay = wait if wait is not None else random.uniform(0, backoff)
            if time.monotonic() + delay > deadline:
                raise ServiceUnavailable(f"{failure}; gave up after {attempt + 1} attempt(s) in "
                                         f"{self.retry_for:g} s (Client retry_for=)", status, wait)
            time.sleep(delay)
            attempt += 1
        if response.status_code >= 400:
            message, error = _message(response), _error(response)
            if response.status_code == 403:
                raise BudgetExceeded(message)
            if response.status_code == 400 and isinstance(error.get("sql"), dict):
                raise SqlError(message, start=error["sql"]["start"], end=error["sql"]["end"])
            if response.status_code == 400:
                raise InvalidParameter(message)
            raise ServiceError(f"{response.status_code}: {message}", response.status_code)
        return response

    def _json(self, method: str, path: str, body: Any = None, key: str | None = None) -> Any:
        response = self._call(method, path, body, key)
        try:
            return response.json()
        except ValueError:
            raise ServiceError(f"{response.status_code}: the service's answer is not JSON",
                               response.status_code) from None

    def datasets(self) -> list[str]:
        """The names of the datasets this service offers."""
        return [d["name"] for d in self._json("GET", "/v1/datasets")["datasets"]]

    def metadata(self) -> dict[str, Any]:
        """The public metadata of the datasets and holdouts (schema, bounds, public keys, budgets)."""
        return dict(self._json("GET", "/v1/datasets"))

    def budget(self) -> dict[str, Guarantee]:
        """What remains of this analyst's budget, per dataset."""
        return {name: guarantee_from_json(b["remaining"])
                for name, b in self._json("GET", "/v1/budget")["datasets"].items()}

    def table(self, name: str) -> RemoteTable:
        """A dataset of the service, with the builder's verbs (where, group_by, agg)."""
        offered = {d["name"]: d for d in self.metadata()["datasets"]}
        if name not in offered:
            raise invalid("name", name, f"one of the service's datasets {sorted(offered)}")
        domains = {c["name"]: tuple(c["domain"]) for c in offered[name]["columns"] if c.get("domain")}
        return RemoteTable(self, name, domains=domains)

    def sql(self, query: str, *, epsilon: float | None = None, delta: float | None = None) -> Release:
        """Answer a SQL query privately on the service, as `bdp.sql` does locally (the same
        dialects; the table is the dataset the query's FROM names, its metadata the dataset's
        public schema). Spends this analyst's budget; a refused query raises `SqlError`."""
        body: dict[str, Any] = {"sql": query}
        body.update({k: v for k, v in (("epsilon", epsilon), ("delta", delta)) if v is not None})
        doc = self._json("POST", "/v1/releases", body, key=str(uuid.uuid4()))
        _warn(doc)
        return release_from_json(doc)

    def releases(self) -> pd.DataFrame:
        """This analyst's earlier releases, oldest first: `id` (for `get_release`), `dataset`,
        `label`, `created` (UTC) and the `guarantee` each spent."""
        rows = self._json("GET", "/v1/releases")["releases"]
        return pd.DataFrame({"id": [r["id"] for r in rows], "dataset": [r["dataset"] for r in rows],
                             "label": [r["label"] for r in rows],
                             "created": pd.to_datetime([r["created"] for r in rows], unit="s", utc=True),
                             "guarantee": [guarantee_from_json(r["guarantee"]) for r in rows]})

    def get_release(self, release_id: str) -> Release:
        """One of this analyst's earlier releases, fetched again (it is not released a second
        time: `release` always means spending budget)."""
        return release_from_json(self._json("GET", f"/v1/releases/{_segment(release_id)}"))

    def holdout_query(self, holdout: str, queries: str | Sequence[str]) -> list[HoldoutAnswer]:
        """Row-wise SQL expressions with values in [0, 1], answered by the service's reusable holdout."""
        batch = [queries] if isinstance(queries, str) else list(queries)
        doc = self._json("POST", f"/v1/holdouts/{_segment(holdout)}/queries", {"queries": batch})
        return [HoldoutAnswer(a["value"], source=a["source"], budget_left=a["budget_left"])
                for a in doc["answers"]]

    def holdout_train(self, holdout: str) -> pd.DataFrame:
        """The training part of a holdout (it is not private: the curator shares it)."""
        return pd.read_csv(StringIO(self._call("GET", f"/v1/holdouts/{_segment(holdout)}/train").text))

    def synthetic(self, dataset: str) -> pd.DataFrame:
        """This analyst's synthetic copy of a dataset: released once against the budget, then free."""
        path = f"/v1/synthetic/{_segment(dataset)}"
        self._call("POST", path, key=dataset)
        return pd.read_csv(StringIO(self._call("GET", path).text))


@dataclass(frozen=True)
class RemoteTable:
    client: Client
    name: str
    filters: tuple[str, ...] = ()
    domains: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # the published public keys

    def where(self, condition: str) -> RemoteTable:
        """Keep rows where the SQL expression holds (checked by the service)."""
        if not isinstance(condition, str) or not condition.strip():
            raise invalid("condition", condition, "a non-empty SQL boolean expression")
        return replace(self, filters=(*self.filters, condition))

    def group_by(self, columns: str | Sequence[str], keys: Sequence[Any] | None = None) -> RemoteGrouped:
        """Group by `columns`; without `keys`, the keys the service publishes for them (every
        combination, each released), or private partition selection when one has none."""
        cols = [columns] if isinstance(columns, str) else list(columns)
        if keys is None and cols and all(c in self.domains for c in cols):
            combos = list(itertools.product(*(self.domains[c] for c in cols)))
            keys = [k[0] for k in combos] if len(cols) == 1 else combos
        return RemoteGrouped(self, tuple(cols), None if keys is None else tuple(keys))

    def agg(self, **aggregates: Aggregate) -> RemoteQuery:
        return RemoteGrouped(self, (), None).agg(**aggregates)


@dataclass(frozen=True)
class RemoteGrouped:
    table: RemoteTable
    by: tuple[str, ...]
    keys: tuple[Any, ...] | None

    def agg(self, **aggregates: Aggregate) -> RemoteQuery:
        for name, a in aggregates.items():
            if not isinstance(a, Aggregate):
                raise invalid(name, a, "an aggregate such as bdp.count() or bdp.sum('col', bounds=(0, 1))")
        spec: dict[str, Any] = {"aggregates": {n: a.spec() for n, a in aggregates.items()}}
        if self.table.filters:
            spec["where"] = list(self.table.filters)
        if self.by:
            spec["group_by"] = list(self.by)
            if self.keys is not None:
                spec["keys"] = [list(k) if isinstance(k, tuple) else k for k in self.keys]
        return RemoteQuery(self.table.client, self.table.name, spec)


@dataclass(frozen=True)
class RemoteQuery:
    client: Client
    dataset: str
    spec: dict[str, Any]

    def _body(self, options: dict[str, Any]) -> dict[str, Any]:
        return {"dataset": self.dataset, "spec": {**self.spec, **{k: v for k, v in options.items()
                                                                   if v is not None}}}

    def preview(self, epsilon: float, delta: float = 0.0, *, max_groups_per_unit: int | None = None,
                max_rows_per_group: int | None = None, alpha: float | None = None,
                noise: str | None = None, selection_weight: float | None = None,
                group_size: int | None = None) -> pd.DataFrame:
        """Expected accuracy from public parameters, computed by the service (free). The frame's
        `attrs` say what the budget's filter would make of the release now: `admitted`, `refused`
        (why not, or None), `used` (the share of the budget spent) and `uses` (the share it would add)."""
        body = self._body(dict(epsilon=epsilon, delta=delta, max_groups_per_unit=max_groups_per_unit,
                               max_rows_per_group=max_rows_per_group, alpha=alpha, noise=noise,
                               selection_weight=selection_weight))
        body["group_size"] = group_size
        doc = self.client._json("POST", "/v1/preview", body)
        _warn(doc)
        frame = pd.DataFrame(doc["rows"], columns=doc["columns"])
        frame.attrs.update({k: doc[k] for k in ("admitted", "refused", "used", "uses")})
        return frame

    def release(self, epsilon: float, delta: float = 0.0, *, max_groups_per_unit: int | None = None,
                max_rows_per_group: int | None = None, alpha: float | None = None,
                noise: str | None = None, selection_weight: float | None = None,
                label: str | None = None) -> Release:
        """Run the release on the service (spending this analyst's budget); options left out take
        the dataset's defaults."""
        body = self._body(dict(epsilon=epsilon, delta=delta, max_groups_per_unit=max_groups_per_unit,
                               max_rows_per_group=max_rows_per_group, alpha=alpha, noise=noise,
                               selection_weight=selection_weight, label=label))
        doc = self.client._json("POST", "/v1/releases", body, key=str(uuid.uuid4()))
        _warn(doc)
        return release_from_json(doc)


def _segment(value: Any) -> str:
    """One path segment: an id or name sent as data, never as a path ("../budget" stays one segment)."""
    if not isinstance(value, str) or not value:
        raise invalid("id", value, "a non-empty string")
    return quote(value, safe="")


# 503s that answer the request (cut off at its deadline after spending, or stopped): sending it
# again would find its idempotency key used up, not a busy service.
FINAL = frozenset({"deadline", "stopped"})


def _error(response: httpx.Response) -> dict[str, Any]:
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        return {}
    return error if isinstance(error, dict) else {}


def _message(response: httpx.Response) -> str:
    message = _error(response).get("message")
    return message if isinstance(message, str) else f"HTTP {response.status_code} {response.reason_phrase}"


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header: a number of seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if value is None:
        return None
    if value.strip().isdigit():
        return float(value.strip())
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _warn(doc: dict[str, Any]) -> None:
    """The service's usefulness warnings, raised here as the local builder raises them."""
    for message in doc.get("warnings", []):
        warnings.warn(message, UserWarning, stacklevel=3)
