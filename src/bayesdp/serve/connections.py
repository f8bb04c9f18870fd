"""The HTTP connection: uvicorn's h11 protocol with a deadline on a request's headers.

uvicorn closes an idle keep-alive connection, but waits forever for the rest of a request's
headers: a client sending them a byte at a time holds a connection (a socket and a buffer) as
long as it likes. The request body has its own deadline in the app (`limits.body_seconds`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class TimedH11(H11Protocol):
    """Closes a connection whose next request's headers do not arrive within `header_seconds`
    of its opening or of its last response."""

    header_seconds = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._headers_timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        if self._headers_timer is not None:
            self._headers_timer.cancel()
        self._headers_timer = self.loop.call_later(self.header_seconds, self._headers_late)

    def _headers_late(self) -> None:
        # IDLE: no request's headers complete since the timer was armed (a request being
        # read or answered is past IDLE, and its response re-arms the timer).
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._headers_timer is not None:
            self._headers_timer.cancel()
        super().connection_lost(exc)


def timed_h11(header_seconds: float) -> type[TimedH11]:
    """The protocol class for uvicorn's `http=` option, with this deadline for headers."""
    return type("TimedH11", (TimedH11,), {"header_seconds": header_seconds})
