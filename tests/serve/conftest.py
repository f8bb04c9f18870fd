"""One test service per test session (and xdist worker)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from serve_helpers import Server, serve, write_service


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("serve")
    s = serve(write_service(root))
    yield s
    s.stop()
