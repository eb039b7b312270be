"""Resharding a SQL deployment online: change its shard list (grow, shrink, reorder)
while the engine keeps writing on the old list, with the live migration's machinery (the
state file and its journal, resume after SIGKILL, one writer by flock, verify by content,
cutover, abort), restricted to the sessions whose shard changes.

The source is the deployment on the OLD list, the target the same primary on the NEW
list (``SEMVEC_STATE_DB_SHARDS``, ENGINE-WIRE section 10). A session *moves* when the
database the new list routes it to is not the one the old list routes it to; databases
are compared by identity (:func:`identity`: host, port, database, user and schema), never
by index, so a database kept in both lists keeps the sessions both routings put there.
Both adapters are seen through views (:class:`MovingSessions`, :class:`MovingEvents`)
that show only what moves, so a live migration between them copies, verifies and aborts
exactly the moves:

- sessions: the old view lists the rows each old shard holds for the sessions placed
  there that move (their ids streamed from the shard, no blob; then read by id in
  batches: each blob read once, its digest that of the bytes copied); the new view lists
  the moved sessions the new shards hold. Writes go through the new-list adapter, so
  they land on each session's new shard, and the old copy is never touched;
- events: a moved session's turn events live on its old shard (rows with its session
  id); they are read with one grouped pass per shard (``subjects_by_session``) and
  per-user reads (the engine's layout indexes ``user_id``, never ``session_id``), and
  written on the new shard (``SqlEventStore.restore_events`` routes by session id). An
  event row on an old shard moves with its session's routing even when the session's
  state is gone. Events on the primary (appended outside a turn) never move: every
  reader of the deployment reads the primary;
- items (pgvector): with their session, from the old shard to the new one.

After cutover the engine is switched to the new list; the old copies are then misplaced
rows the engine never reads, which ``semvecctl doctor --fix --apply`` removes.

Usable without the CLI::

    old = PostgresAdapter(primary, shards=old_list); new = PostgresAdapter(primary, shards=new_list)
    rs = Reshard(old, new)
    state = open_state("grow.state", rs)
    mig = reshard_migration(rs, state)
    run_reshard(mig, rs, follow=True, max_passes=10)
    result = cutover_reshard(mig, rs)   # after the writers stop: result.ok, result.receipt
"""

from __future__ import annotations

import fnmatch
import hashlib
import time
from typing import Any, Callable, Iterator, Sequence

from backends.contract import (
    Capability,
    LoadedState,
    MemoryEvent,
    OwnerFilter,
    SessionSummary,
    UNSCOPED,
    offers,
)
from backends.errors import BackendConfigError, UnsupportedOperation
from backends.transfer.batch_reads import chunks
from backends.migrate.finish import CutoverResult, cutover
from backends.migrate.passes import LiveMigration, PassResult, run_migration
from backends.migrate.state import MigrationState, fingerprint
from backends.migrate.verify import LiveVerifyReport, verify_live

#: what a reshard's state file is made with (a ``migrate`` of the same file is refused)
SETTINGS: dict[str, Any] = {"reshard": True}
#: the advice every cutover gives about the copies left on the old shards
DOCTOR_ADVICE = ("the moved sessions' old copies stay on their old shards as misplaced rows "
                 "the engine never reads: remove them with 'semvecctl doctor --fix --apply' "
                 "(on the new list) once the engine runs on it")
#: rows read by id per query
READ_BATCH = 500
#: moved sessions read, announced and written per batch: smaller than a migration's 2,500,
#: so reading the next batch (on the read-ahead thread) overlaps writing this one over
#: more of the pass (a 3 -> 4 reshard of 20k sessions moves 5k: two big batches overlap
#: little); bench/bench_shards.py
WRITE_BATCH = 500


def identity(db: Any) -> tuple:
    """What makes two databases of two placements one: their location (host, port,
    database, user: :func:`backends.postgres.config.database_key`) and schema."""
    from backends.postgres.config import database_key

    return (database_key(db.config.conninfo), db.config.schema)


