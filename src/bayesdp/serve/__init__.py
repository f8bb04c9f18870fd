"""The curator's service: config, analysts and tokens, the HTTP API and the Python client.

`bayesdp serve` runs it (bayesdp.commands.serve); `bdp.connect(url, token)` talks to it. The
service calls the library's own release paths and adds no privacy logic of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bayesdp.serve.client import Client


def connect(url: str, token: str, *, timeout: float = 120.0) -> Client:
    """A client of a bayesdp service (`pip install 'bayesdp[serve]'`): `.datasets()`, `.budget()`,
    `.table(name)` with the builder's verbs, returning the same `Release` as a local release."""
    from bayesdp.serve.client import Client

    return Client(url, token, timeout=timeout)


__all__ = ["connect"]
