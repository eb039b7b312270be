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
    if topo.set_name:
        details.update(replica_set_facts(topo, adapter._client.write_concern.document))
    return details


def replica_set_facts(topo: Any, write_concern: dict[str, Any]) -> dict[str, Any]:
    """The member's place in its replica set and what an acknowledgement means under the
    client's write concern (the URI's ``w=``; none given: the server's default, a
    majority on MongoDB 5.0+ without arbiters). A secondary refuses writes (not durable,
    naming the primary); ``w: majority`` means acknowledged writes survive a promotion."""
    facts: dict[str, Any] = {"replica_set": topo.set_name, "role": topo.role,
                             "members": ", ".join(topo.members), "writable": topo.role == "primary"}
    if topo.role != "primary":
        facts.update(durable=False, primary=topo.primary or "unknown",
                     durability_reason=f"a {topo.role} of replica set {topo.set_name}: writes "
                                       f"go to the primary {topo.primary or '(none elected)'}",
                     replication=f"{topo.role} of {topo.primary or 'no primary'}: read-only")
        return facts
    facts["replicas"] = max(0, len(topo.members) - 1)
    w = write_concern.get("w")
    majority = w == "majority" or (isinstance(w, int) and w > len(topo.members) // 2)
    facts["write_concern"] = write_concern or "server default"
    facts["replicated"] = bool(majority)
    members = f"replica set {topo.set_name}, {len(topo.members)} member(s)"
    if majority:
        facts["replication"] = (f"{members}: w={w} waits for a majority, so a promotion "
                                "keeps every acknowledged turn")
    elif w is None:
        facts["replication"] = (f"{members}: no w= on the URI, so the server's default write "
                                "concern decides (a majority on MongoDB 5.0+ without arbiters, "
                                "w=1 before); set w=majority on the URI to be sure")
    else:
        facts["replication"] = (f"{members}: w={w} does not wait for a majority: a promotion "
                                "can lose acknowledged turns; set w=majority on the URI")
    return facts


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """pymongo's client-side operation timeout (at least 50 ms) around the block."""
    import pymongo

    with pymongo.timeout(max(0.05, float(seconds))):
        yield