class Reshard:
    """The old and the new shard list of one deployment (two SQL adapters on the same
    primary) and the rule that says which sessions move."""

    def __init__(self, old: Any, new: Any) -> None:
        for adapter in (old, new):
            if getattr(adapter, "placement", None) is None:
                raise UnsupportedOperation(
                    f"backend {getattr(adapter, 'name', '?')!r} has no shard list: resharding "
                    "is for the engine's SQL deployments (postgres, pgvector)")
        if identity(old.placement.primary) != identity(new.placement.primary):
            raise BackendConfigError("the old and the new shard list must belong to the same "
                                     "primary (DATABASE_URL)")
        self.old, self.new = old, new
        self.primary = identity(old.placement.primary)
        self._old = [identity(db) for db in old.placement.shards]
        self._new = [identity(db) for db in new.placement.shards]
        #: ``"{i}:"`` for each index of the longer list (the digests' prefixes)
        self._prefixes = [f"{i}:".encode() for i in range(max(len(self._old), len(self._new)))]

    # -- the rule --------------------------------------------------------------------

    def routes(self, session_id: str) -> tuple[int, int]:
        """The indexes the old and the new list route ``session_id`` to (HRW, as
        :func:`backends.postgres.placement.shard_index`; each ``i:session_id`` digest computed
        once for both lists)."""
        n, m = len(self._old), len(self._new)
        if n == 1 and m == 1:
            return 0, 0
        key = session_id.encode()
        digests = [hashlib.blake2b(prefix + key).digest() for prefix in self._prefixes]
        # the first largest wins, as there: ``index`` finds the first of equal maxima
        old = digests.index(max(digests[:n])) if n > 1 else 0
        new = digests.index(max(digests[:m])) if m > 1 else 0
        return old, new

    def moves(self, session_id: str) -> bool:
        """Whether the new list routes ``session_id`` to another database than the old."""
        i, j = self.routes(session_id)
        return self._old[i] != self._new[j]

    def destination_on(self, side: str, db: Any) -> Callable[[str], int | None]:
        """A test of one session id: placed on ``db`` by the ``side`` ("old" or "new")
        list and moving, it gives the index the new list routes it to; else None. Every
        id a pass streams from a shard goes through it, so the database's indexes are
        found once; and when the new list only adds databases after the old ones (a
        grow), a row of an old shard is first weighed against the added ones alone:
        most stay, and that takes half the digests."""
        shards = (self.old if side == "old" else self.new).placement.shards
        mine = {k for k, shard in enumerate(shards) if shard is db}
        n, m, prefixes = len(self._old), len(self._new), self._prefixes
        moving = [[a != b for b in self._new] for a in self._old]
        blake2b, routes = hashlib.blake2b, self.routes

        def test(session_id: str) -> int | None:
            i, j = routes(session_id)
            return j if (i if side == "old" else j) in mine and moving[i][j] else None

        grows = side == "old" and m > n and self._new[:n] == self._old and len(mine) == 1
        if not grows:
            return test
        (here,) = mine
        own, added = prefixes[here], prefixes[n:m]

        def test_grow(session_id: str) -> int | None:
            key = session_id.encode()
            mark = blake2b(own + key).digest()
            # placed here, a row stays unless an added database outweighs this one; a
            # row not placed here is no move of this shard's either way
            for prefix in added:
                if blake2b(prefix + key).digest() >= mark:
                    return test(session_id)
            return None

        return test_grow

    def moving_on(self, side: str, db: Any) -> Callable[[str], bool]:
        """Whether a session id is placed on ``db`` by the ``side`` list and moves."""
        destination = self.destination_on(side, db)
        return lambda session_id: destination(session_id) is not None

    @property
    def unchanged(self) -> bool:
        """Nothing can move: both lists name the same databases in the same order."""
        return self._old == self._new

    # -- names -----------------------------------------------------------------------

    @staticmethod
    def _listed(adapter: Any) -> list[str]:
        from backends.redaction import redact_uri

        return [redact_uri(dsn) for dsn in adapter.config.shards]

    @property
    def old_shards(self) -> list[str]:
        """The old list, each DSN redacted (empty: the primary alone)."""
        return self._listed(self.old)

    @property
    def new_shards(self) -> list[str]:
        return self._listed(self.new)

    def label(self, side: str) -> str:
        listed = self.old_shards if side == "old" else self.new_shards
        return (f"{self.old.config.display_uri} shards [{', '.join(listed)}]" if listed
                else f"{self.old.config.display_uri} (no shard list)")

    @property
    def switch_value(self) -> str:
        """``SEMVEC_STATE_DB_SHARDS`` for the new list, every DSN redacted."""
        return ",".join(self.new_shards)

    def fingerprints(self) -> tuple[str, str]:
        return (fingerprint(str(self.old.name), self.label("old")),
                fingerprint(str(self.new.name), self.label("new")))

    # -- views -----------------------------------------------------------------------

    def source(self) -> "MovingSessions":
        return MovingSessions(self, "old")

    def target(self) -> "MovingSessions":
        return MovingSessions(self, "new")


