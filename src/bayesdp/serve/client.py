"""The Python client: the builder's verbs against a remote service, returning the same Release.

    db = bdp.connect("http://127.0.0.1:8000/", token)
    r = (db.table("hie").group_by("coins", keys=[0, 25, 50, 95, 100])
           .agg(persons=bdp.count_units(), spending=bdp.mean("meddol", bounds=(0, 3000)))
           .release(epsilon=1.0))

A release is sent with an idempotency key and retried with the same key after a network
failure, so a retry never draws new noise (that would be an averaging attack) nor spends twice.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from io import StringIO
from typing import Any

import httpx
import pandas as pd

from bayesdp.errors import BayesdpError, BudgetExceeded, InvalidParameter, invalid
from bayesdp.holdout import HoldoutAnswer
from bayesdp.privacy import Guarantee
from bayesdp.serve.wire import guarantee_from_json, release_from_json
from bayesdp.sql import SqlError
from bayesdp.tables import Aggregate, Release

RETRIES = 3


class ServiceError(BayesdpError):
    """The service refused a request; `status` is the HTTP status, the message the service's."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class Client:
    """A connection to a bayesdp service with one analyst's token."""

    def __init__(self, url: str, token: str, *, timeout: float = 120.0) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise invalid("url", url, "the service's http:// or https:// address")
        self._http = httpx.Client(base_url=url.rstrip("/"), timeout=timeout,
                                  headers={"Authorization": f"Bearer {token}"})

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, body: Any = None, key: str | None = None) -> httpx.Response:
        headers = {"Idempotency-Key": key} if key else {}
        for attempt in range(RETRIES):
            try:
                response = self._http.request(method, path, json=body, headers=headers)
                break
            except httpx.TransportError:
                # Only a request with an idempotency key (or one that spends nothing) is retried.
                if attempt == RETRIES - 1 or (method == "POST" and key is None):
                    raise
        if response.status_code >= 400:
            try:
                error = response.json()["error"]
                message = error["message"]
            except (ValueError, KeyError, TypeError):
                error, message = {}, response.text
            if response.status_code == 403:
                raise BudgetExceeded(message)
            if response.status_code == 400 and "sql" in error:
                raise SqlError(message, start=error["sql"]["start"], end=error["sql"]["end"])
            if response.status_code == 400:
                raise InvalidParameter(message)
            raise ServiceError(f"{response.status_code}: {message}", response.status_code)
        return response

    def _json(self, method: str, path: str, body: Any = None, key: str | None = None) -> Any:
        return self._call(method, path, body, key).json()

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
        if name not in self.datasets():
            raise invalid("name", name, f"one of the service's datasets {self.datasets()}")
        return RemoteTable(self, name)

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
        return release_from_json(self._json("GET", f"/v1/releases/{release_id}"))

    def holdout_query(self, holdout: str, queries: str | Sequence[str]) -> list[HoldoutAnswer]:
        """Row-wise SQL expressions with values in [0, 1], answered by the service's reusable holdout."""
        batch = [queries] if isinstance(queries, str) else list(queries)
        doc = self._json("POST", f"/v1/holdouts/{holdout}/queries", {"queries": batch})
        return [HoldoutAnswer(a["value"], source=a["source"], budget_left=a["budget_left"])
                for a in doc["answers"]]

    def holdout_train(self, holdout: str) -> pd.DataFrame:
        """The training part of a holdout (it is not private: the curator shares it)."""
        return pd.read_csv(StringIO(self._call("GET", f"/v1/holdouts/{holdout}/train").text))

    def synthetic(self, dataset: str) -> pd.DataFrame:
        """This analyst's synthetic copy of a dataset: released once against the budget, then free."""
        self._call("POST", f"/v1/synthetic/{dataset}", key=dataset)
        return pd.read_csv(StringIO(self._call("GET", f"/v1/synthetic/{dataset}").text))


@dataclass(frozen=True)
class RemoteTable:
    client: Client
    name: str
    filters: tuple[str, ...] = ()

    def where(self, condition: str) -> RemoteTable:
        """Keep rows where the SQL expression holds (checked by the service)."""
        if not isinstance(condition, str) or not condition.strip():
            raise invalid("condition", condition, "a non-empty SQL boolean expression")
        return replace(self, filters=(*self.filters, condition))

    def group_by(self, columns: str | Sequence[str], keys: Sequence[Any] | None = None) -> RemoteGrouped:
        cols = [columns] if isinstance(columns, str) else list(columns)
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
        """Expected accuracy from public parameters, computed by the service (free)."""
        body = self._body(dict(epsilon=epsilon, delta=delta, max_groups_per_unit=max_groups_per_unit,
                               max_rows_per_group=max_rows_per_group, alpha=alpha, noise=noise,
                               selection_weight=selection_weight))
        body["group_size"] = group_size
        doc = self.client._json("POST", "/v1/preview", body)
        _warn(doc)
        return pd.DataFrame(doc["rows"], columns=doc["columns"])

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


def _warn(doc: dict[str, Any]) -> None:
    """The service's usefulness warnings, raised here as the local builder raises them."""
    for message in doc.get("warnings", []):
        warnings.warn(message, UserWarning, stacklevel=3)
