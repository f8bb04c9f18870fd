"""The API's OpenAPI 3.1 description, served at /openapi.json and as a page at /docs."""

from __future__ import annotations

import html
from typing import Any

_SPEC = {"type": "object", "description": "a release spec in the format of `bayesdp release --spec` "
         "(privacy_unit may be left out: the dataset's is used)",
         "properties": {"group_by": {"type": "array", "items": {"type": "string"}},
                        "keys": {"type": "array"}, "where": {"type": "array", "items": {"type": "string"}},
                        "aggregates": {"type": "object"}, "epsilon": {"type": "number"},
                        "delta": {"type": "number"}, "max_groups_per_unit": {"type": "integer"},
                        "max_rows_per_group": {"type": "integer"}, "alpha": {"type": "number"},
                        "noise": {"enum": ["laplace", "gaussian"]}, "label": {"type": "string"}},
         "required": ["aggregates"]}
_REQUEST = {"type": "object", "required": ["dataset", "spec"],
            "properties": {"dataset": {"type": "string"}, "spec": _SPEC,
                           "group_size": {"type": "integer", "description": "preview only"}}}
_SQL_REQUEST = {"type": "object", "required": ["sql"],
                "properties": {"sql": {"type": "string", "description": "one SELECT in the dialects of "
                                       "`bayesdp sql` (BigQuery's WITH DIFFERENTIAL_PRIVACY clause, or plain "
                                       "SQL); its metadata is the dataset's public schema: privacy unit, "
                                       "bounds, public keys (domains) and release options"},
                               "dataset": {"type": "string", "description": "default: the table the "
                                           "query's FROM names"},
                               "epsilon": {"type": "number", "description": "if the query gives none"},
                               "delta": {"type": "number"},
                               "group_size": {"type": "integer", "description": "preview only"}}}
_BODY = {"oneOf": [_REQUEST, _SQL_REQUEST]}
_IDEMPOTENCY = {"name": "Idempotency-Key", "in": "header", "required": False, "schema": {"type": "string"},
                "description": "a retried request with the same key returns the stored result and "
                               "spends nothing"}
_ERRORS = {"400": "refused input (the message says why; refused SQL also gives error.sql = {start, end}, "
                  "the characters of the construct refused)", "401": "missing, wrong or revoked token",
           "403": "the budget would be exceeded (the message says what remains)",
           "404": "unknown dataset, holdout or release (or another analyst's, or a dataset you may "
                  "not use)",
           "409": "a request with this idempotency key is running, or stopped after spending",
           "413": "body too large", "422": "an idempotency key reused for a different request",
           "429": "rate limit, or too many failed authentications from this address or at this "
                  "analyst id; see Retry-After", "500": "internal error: only an error id is returned",
           "503": "the service cannot record spends (a full disk says so; any other cause is in the "
                  "curator's log); see Retry-After"}

# (method, path, summary, request body schema or None, extra parameters)
_ENDPOINTS: list[tuple[str, str, str, dict[str, Any] | None, list[dict[str, Any]]]] = [
    ("get", "/health", "liveness (no token): 503 while the service cannot record spends", None, []),
    ("get", "/v1/datasets", "datasets and holdouts: public metadata only (schema, bounds, public keys, "
     "budgets)", None, []),
    ("get", "/v1/budget", "your budget per dataset: total, spent (the total under the privacy filter "
     "named in `filter`), remaining (the largest next spend), `used` (the share spent, in the "
     "filter's own sums), the synthetic data released from it, and where the dataset offers "
     "synthetic data, `synthetic_spend`: what the filter would make of asking for them now (as a "
     "preview's `admitted`, `refused`, `used` and `uses`; nothing to spend once released)", None, []),
    ("post", "/v1/preview", "expected error of a spec or SQL from public parameters (free), the "
     "guarantee its release would spend, and, from those parameters and your ledger only: `admitted` "
     "(whether the budget's privacy filter lets its spends through now; `refused` says why not), "
     "`used` (the share of the budget spent so far) and `uses` (the share they would add), in the "
     "filter's own sums as in /v1/budget; for a spec, `largest_epsilon`: the largest ε the filter "
     "would admit for it now", _BODY, []),
    ("post", "/v1/releases", "run a private release of a spec or SQL: values, intervals, guarantee, "
     "explanation and the remaining budget (spends before any noise is drawn)", _BODY, [_IDEMPOTENCY]),
    ("get", "/v1/releases", "your releases", None, []),
    ("get", "/v1/releases/{id}", "one of your releases", None, []),
    ("get", "/v1/releases/{id}/report", "its HTML report", None, []),
    ("post", "/v1/holdouts/{name}/queries", "answer row-wise SQL expressions with values in [0, 1] "
     "through the reusable holdout (Thresholdout)",
     {"type": "object", "properties": {"queries": {"type": "array", "items": {"type": "string"}}}}, []),
    ("get", "/v1/holdouts/{name}/train", "the holdout's training part (CSV)", None, []),
    ("post", "/v1/synthetic/{dataset}", "release synthetic data once, against your budget (a repeat "
     "returns the same release for free)", None, []),
    ("get", "/v1/synthetic/{dataset}", "download your synthetic data (CSV, free)", None, []),
]


def openapi_schema() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for method, path, summary, body, params in _ENDPOINTS:
        op: dict[str, Any] = {"summary": summary,
                              "responses": {"200": {"description": "OK"},
                                            **{k: {"description": v} for k, v in _ERRORS.items()}}}
        names = [p.strip("{}") for p in path.split("/") if p.startswith("{")]
        op["parameters"] = [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
                            for n in names] + params
        if body is not None:
            op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
        if path != "/health":
            op["security"] = [{"bearer": []}]
        paths.setdefault(path, {})[method] = op
    return {"openapi": "3.1.0",
            "info": {"title": "bayesdp serve", "version": "1",
                     "description": "The curator's differential privacy service: analysts see only "
                                    "private outputs, spent against their budgets."},
            "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
            "paths": paths}


def docs_page() -> str:
    """A self-contained page listing the endpoints (no external scripts)."""
    rows = "".join(f"<tr><td><code>{m.upper()}</code></td><td><code>{html.escape(p)}</code></td>"
                   f"<td>{html.escape(s)}</td></tr>" for m, p, s, _, _ in _ENDPOINTS)
    errors = "".join(f"<li><code>{k}</code>: {html.escape(v)}</li>" for k, v in _ERRORS.items())
    return ("<!doctype html><html><head><meta charset='utf-8'><title>bayesdp serve API</title>"
            "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}td{padding:.3em .8em;"
            "border-bottom:1px solid #ddd;vertical-align:top}</style></head><body>"
            "<h1>bayesdp serve API</h1><p>Send <code>Authorization: Bearer &lt;token&gt;</code> on "
            "every request but <code>/health</code>. Machine-readable: <a href='/openapi.json'>"
            f"/openapi.json</a> (OpenAPI 3.1).</p><table>{rows}</table><h2>Errors</h2><ul>{errors}</ul>"
            "</body></html>")
