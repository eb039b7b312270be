"""Where each session of a SQL deployment lives: the engine's placement over the shard
list (``SEMVEC_STATE_DB_SHARDS``, ENGINE-WIRE section 10), decided here and nowhere else.

A deployment is a primary (``DATABASE_URL``: the engine's metadata, and the events
appended outside a turn) plus an ordered list of shards holding the session state, the
events of each turn and (a flavour's) the items, each on its session's shard. With no
shard list the primary is the only shard. A session's shard is rendezvous hashing over
the list ORDER: the index ``i`` with the largest ``blake2b(f"{i}:{session_id}")`` digest
(compared as bytes); the DSN text plays no part, so reordering the list moves sessions.

Every SQL code path that touches one session asks :meth:`Placement.for_session`; every
path that answers for the whole store walks :meth:`Placement.state_databases` (state,
items) or :meth:`Placement.databases` (events: the primary too). Importing this module
does not import psycopg.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Iterable, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from backends.postgres.database import Database

def shard_index(session_id: str, count: int) -> int:
    """The index in ``[0, count)`` the engine routes ``session_id`` to (HRW, blake2b)."""
    if count <= 1:
        return 0
    best, best_digest = 0, b""
    for i in range(count):
        digest = hashlib.blake2b(f"{i}:{session_id}".encode()).digest()
        if digest > best_digest:
            best, best_digest = i, digest
    return best


class Placement:
    """The databases of one deployment and the rule that places a session among them."""

    def __init__(self, primary: "Database", shards: Sequence["Database"]) -> None:
        self.primary = primary
        self.shards: tuple["Database", ...] = tuple(shards) or (primary,)
        self._single = len(self.shards) == 1
        #: databases no longer in the shard list (``doctor --shards-from``): no session is
        #: placed on them, so every row they hold is one the engine never reads
        self.retired: tuple["Database", ...] = ()

    @property
    def sharded(self) -> bool:
        """Whether state lives anywhere but the primary alone."""
        return not (self._single and self.shards[0] is self.primary)

    def index_of(self, session_id: str) -> int:
        return 0 if self._single else shard_index(session_id, len(self.shards))

    def for_session(self, session_id: str) -> "Database":
        """The database that holds (or will hold) ``session_id``."""
        return self.shards[self.index_of(session_id)]

    def places(self, db: "Database", session_id: str) -> bool:
        """Whether the routing reads ``session_id`` on ``db`` (a row anywhere else is
        one the engine never reads: misplaced)."""
        return self.for_session(session_id) is db

    def state_databases(self) -> list["Database"]:
        """Every database that holds session state, once each, in shard order."""
        return list(dict.fromkeys(self.shards))

    def databases(self) -> list["Database"]:
        """Every database of the deployment once: the primary first, then the shards
        (then any retired ones a doctor run was given)."""
        return list(dict.fromkeys((self.primary, *self.shards, *self.retired)))

    def group(self, session_ids: Iterable[str]) -> list[tuple["Database", list[str]]]:
        """``session_ids`` grouped by the database that holds each, in shard order."""
        groups: dict["Database", list[str]] = {db: [] for db in self.state_databases()}
        for sid in session_ids:
            groups[self.for_session(sid)].append(sid)
        return [(db, ids) for db, ids in groups.items() if ids]

    def label(self, db: "Database") -> str:
        """``primary``, ``shard 2`` or ``primary, shard 0``: how output names a database."""
        roles = ["primary"] if db is self.primary else []
        roles += [f"shard {i}" for i, shard in enumerate(self.shards)
                  if shard is db and self.sharded]
        roles += [f"retired {i} (no longer in the shard list)"
                  for i, old in enumerate(self.retired) if old is db]
        return ", ".join(roles) or "primary"

    def close(self) -> None:
        for db in self.databases():
            db.close()
