"""Warnings caught per request. `warnings.catch_warnings` swaps the process's filters and hook,
so requests running at once in threads would catch, or lose, each other's warnings (a curator
warning with exact counts could reach another analyst's preview, or another request's audit
entry). Instead `caught()` gives each request its own list in a context variable, which the
threads started for the request copy (`contextvars.copy_context`), and one process-wide hook
hands each warning to the list of the context that raised it, or to the previous hook outside
any request."""

from __future__ import annotations

import contextvars
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

_current: contextvars.ContextVar[list[warnings.WarningMessage] | None] = contextvars.ContextVar(
    "bayesdp_serve_caught", default=None)
_lock = threading.Lock()
_previous = warnings.showwarning


def _show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
          file: TextIO | None = None, line: str | None = None) -> None:
    mine = _current.get()
    if mine is None:
        _previous(message, category, filename, lineno, file, line)
    else:
        mine.append(warnings.WarningMessage(message, category, filename, lineno, file, line))


def _install() -> None:
    """The hook, and every warning shown each time it is raised (as each request must see
    them): once, and again whenever something (a test's catch_warnings) put the previous back."""
    global _previous
    with _lock:
        if warnings.showwarning is not _show:
            _previous = warnings.showwarning
            warnings.showwarning = _show
        if not warnings.filters or warnings.filters[0][:3] != ("always", None, Warning):
            warnings.simplefilter("always")


@contextmanager
def caught() -> Iterator[list[warnings.WarningMessage]]:
    """The warnings raised in this context (this thread, and threads that copy its context)
    while the block runs; a nested block takes its own."""
    _install()
    mine: list[warnings.WarningMessage] = []
    token = _current.set(mine)
    try:
        yield mine
    finally:
        _current.reset(token)


def in_context(target: Any) -> Any:
    """`target` to run in a new thread within the current context (and so its `caught()`)."""
    context = contextvars.copy_context()
    return lambda *args: context.run(target, *args)
