"""The curator's service: config, analysts and tokens, the HTTP API and the Python client.

`bayesdp serve` runs it (bayesdp.commands.serve); `bdp.connect(url, token)` talks to it. The
service calls the library's own release paths and adds no privacy logic of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bayesdp.serve.client import Client


def connect(url: str, token: str, *, timeout: float = 120.0, retry_for: float = 30.0) -> Client:
    """A client of a bayesdp service (`pip install 'bayesdp[serve]'`): `.datasets()`, `.budget()`,
    `.table(name)` with the builder's verbs, returning the same `Release` as a local release.
    Checks the token with the service first (a refused one raises InvalidParameter); requests
    are retried with backoff for at most `retry_for` seconds (see `Client`)."""
    from bayesdp.serve.client import Client

    client = Client(url, token, timeout=timeout, retry_for=retry_for)
    try:
        client.check()
    except BaseException:
        client.close()
        raise
    return client


__all__ = ["connect"]
