"""Mongo health (#15.2, backend side): the caller's timeout bounds the probe, server
selection included, and a refusal of our credentials is reported as auth.

The black-hole test uses a local TCP socket that accepts and never answers (no MongoDB
involved); the auth test injects a driver error into a ``mongomock`` client (a FAKE).
"""

from __future__ import annotations

import socket
import time

import pytest

from tests.support.fixtures.mongo import db_name, make_adapter, mongo_client  # noqa: F401
from tests.support.bounds import bounded_by


@pytest.fixture
def black_hole():
    """A listening socket that never replies: the driver connects and then waits."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield f"mongodb://127.0.0.1:{server.getsockname()[1]}/"
    server.close()


def test_timeout_bounds_server_selection(black_hole):
    from backends.mongo import MongoBackendAdapter

    # The client's own selection timeout (300 s) is far longer than the probe's.
    adapter = MongoBackendAdapter(black_hole, server_selection_timeout_ms=300000,
                                  connect_timeout_ms=300000)
    try:
        started = time.monotonic()
        assert adapter.check_health(timeout=0.5) is False
        assert time.monotonic() - started < bounded_by(0.5)
        started = time.monotonic()
        details = adapter.health_details(0.5)
        assert time.monotonic() - started < bounded_by(0.5)
        assert details["reachable"] is False
        assert details["category"] in ("unreachable", "transient")
    finally:
        adapter.close()


def test_auth_refusal_is_reported_as_auth(make_adapter, monkeypatch):
    from pymongo.errors import OperationFailure

    adapter = make_adapter()

    class Refusing:
        def command(self, *a, **k):
            raise OperationFailure("Authentication failed on secret-host", code=18)

    monkeypatch.setattr(adapter, "_client", type("C", (), {"admin": Refusing()})())
    assert adapter.check_health() is False
    details = adapter.health_details(1.0)
    assert details["category"] == "auth" and details["error"] == "BackendAuthError"
    assert details["reachable"] is True  # the server answered; it refused us
    assert "secret-host" not in str(details)