class MovingSessions:
    """One side of a reshard as an adapter showing only the moves: on the old side the
    moved sessions where the old list holds them, on the new side where the new list
    does. Everything else is the adapter's own (state reads and writes route by the
    side's list, items too)."""

    def __init__(self, reshard: Reshard, side: str) -> None:
        self._rs = reshard
        self._side = side
        self._inner = reshard.old if side == "old" else reshard.new
        self._events = MovingEvents(reshard, side)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"MovingSessions({self._side}: {self._rs.label(self._side)})"

    def state_store(self) -> Any:
        return self._inner.state_store()

    def event_store(self) -> "MovingEvents":
        return self._events

    def iter_sessions(self, *, owner_subject: OwnerFilter = UNSCOPED, match: str | None = None,
                      batch_size: int = 500) -> Iterator[SessionSummary]:
        """The moves this side holds (placed on this side's list), in session-id order."""
        moves = self._rs.moves
        for summary in self._inner.iter_sessions(owner_subject=owner_subject, match=match,
                                                 batch_size=batch_size):
            if moves(summary.session_id):
                yield summary

    def _moving(self, db: Any, columns: str, owner_subject: OwnerFilter,
                match: str | None) -> Iterator[Any]:
        """``columns`` (the id first) of the rows ``db`` holds for moves placed on it."""
        from backends.postgres.state import owner_clause

        clause, params = owner_clause(owner_subject)
        # placed on this list's ``db`` (a misplaced row is not a session this side holds)
        # and moving
        here = self._rs.destination_on(self._side, db)
        for row in db.stream(f"SELECT {columns} FROM {db.tables.state} WHERE {clause}", params):
            sid = row[0]
            if here(sid) is not None and (match is None or fnmatch.fnmatchcase(sid, match)):
                yield row

    def iter_versions(self, *, owner_subject: OwnerFilter = UNSCOPED, match: str | None = None,
                      batch_size: int = 500) -> Iterator[tuple[str, int]]:
        """``(session id, version)`` of every move, no blob read (catch-up passes)."""
        for db in self._inner.placement.state_databases():
            for sid, version in self._moving(db, "session_id, version", owner_subject, match):
                yield sid, int(version or 0)

    def iter_session_states(self, *, owner_subject: OwnerFilter = UNSCOPED,
                            match: str | None = None, batch_size: int = 500
                            ) -> Iterator[tuple[SessionSummary, LoadedState]]:
        """Every move's summary with its row: the ids streamed from each shard, the rows
        read by id, a batch per query; the digest is that of the bytes read. A damaged row
        raises as ``load_full`` would."""
        from backends.postgres.state import owner_clause, summary_and_state

        clause, params = owner_clause(owner_subject)
        size = max(1, min(batch_size, READ_BATCH))
        for db in self._inner.placement.state_databases():
            ids = (row[0] for row in self._moving(db, "session_id", owner_subject, match))
            for part in chunks(ids, size):
                sql = ("SELECT session_id, state_blob, version, owner_subject, pending_message,"
                       f" updated_at, drift_exempt FROM {db.tables.state}"
                       f" WHERE session_id = ANY(%s) AND {clause}")

                def work(conn: Any, sql: str = sql, part: list[str] = part) -> list[Any]:
                    # binary results: a blob comes as its bytes, not as hex text twice its size
                    return conn.execute(sql, (part, *params), binary=True).fetchall()

                for row in sorted(db.read(work, list), key=lambda r: r[0]):
                    yield summary_and_state(row)


