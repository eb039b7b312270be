"""What kind of deployment we are talking to, read from ``hello``.

Multi-document transactions need a replica set or a mongos; commit_turn with events
depends on them, so we ask once and cache the answer instead of gating on a version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

STANDALONE = "standalone"
REPLICA_SET = "replica set"
SHARDED = "sharded"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Topology:
    kind: str
    transactions: bool
    detail: str = ""
    #: the replica set's name, this member's role in it ("primary", "secondary", "other"),
    #: the primary it names and the members it lists (empty outside a replica set)
    set_name: str = ""
    role: str = ""
    primary: str = ""
    members: tuple[str, ...] = ()

    @property
    def change_streams(self) -> bool:
        """A replica set or mongos streams changes from its oplog; a standalone has none."""
        return self.kind in (REPLICA_SET, SHARDED)


def topology_from_hello(hello: Mapping[str, Any]) -> Topology:
    """Classify a ``hello`` (or legacy ``isMaster``) reply."""
    if hello.get("msg") == "isdbgrid":
        return Topology(SHARDED, True)
    if hello.get("setName"):
        writable = hello.get("isWritablePrimary", hello.get("ismaster"))
        role = "primary" if writable else "secondary" if hello.get("secondary") else "other"
        members = tuple(str(h) for h in (*hello.get("hosts", ()), *hello.get("passives", ())))
        return Topology(REPLICA_SET, True, set_name=str(hello["setName"]), role=role,
                        primary=str(hello.get("primary") or ""), members=members)
    return Topology(STANDALONE, False)


def probe_topology(client: Any) -> Topology:
    """Ask the server. A client that cannot answer ``hello`` at all (an in-process fake
    such as mongomock) is treated as a standalone: it cannot run transactions either."""
    try:
        reply = client.admin.command("hello")
    except NotImplementedError:
        return Topology(STANDALONE, False, "client cannot answer hello (in-process fake)")
    return topology_from_hello(reply)


TRANSACTIONS_ADVICE = (
    "this MongoDB deployment is a standalone server, which cannot run the multi-document "
    "transaction that writes a turn's state and events together; run MongoDB as a replica "
    "set (a single-node replica set is enough: start mongod with --replSet rs0 and run "
    "rs.initiate()) or behind mongos, or commit turns without events"
)
