"""Health probes of a MongoDB deployment, bounded by pymongo's client-side operation
timeout (``pymongo.timeout``), which covers server selection, the connection and the
command, so a host that does not answer costs the probe's timeout, not
serverSelectionTimeoutMS; every failure is reported, never raised.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from backends.errors import BackendAuthError, category_of
from backends.mongo.errors import translate_error


def answers(client: Any, timeout: float) -> bool:
    """Whether the deployment answers ``ping`` within ``timeout``; never raises."""
    try:
        with deadline(timeout):
            client.admin.command("ping")
        return True
    except Exception:  # noqa: BLE001 - health answers the question, never raises
        return False


def details(adapter: Any, timeout: float) -> dict[str, Any]:
    """Reachability, topology and durability within ``timeout``; never raises. A
    refusal of our credentials is reported as ``category: auth`` (the server
    answered), apart from an unreachable host."""
    details: dict[str, Any] = {
        "backend": adapter.name,
        "database": adapter.settings.database,
        "item_sync": adapter.settings.item_sync,
        "session_ttl_s": adapter.settings.session_ttl_s,
    }
    try:
        with deadline(timeout):
            adapter._client.admin.command("ping")
            topo = adapter.topology()
            support = adapter._indexes.search_support()
    except Exception as exc:  # noqa: BLE001
        mapped = translate_error(exc, "")
        auth = isinstance(mapped, BackendAuthError)
        details.update(reachable=auth, error=type(mapped).__name__,
                       category=category_of(mapped).value, durable=False)
        if auth:
            details["reason"] = "the server refused the credentials or privileges"
        return details
    details.update(
        reachable=True,
        topology=topo.kind,
        transactions_supported=topo.transactions,
        search_indexes_supported=support.supported,
        durable=topo.transactions,
        durability_reason=(
            "replicated: writes can be acknowledged by a majority"
            if topo.transactions else
            "standalone server: a single copy of every session, lost with its disk; "
            "run a replica set"
        ),
    )
    if not support.supported:
        details["search_indexes_detail"] = support.reason
    return details


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """pymongo's client-side operation timeout (at least 50 ms) around the block."""
    import pymongo

    with pymongo.timeout(max(0.05, float(seconds))):
        yield