def _newest_first(event: MemoryEvent) -> tuple:
    return (event.created_at, event.event_id)


class MovingEvents:
    """The events that move with the moves, on one side: on the old side the rows an old
    shard (not the primary) holds for sessions placed there that move; on the new side
    the rows a new shard holds for moves placed there (the copies). Reads are per user
    (indexed) or one grouped pass per database; the new side writes through the new
    list's event store, which places each copy on its session's shard."""

    #: the engine's SQL layout keeps no sequence numbers
    assigns_sequences = False

    def __init__(self, reshard: Reshard, side: str) -> None:
        from backends.postgres.events import SqlEventStore
        from backends.postgres.placement import Placement

        self._rs = reshard
        self._side = side
        adapter = reshard.old if side == "old" else reshard.new
        self._placement = adapter.placement
        self._inner = adapter.event_store()
        databases = self._placement.state_databases()
        if side == "old":  # what the primary holds never moves
            databases = [db for db in databases if identity(db) != reshard.primary]
        self._stores = [(db, SqlEventStore(Placement(db, ()))) for db in databases]
        self._here = {db: reshard.moving_on(side, db) for db in databases}
        self._memo: dict[str, list[str]] | None = None

    def _belongs(self, db: Any, session_id: str) -> bool:
        return bool(session_id) and self._here[db](session_id)

    def list_events(self, user_id: str, *, owner_subject: OwnerFilter = UNSCOPED,
                    after_sequence: int = 0, limit: int | None = None) -> list[MemoryEvent]:
        if after_sequence > 0 or limit == 0:
            return []
        found = [e for db, store in self._stores
                 for e in store.list_events(user_id, owner_subject=owner_subject)
                 if self._belongs(db, e.session_id)]
        found.sort(key=_newest_first, reverse=True)
        return found if limit is None else found[:limit]

    def count_for_user(self, user_id: str) -> int:
        return len(self.list_events(user_id))

    def subjects_by_session(self) -> dict[str, list[str]]:
        """Each moving session's users, from one grouped pass per database."""
        found: dict[str, set[str]] = {}
        for db, store in self._stores:
            for sid, users in store.subjects_by_session().items():
                if self._belongs(db, sid):
                    found.setdefault(sid, set()).update(users)
        return {sid: sorted(users) for sid, users in found.items()}

    def session_subjects(self, session_id: str) -> list[str]:
        """One session's users, from one grouped pass made at the first call (a sampled
        verify asks per session; a migration's passes call :meth:`subjects_by_session`,
        fresh each pass)."""
        if self._memo is None:
            self._memo = self.subjects_by_session()
        return self._memo.get(session_id, [])

    def users(self) -> set[str]:
        """Every user with an event that moves."""
        return {u for users in self.subjects_by_session().values() for u in users}

    def get_event(self, event_id: str, *,
                  owner_subject: OwnerFilter = UNSCOPED) -> MemoryEvent | None:
        for db, store in self._stores:
            event = store.get_event(event_id, owner_subject=owner_subject)
            if event is not None and self._belongs(db, event.session_id):
                return event
        return None

    def delete_event(self, event_id: str) -> bool:
        """The new side's copy of an event (never the original on its old shard)."""
        self._new_side_only("delete events")
        for db, store in self._stores:
            event = store.get_event(event_id)
            if event is not None and self._belongs(db, event.session_id):
                return bool(store.delete_event(event_id))
        return False

    def restore_events(self, events: Sequence[MemoryEvent]) -> int:
        self._new_side_only("write events")
        return int(self._inner.restore_events(events))

    # -- by batch (the transfer core's reads and writes: one query per database) --------

    def events_of_users(self, user_ids: Sequence[str], *,
                        owner_subject: OwnerFilter = UNSCOPED) -> dict[str, list[MemoryEvent]]:
        found: dict[str, list[MemoryEvent]] = {u: [] for u in user_ids}
        for db, store in self._stores:
            for user, events in store.events_of_users(list(found), owner_subject=owner_subject
                                                      ).items():
                found[user].extend(e for e in events if self._belongs(db, e.session_id))
        for events in found.values():
            events.sort(key=_newest_first, reverse=True)
        return found

    def events_by_ids(self, event_ids: Sequence[str]) -> dict[str, MemoryEvent]:
        found: dict[str, MemoryEvent] = {}
        for db, store in self._stores:
            for event_id, event in store.events_by_ids(event_ids).items():
                if self._belongs(db, event.session_id):
                    found.setdefault(event_id, event)
        return found

    def restore_event_batch(self, events: Sequence[MemoryEvent]) -> set[str]:
        self._new_side_only("write events")
        return set(self._inner.restore_event_batch(events))

    def read_counters(self, user_ids: Sequence[str]) -> dict[str, int]:
        return {u: 0 for u in user_ids}

    def raise_counters(self, values: Any) -> None:
        return None

    def read_counter(self, user_id: str) -> int:
        return 0

    def raise_counter(self, user_id: str, value: int) -> int:
        return 0

    def _new_side_only(self, what: str) -> None:
        if self._side != "new":
            raise UnsupportedOperation(f"a reshard does not {what} on the old shard list")


# -- the use cases -----------------------------------------------------------------------


def open_state(path: str, reshard: Reshard) -> MigrationState:
    """Create or resume the state file of this reshard (another pair of lists, or a
    ``migrate`` state file, is refused: :class:`~backends.migrate.StateMismatch`)."""
    source, target = reshard.fingerprints()
    return MigrationState.open(path, source=source, target=target, settings=SETTINGS, labels={
        "source": reshard.label("old"), "target": reshard.label("new"),
        "source_backend": str(reshard.old.name), "target_backend": str(reshard.new.name),
        "kind": "reshard"})


def read_state(path: str, reshard: Reshard) -> MigrationState:
    """An existing state file of this reshard (refused when missing or another's)."""
    from backends.migrate.state import StateMismatch

    source, target = reshard.fingerprints()
    state = MigrationState.read(path, source=source, target=target)
    if state.settings != SETTINGS:
        state.close()
        raise StateMismatch(f"{path} is the state file of a 'migrate', not of a reshard")
    return state


def reshard_migration(reshard: Reshard, state: MigrationState, *,
                      write_batch: int | None = None,
                      progress: Callable[[int], None] | None = None) -> LiveMigration:
    from backends.migrate.reshard_copy import ReshardCopier

    return LiveMigration(reshard.source(), reshard.target(), state, progress=progress,
                         write_batch=WRITE_BATCH if write_batch is None else write_batch,
                         copier=ReshardCopier(reshard))


def _announce_event_users(mig: LiveMigration) -> None:
    """Every user with an event that moves joins the users a full pass reads (an event
    of a session whose state is gone moves too: nothing of the log is left behind)."""
    users = mig.source.event_store().users()
    if users:
        mig.state.add_users(sorted(users))


def run_reshard(mig: LiveMigration, *, follow: bool = False, interval: float = 1.0,
                max_passes: int | None = None, should_stop: Callable[[], bool] | None = None,
                on_pass: Callable[[PassResult], None] | None = None) -> list[PassResult]:
    """The bulk pass (a catch-up pass on a resumed run), then with ``follow`` catch-up
    passes (see :func:`backends.migrate.run_migration`)."""
    mig.state.claim()
    _announce_event_users(mig)
    return run_migration(mig, follow=follow, interval=interval, max_passes=max_passes,
                         should_stop=should_stop, on_pass=on_pass)


def _item_key(item: Any) -> tuple:
    return (item.item_id, item.text, item.embedding, item.tier, tuple(item.tiers),
            repr(sorted(dict(item.unit).items())), item.owner_subject,
            tuple(sorted(dict(item.positions).items())))


def verify_items(reshard: Reshard, state: MigrationState, report: LiveVerifyReport, *,
                 sample: int | None = None) -> int:
    """Each moved session's live items, old shard against new shard (pgvector); a
    difference is noted in ``report``. Returns the sessions compared."""
    old, new = reshard.old, reshard.new
    if not (offers(old, Capability.LIVE_ITEMS) and offers(new, Capability.LIVE_ITEMS)):
        return 0
    compared = 0
    for row in state.rows("copied"):
        if sample is not None and compared >= sample:
            break
        compared += 1
        there = sorted(_item_key(i) for i in old.iter_live_items(row.sid))
        here = sorted(_item_key(i) for i in new.iter_live_items(row.sid))
        if there != here:
            report.note(f"session {row.sid!r}: its live items differ on the new shard "
                        f"({len(here)} there, {len(there)} on the old shard)")
    return compared


def verify_reshard(mig: LiveMigration, reshard: Reshard, *, sample: int | None = None
                   ) -> LiveVerifyReport:
    """The moves, identical on both lists: state (blob, version, owner, pending message,
    drift flag), events, and items (see :func:`verify_items`)."""
    report = verify_live(mig.source, mig.target, mig.state, sample=sample)
    verify_items(reshard, mig.state, report, sample=sample)
    return report


def cutover_reshard(mig: LiveMigration, reshard: Reshard, *,
                    quiet_seconds: float = 2.0) -> CutoverResult:
    """The final pass, the quiet window, the full verify of the moves (items too) and the
    receipt; ``result.ok`` means: switch the engine's ``SEMVEC_STATE_DB_SHARDS`` to
    ``reshard.switch_value`` now (see :func:`backends.migrate.cutover`)."""
    from backends.postgres.config import SHARDS_ENV

    state = mig.state
    state.claim()
    before = state.phase
    _announce_event_users(mig)
    result = cutover(mig, quiet_seconds=quiet_seconds, switch={SHARDS_ENV: reshard.switch_value})
    items = verify_items(reshard, state, result.report)
    if result.ok and not result.report.ok:  # an item differs: nothing is cut over
        result.ok = False
        result.reason = (f"source and target differ ({result.report.different} "
                         "difference(s))")
        state.set_meta(phase=before)
    result.receipt.update(
        ok=result.ok, reason=result.reason, kind="reshard",
        old_shards=reshard.old_shards, new_shards=reshard.new_shards,
        moves=result.report.sessions_compared, items_sessions_compared=items,
        differences=result.report.differences,
        old_copies=DOCTOR_ADVICE, finished_at=time.time())
    return result


def abort_reshard(mig: LiveMigration, *, apply: bool) -> Any:
    """What abort removes from the new shards (only copies this reshard wrote); with
    ``apply``, removed."""
    from backends.migrate.finish import abort_plan, apply_abort

    plan = abort_plan(mig.target, mig.state)
    if apply:
        apply_abort(mig.target, mig.state, plan)
    return plan


# -- plan ----------------------------------------------------------------------------------

#: moves read by the plan's timed sample
SAMPLE = 200


def count_moves(reshard: Reshard) -> int:
    """How many sessions the reshard moves: one pass over the old shards' ids (no blob),
    so ``shards status`` has a total while the bulk pass runs."""
    moves = 0
    for db in reshard.old.placement.state_databases():
        for (sid,) in db.stream(f"SELECT session_id FROM {db.tables.state}", ()):
            i, _j = reshard.routes(sid)
            if reshard.old.placement.shards[i] is db and reshard.moves(sid):
                moves += 1
    return moves


def plan_reshard(reshard: Reshard, *, timeout: float = 5.0) -> dict[str, Any]:
    """Read-only: sessions per shard now and after, the moves and their bytes, events and
    items, the new databases' health and tables, an estimate. One streaming pass over
    each old shard's ids and blob sizes (no blob read), then a timed sample of moves."""
    old, new = reshard.old, reshard.new
    now = [0] * len(old.placement.shards)
    after = [0] * len(new.placement.shards)
    sessions = moves = moved_bytes = 0
    sample: list[str] = []
    for db in old.placement.state_databases():
        for sid, size in db.stream(f"SELECT session_id, octet_length(state_blob) FROM "
                                   f"{db.tables.state}", ()):
            i, j = reshard.routes(sid)
            if old.placement.shards[i] is not db:
                continue  # misplaced: not a session of this deployment
            sessions += 1
            now[i] += 1
            after[j] += 1
            if reshard.moves(sid):
                moves += 1
                moved_bytes += int(size or 0)
                if len(sample) < SAMPLE:
                    sample.append(sid)
    source_events = reshard.source().event_store()
    by_session = source_events.subjects_by_session()
    users = sorted({u for listed in by_session.values() for u in listed})
    events = sum(len(source_events.list_events(u)) for u in users)
    items = None
    if offers(old, Capability.LIVE_ITEMS):
        items = sum(sum(1 for _ in old.iter_live_items(s.session_id))
                    for s in reshard.source().iter_sessions())
    started = time.monotonic()
    if sample:
        old.state_store().load_full_many(sample)
    took = time.monotonic() - started
    rate = len(sample) / took if sample and took > 0 else None
    old_ids = {identity(db) for db in old.placement.shards}
    new_ids = {identity(db) for db in new.placement.shards}
    databases, requirements = [], []
    for db in new.placement.databases():
        facts = _database_facts(new, db, timeout)
        role = new.placement.label(db)
        facts.update(database=role, uri=db.config.display_uri,
                     joins=identity(db) not in old_ids and identity(db) != reshard.primary)
        if not facts.get("reachable"):
            requirements.append(f"{role} ({db.config.display_uri}) is unreachable: "
                                f"{facts.get('error', 'no answer')}")
        elif facts.get("missing_tables"):
            requirements.append(
                f"{role} ({db.config.display_uri}) lacks {', '.join(facts['missing_tables'])}: "
                "created on the first write (create_tables on), or run 'semvecctl indexes "
                "ensure' with --shards set to the new list")
        databases.append(facts)
    leaving = [db.config.display_uri for db in old.placement.state_databases()
               if identity(db) not in new_ids and identity(db) != reshard.primary]
    return {
        "backend": str(old.name),
        "primary": old.config.display_uri,
        "old_shards": reshard.old_shards,
        "new_shards": reshard.new_shards,
        "sessions": sessions,
        "moves": moves,
        "bytes_to_move": moved_bytes,
        "events_to_move": events,
        "users_with_moving_events": len(users),
        "items_to_move": items,
        "now": [{"shard": i, "uri": db.config.display_uri, "sessions": n}
                for i, (db, n) in enumerate(zip(old.placement.shards, now))],
        "after": [{"shard": i, "uri": db.config.display_uri, "sessions": n}
                  for i, (db, n) in enumerate(zip(new.placement.shards, after))],
        "new_databases": databases,
        "leaving": leaving,
        "requirements": requirements,
        "sample_sessions": len(sample),
        "estimate_read_rate_per_s": None if rate is None else round(rate, 1),
        "estimate_bulk_seconds": None if rate is None else round(moves / rate, 1),
        "after_cutover": DOCTOR_ADVICE,
    }


def _database_facts(adapter: Any, db: Any, timeout: float) -> dict[str, Any]:
    """Reachability, server version and the tables present on one database."""
    from backends.postgres.health import database_details

    details = database_details(adapter, db, timeout)
    tables = details.get("tables") or {}
    kept = ("reachable", "server_version", "durable", "error", "latency_ms")
    facts: dict[str, Any] = {key: details[key] for key in kept if key in details}
    facts["tables"] = tables
    facts["missing_tables"] = sorted(t for t, present in tables.items() if not present)
    return facts
