"""The state file of a live migration: what it copied, what it is about to write, and
which two stores it belongs to.

A SQLite database (stdlib, crash-safe): each step that records progress is one
transaction, so a SIGKILL at any moment leaves the last committed state and never a
half-written file. Memory stays flat whatever the number of sessions: rows live on disk.

Before a batch is written to the target its rows are marked ``intent`` (with the version
and digest about to be written) and committed; after the writes they become ``copied``.
A resumed run that finds an ``intent`` row looks at the target: the row it meant to write
is there (it was written before the kill) or it is not (write it now). That is how a
resume neither loses nor duplicates anything.

Sessions the file has no row for yet (all of them, in a first bulk pass) are announced
per batch instead: their entries are appended to ``journal`` under one ``batches`` row,
whose state turns from ``intent`` to ``copied`` with one update. Appends cost no random
B-tree page each (SCAN's key order is random), so a million sessions are recorded at the
cost of a sequential write; :meth:`MigrationState.fold` then sorts the journal into
``sessions`` once (at the end of each pass, and when a file is opened), with the same
meaning as per-session rows: a ``copied`` batch gives ``copied`` rows, an ``intent``
batch (a run killed mid-batch) ``intent`` rows, which the resume settles as above.

Commits are not synced to disk one by one (WAL, ``synchronous=NORMAL``): a SIGKILL loses
no committed step; an OS crash may lose the last few, which is the same as a run killed
before it recorded them, and the checks above settle those rows from what the target holds.

The fingerprints of both stores (backend name and redacted URI, hashed) are written when
the file is created; a run against another pair is refused (:class:`StateMismatch`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

from backends.errors import BackendConfigError

FORMAT = "semvec-live-migration/1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    sid TEXT PRIMARY KEY,
    state TEXT NOT NULL,             -- intent | copied | conflict | deleted
    src_version INTEGER,             -- the source version last copied
    tgt_version INTEGER,             -- what this migration last wrote on the target
    digest TEXT,                     -- blob sha256 last copied
    want_version INTEGER,            -- intent: the version about to be written
    want_digest TEXT,
    note TEXT
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS batches (
    n INTEGER PRIMARY KEY,
    state TEXT NOT NULL              -- intent | copied
);
CREATE TABLE IF NOT EXISTS journal (  -- appended in write order; folded into sessions
    batch INTEGER NOT NULL,
    sid TEXT NOT NULL,
    version INTEGER NOT NULL,
    digest TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    event_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    state TEXT NOT NULL,             -- intent | copied | conflict
    sequence INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS events_by_user ON events (user_id);
CREATE TABLE IF NOT EXISTS users (user_id TEXT PRIMARY KEY, high_water INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS passes (
    n INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,              -- bulk | catch-up | final
    started REAL NOT NULL,
    finished REAL,
    scanned INTEGER NOT NULL DEFAULT 0,
    changed INTEGER NOT NULL DEFAULT 0,
    copied INTEGER NOT NULL DEFAULT 0,
    events INTEGER NOT NULL DEFAULT 0,
    deleted INTEGER NOT NULL DEFAULT 0,
    conflicts INTEGER NOT NULL DEFAULT 0,
    oldest_change REAL               -- when the oldest change this pass found was first seen
);
"""


class StateMismatch(BackendConfigError):
    """The state file belongs to another pair of stores (or is not a migration state)."""


class StateBusy(StateMismatch):
    """Another process runs this migration (a ``run``, ``cutover`` or ``abort``)."""


def fingerprint(backend_name: str, display_uri: str) -> str:
    """A store's identity for the state file: its backend and redacted location."""
    return hashlib.sha256(f"{backend_name}\x00{display_uri}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class SessionRow:
    sid: str
    state: str
    src_version: int | None
    tgt_version: int | None
    digest: str | None
    want_version: int | None
    want_digest: str | None
    note: str | None


class MigrationState:
    """One state file. ``MigrationState.open(path, source=fp, target=fp)`` creates it or
    resumes it (refusing another pair); ``MigrationState.read(path)`` only reads."""

    def __init__(self, path: str, conn: sqlite3.Connection) -> None:
        self.path = path
        self._db = conn
        self._keep_seen = True
        self._claim: int | None = None

    # -- opening ------------------------------------------------------------------------

    @staticmethod
    def _connect(path: str) -> sqlite3.Connection:
        db = sqlite3.connect(path, isolation_level=None, timeout=30.0)
        db.execute("PRAGMA journal_mode=WAL")  # readers never blocked
        # NORMAL: a commit is in the WAL (the OS's page cache) when it returns, so a killed
        # process loses nothing; only an OS crash or power loss can drop the last commits
        # (never corrupt the file), which a resume treats as steps not yet recorded: a
        # target row identical to the source's is recognised as copied, one that differs
        # is reported as a conflict and kept, an event already on the target counts as
        # copied. See the module docstring.
        db.execute("PRAGMA synchronous=NORMAL")
        # temporary tables (a pass's seen set) and the fold's sort stay in temporary files
        # (never synced): memory stays flat whatever the number of sessions
        return db

    @classmethod
    def exists(cls, path: str) -> bool:
        return os.path.exists(path)

    @classmethod
    def open(cls, path: str, *, source: str, target: str,
             labels: dict[str, str] | None = None, settings: dict[str, Any] | None = None
             ) -> "MigrationState":
        """Create (mode 0600) or resume. A resumed file must name the same two stores and
        the same settings (filters), else :class:`StateMismatch`."""
        if not os.path.exists(path):
            cls._create(path, source, target, labels or {}, settings or {})
        state = cls(path, cls._connect(path))
        state._check_format()
        state._check_pair(source, target)
        stored = json.loads(state.meta("settings") or "{}")
        if settings is not None and stored != settings:
            state.close()
            raise StateMismatch(f"state file {path} was made with other filters ({stored}); "
                                "rerun with the same filters or use a new --state file")
        state.fold()  # what an interrupted run announced, as session rows
        return state

    @classmethod
    def check_resume(cls, path: str, *, source: str, target: str,
                     settings: dict[str, Any], claim: bool) -> None:
        """Open and close an existing file before either store is touched, so a run that
        cannot resume it fails before any work: :class:`StateMismatch` for another pair or
        other filters and, with ``claim`` (a run about to write), :class:`StateBusy` while
        another process runs it."""
        with contextlib.closing(cls.open(path, source=source, target=target,
                                         settings=settings)) as early:
            if claim:
                early.claim()

    @classmethod
    def _create(cls, path: str, source: str, target: str, labels: dict[str, str],
                settings: dict[str, Any]) -> None:
        """Build the file under a temporary name, then link it into place: a kill while
        creating leaves no half-made state file (and two runs racing, one winner)."""
        tmp = f"{path}.{os.getpid()}.partial"
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
        try:
            db = cls._connect(tmp)
            try:
                db.executescript(_SCHEMA)
                values = {"format": FORMAT, "source": source, "target": target,
                          "created_at": str(time.time()), "phase": "new",
                          "settings": json.dumps(settings, sort_keys=True),
                          **{f"label.{k}": v for k, v in labels.items()}}
                db.execute("BEGIN IMMEDIATE")
                db.executemany("INSERT INTO meta VALUES (?, ?)", values.items())
                db.execute("COMMIT")
            finally:
                db.close()
            try:
                os.link(tmp, path)  # fails if another run created it first: that one is used
            except FileExistsError:
                pass
        finally:
            os.unlink(tmp)

    @classmethod
    def read(cls, path: str, *, source: str | None = None, target: str | None = None,
             fold: bool = True) -> "MigrationState":
        """Open an existing state file (status, verify, cutover, abort); with ``source``
        and/or ``target`` fingerprints, refuse one bound to other stores. The journal is
        folded into session rows unless ``fold`` is false (status, which only counts and
        may be watching a running pass: see :meth:`count`)."""
        if not os.path.exists(path):
            raise StateMismatch(f"no state file {path}: start the migration with "
                                "'semvecctl migrate run ... --state FILE'")
        try:
            state = cls(path, cls._connect(path))
        except sqlite3.DatabaseError:
            raise StateMismatch(f"{path} is not a migration state file; name the file "
                                "'migrate run --state' wrote") from None
        state._check_format()
        state._check_pair(source, target)
        if fold:
            state.fold()
        return state

    def _check_pair(self, source: str | None, target: str | None) -> None:
        """:class:`StateMismatch` (and the file closed) when a given fingerprint is not the
        one the file was made for."""
        if (source is None or self.meta("source") == source) and \
                (target is None or self.meta("target") == target):
            return
        labels = (self.meta("label.source") or "?", self.meta("label.target") or "?")
        self.close()
        raise StateMismatch(
            f"state file {self.path} belongs to another pair of stores (from {labels[0]} "
            f"to {labels[1]}); use that pair, or a new --state file for this one")

    def _check_format(self) -> None:
        try:
            found = self.meta("format")
        except sqlite3.DatabaseError:  # not SQLite at all, or not ours
            found = None
        if found != FORMAT:
            self.close()
            raise StateMismatch(f"{self.path} is not a migration state file; name the file "
                                "'migrate run --state' wrote")

    def claim(self) -> None:
        """Hold the file for this process: a second ``run``, ``cutover`` or ``abort`` of
        the same migration is refused (:class:`StateBusy`) instead of interleaving its
        passes with this one's. An advisory lock (flock) on the file, which the kernel
        releases when the process ends however it ends (nothing is left behind);
        readers (status, verify) take none. Where there is no flock, nothing is held."""
        if self._claim is not None:
            return
        try:
            import fcntl
        except ImportError:  # not POSIX
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held by another process (EWOULDBLOCK)
            os.close(fd)
            holder = self.meta("holder") or "another process"
            raise StateBusy(f"state file {self.path} is in use by {holder}: let it finish "
                            "or stop it, then rerun") from None
        self._claim = fd
        self.set_meta(holder=f"'semvecctl migrate' (pid {os.getpid()})")

    def close(self) -> None:
        self._db.close()
        if self._claim is not None:
            os.close(self._claim)  # the lock goes with the descriptor
            self._claim = None

    # -- transactions and meta -------------------------------------------------------------

    class _Tx:
        def __init__(self, db: sqlite3.Connection) -> None:
            self.db = db

        def __enter__(self) -> sqlite3.Connection:
            self.db.execute("BEGIN IMMEDIATE")
            return self.db

        def __exit__(self, kind: Any, *_: Any) -> None:
            self.db.execute("ROLLBACK" if kind else "COMMIT")

    def transaction(self) -> "_Tx":
        """One atomic step (committed on exit, rolled back on an exception)."""
        return self._Tx(self._db)

    def meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else row[0]

    def set_meta(self, **values: Any) -> None:
        with self.transaction() as db:
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                           [(k, str(v)) for k, v in values.items()])

    @property
    def phase(self) -> str:
        return self.meta("phase") or "new"

    @property
    def settings(self) -> dict[str, Any]:
        return json.loads(self.meta("settings") or "{}")

    @staticmethod
    def settings_for(owner_subject: Any, match: str | None) -> dict[str, Any]:
        """The filters a migration is made with, as the file keeps them (unscoped and no
        glob are absent)."""
        from backends.contract import UNSCOPED

        settings: dict[str, Any] = {}
        if owner_subject is not UNSCOPED:
            settings["owner_subject"] = owner_subject
        if match is not None:
            settings["match"] = match
        return settings

    @property
    def filters(self) -> tuple[Any, str | None]:
        """``(owner_subject, match)`` the migration was made with."""
        from backends.contract import UNSCOPED

        stored = self.settings
        return stored.get("owner_subject", UNSCOPED), stored.get("match")

    # -- sessions --------------------------------------------------------------------------

    def sessions(self, sids: Sequence[str]) -> dict[str, SessionRow]:
        """The rows of ``sids``."""
        return {r[0]: SessionRow(*r)
                for r in self._by_sid("SELECT * FROM sessions WHERE sid IN ({})", sids)}

    def tracked(self, sids: Sequence[str]) -> set[str]:
        """Those of ``sids`` this migration holds a row for that is not ``deleted`` (the
        ids alone: a verification's search for sessions it never wrote asks every id)."""
        return {r[0] for r in self._by_sid(
            "SELECT sid FROM sessions WHERE sid IN ({}) AND state != 'deleted'", sids)}

    def _by_sid(self, query: str, sids: Sequence[str]) -> Iterator[tuple]:
        """``query`` for ``sids``, its ``{}`` the placeholders, asked 500 ids at a time
        (SQLite before 3.32 takes at most 999 parameters per statement)."""
        sids = list(sids)
        for start in range(0, len(sids), 500):
            part = sids[start:start + 500]
            yield from self._db.execute(query.format(",".join("?" * len(part))), part)

    def moved(self, listed: Sequence[tuple[str, int]]) -> list[str]:
        """Of ``(sid, source version)`` pairs, the sessions a catch-up must describe: never
        recorded, or not recorded as copied at that version (a conflict stays as it is).
        Compared in SQL, 400 pairs a statement (SQLite before 3.32 takes at most 999
        parameters), so an unchanged session costs no Python object."""
        found: list[str] = []
        for start in range(0, len(listed), 400):
            part = listed[start:start + 400]
            rows = ",".join(["(?, ?)"] * len(part))
            found.extend(r[0] for r in self._db.execute(
                f"SELECT v.column1 FROM (VALUES {rows}) AS v LEFT JOIN sessions s "
                "ON s.sid = v.column1 WHERE s.sid IS NULL OR (s.state <> 'conflict' "
                "AND (s.state <> 'copied' OR s.src_version IS NOT v.column2))",
                [x for pair in part for x in pair]))
        return found

    def rows(self, state: str | None = None) -> Iterator[SessionRow]:
        """Every session row (of one state), read in pages (memory stays flat)."""
        last = ""
        while True:
            query = "SELECT * FROM sessions WHERE sid > ?" + (" AND state=?" if state else "")
            args: list[Any] = [last] + ([state] if state else [])
            page = self._db.execute(query + " ORDER BY sid LIMIT 1000", args).fetchall()
            if not page:
                return
            for r in page:
                yield SessionRow(*r)
            last = page[-1][0]

    def mark_intent(self, db: sqlite3.Connection, items: Iterable[tuple[str, int, str]]) -> None:
        """(sid, version, digest) about to be written; the last copied values are kept."""
        db.executemany(
            "INSERT INTO sessions (sid, state, want_version, want_digest) VALUES (?, 'intent', ?, ?) "
            "ON CONFLICT(sid) DO UPDATE SET state='intent', want_version=excluded.want_version, "
            "want_digest=excluded.want_digest", sorted(items))  # sorted: B-tree locality

    def mark_copied(self, db: sqlite3.Connection, items: Iterable[tuple[str, int, str]]) -> None:
        db.executemany(
            "UPDATE sessions SET state='copied', src_version=?2, tgt_version=?2, digest=?3, "
            "want_version=NULL, want_digest=NULL, note=NULL WHERE sid=?1", sorted(items))

    # -- the journal: per-batch announcements of sessions without a row ------------------

    def journal_intent(self, db: sqlite3.Connection,
                       items: Sequence[tuple[str, int, str]]) -> int | None:
        """Announce (sid, version, digest) of sessions the file has no row for, as one
        batch; returns its number (None when there is nothing to announce)."""
        if not items:
            return None
        cur = db.execute("INSERT INTO batches (state) VALUES ('intent')")
        batch = int(cur.lastrowid or 0)
        db.executemany("INSERT INTO journal VALUES (?, ?, ?, ?)",
                       [(batch, sid, version, digest) for sid, version, digest in items])
        return batch

    def journal_copied(self, db: sqlite3.Connection, batch: int) -> bool:
        """Record every session of ``batch`` as copied; False when the batch was folded
        meanwhile (then its sessions have rows, to be marked with :meth:`mark_copied`)."""
        return db.execute("UPDATE batches SET state='copied' WHERE n=?",
                          (batch,)).rowcount == 1

    def fold(self) -> None:
        """Turn the journal into session rows, in sid order (one sorted insert, not a
        random page per session): a copied batch's entries become ``copied`` rows, an
        announced one's ``intent`` rows (keeping what was copied before); later entries
        win, and a conflict row is never replaced."""
        if self._db.execute("SELECT 1 FROM batches LIMIT 1").fetchone() is None:
            return
        with self.transaction() as db:
            db.execute(
                "INSERT INTO sessions (sid, state, src_version, tgt_version, digest, "
                "want_version, want_digest) "
                "SELECT j.sid, b.state, "
                "CASE b.state WHEN 'copied' THEN j.version END, "
                "CASE b.state WHEN 'copied' THEN j.version END, "
                "CASE b.state WHEN 'copied' THEN j.digest END, "
                "CASE b.state WHEN 'intent' THEN j.version END, "
                "CASE b.state WHEN 'intent' THEN j.digest END "
                "FROM journal j JOIN batches b ON b.n = j.batch ORDER BY j.sid, j.rowid "
                "ON CONFLICT(sid) DO UPDATE SET state=excluded.state, "
                "src_version=coalesce(excluded.src_version, src_version), "
                "tgt_version=coalesce(excluded.tgt_version, tgt_version), "
                "digest=coalesce(excluded.digest, digest), "
                "want_version=excluded.want_version, want_digest=excluded.want_digest, note=NULL "
                "WHERE sessions.state <> 'conflict'")
            db.execute("DELETE FROM journal")
            db.execute("DELETE FROM batches")

    def mark_conflict(self, db: sqlite3.Connection, sid: str, note: str) -> None:
        db.execute("INSERT INTO sessions (sid, state, note) VALUES (?, 'conflict', ?) "
                   "ON CONFLICT(sid) DO UPDATE SET state='conflict', note=excluded.note, "
                   "want_version=NULL, want_digest=NULL", (sid, note))

    def mark_deleted(self, db: sqlite3.Connection, sid: str) -> None:
        db.execute("UPDATE sessions SET state='deleted', tgt_version=NULL, want_version=NULL, "
                   "want_digest=NULL WHERE sid=?", (sid,))

    def count(self, state: str) -> int:
        """Sessions in ``state``, the journal's unfolded entries included."""
        rows = self._db.execute("SELECT count(*) FROM sessions WHERE state=?", (state,))
        journaled = self._db.execute("SELECT count(*) FROM journal j JOIN batches b "
                                     "ON b.n = j.batch WHERE b.state=?", (state,))
        return int(rows.fetchone()[0]) + int(journaled.fetchone()[0])

    def session_counts(self) -> dict[str, int]:
        """Each session counted once, as a fold would leave it (the journal's latest entry
        over the row, a conflict row kept), without folding (a reader never writes):
        ``copied`` (the target holds a copy this migration wrote, at some version: it
        never goes down while the source stands still, an interrupted batch included),
        ``uncopied`` (announced, never copied), ``intent`` (a write announced, whether or
        not an older version was copied), ``conflict`` and ``deleted``."""
        rows = self._db.execute(
            "WITH last AS (SELECT j.sid, b.state FROM (SELECT max(rowid) AS r FROM journal "
            "GROUP BY sid) m JOIN journal j ON j.rowid = m.r JOIN batches b ON b.n = j.batch), "
            "eff AS (SELECT CASE WHEN s.state = 'conflict' THEN 'conflict' "
            "WHEN l.state IS NULL THEN s.state ELSE l.state END AS state, "
            "s.src_version IS NOT NULL AS was_copied FROM sessions s LEFT JOIN last l "
            "ON l.sid = s.sid UNION ALL SELECT l.state, 0 FROM last l "
            "WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.sid = l.sid)) "
            "SELECT state, was_copied, count(*) FROM eff GROUP BY state, was_copied").fetchall()
        counts = dict.fromkeys(("copied", "uncopied", "intent", "conflict", "deleted"), 0)
        for state, was_copied, n in rows:
            if state == "intent":
                counts["intent"] += n
            if state == "copied" or (state == "intent" and was_copied):
                counts["copied"] += n
            elif state == "intent":
                counts["uncopied"] += n
            elif state in counts:
                counts[state] += n
        return counts

    def conflicts(self) -> list[tuple[str, str]]:
        return [(r[0], r[1] or "") for r in self._db.execute(
            "SELECT sid, note FROM sessions WHERE state='conflict' ORDER BY sid")]

    # -- the seen set of one pass (deletion detection without holding every id) ----------

    def begin_seen(self, *, needed_only: bool = False) -> None:
        """Start a pass's seen set. With ``needed_only`` (a scan that records only rows it
        listed) and no row copied or announced yet, nothing can be unseen at the end, so
        no set is kept (a first bulk pass): :meth:`add_seen` keeps nothing and
        :meth:`unseen_copied` finds nothing."""
        # kept as a heap (appends, in SCAN's random order, cost no B-tree page each);
        # indexed once, by one sort, when the pass asks what it did not see
        self._db.execute("DROP TABLE IF EXISTS temp.seen")
        self._db.execute("CREATE TEMP TABLE seen (sid TEXT NOT NULL)")
        self._keep_seen = not needed_only or self._db.execute(
            "SELECT 1 FROM sessions WHERE state IN ('copied', 'intent') LIMIT 1"
        ).fetchone() is not None

    def add_seen(self, sids: Iterable[str]) -> None:
        if not self._keep_seen:
            return
        with self.transaction() as db:  # one statement per call, not one commit per id
            db.executemany("INSERT INTO seen VALUES (?)", [(s,) for s in sids])

    def unseen_copied(self) -> list[SessionRow]:
        if not self._keep_seen:
            return []
        self._db.execute("CREATE INDEX IF NOT EXISTS temp.seen_sid ON seen (sid)")
        rows = self._db.execute("SELECT * FROM sessions WHERE state IN ('copied', 'intent') "
                                "AND sid NOT IN (SELECT sid FROM seen) ORDER BY sid LIMIT 10000")
        return [SessionRow(*r) for r in rows]

    # -- events and users ----------------------------------------------------------------

    def users(self) -> list[str]:
        return [r[0] for r in self._db.execute("SELECT user_id FROM users ORDER BY user_id")]

    def add_users(self, users: Iterable[str]) -> None:
        with self.transaction() as db:
            db.executemany("INSERT OR IGNORE INTO users (user_id) VALUES (?)", [(u,) for u in users])

    def events_of(self, user: str) -> dict[str, str]:
        """event id -> state, for one user."""
        return dict(self._db.execute("SELECT event_id, state FROM events WHERE user_id=?", (user,)))

    def events_of_users(self, users: Sequence[str]) -> dict[str, dict[str, str]]:
        """user -> (event id -> state), for a batch of users in one query per 500."""
        found: dict[str, dict[str, str]] = {u: {} for u in users}
        users = list(found)
        for start in range(0, len(users), 500):
            part = users[start:start + 500]
            marks = ",".join("?" * len(part))
            for event_id, user, state in self._db.execute(
                    f"SELECT event_id, user_id, state FROM events WHERE user_id IN ({marks})", part):
                found[user][event_id] = state
        return found

    def raise_high_waters(self, db: sqlite3.Connection, tops: dict[str, int]) -> None:
        """:meth:`raise_high_water` for a batch of users."""
        db.executemany("INSERT INTO users (user_id, high_water) VALUES (?, ?) ON CONFLICT(user_id) "
                       "DO UPDATE SET high_water=max(high_water, excluded.high_water)",
                       list(tops.items()))

    def mark_events(self, db: sqlite3.Connection, state: str,
                    events: Iterable[tuple[str, str, int]]) -> None:
        db.executemany("INSERT INTO events (event_id, user_id, state, sequence) VALUES (?, ?, ?, ?) "
                       "ON CONFLICT(event_id) DO UPDATE SET state=excluded.state",
                       [(e, u, state, s) for e, u, s in events])

    def raise_high_water(self, db: sqlite3.Connection, user: str, sequence: int) -> None:
        db.execute("INSERT INTO users (user_id, high_water) VALUES (?, ?) ON CONFLICT(user_id) "
                   "DO UPDATE SET high_water=max(high_water, excluded.high_water)", (user, sequence))

    def event_count(self, state: str = "copied") -> int:
        return int(self._db.execute("SELECT count(*) FROM events WHERE state=?",
                                    (state,)).fetchone()[0])

    def event_rows(self) -> Iterator[tuple[str, str, str]]:
        """(event_id, user_id, state) of every recorded event."""
        yield from self._db.execute("SELECT event_id, user_id, state FROM events ORDER BY event_id")

    def event_conflicts(self) -> list[str]:
        return [r[0] for r in self._db.execute(
            "SELECT event_id FROM events WHERE state='conflict' ORDER BY event_id")]

    # -- passes ----------------------------------------------------------------------------

    def begin_pass(self, kind: str) -> int:
        with self.transaction() as db:
            cur = db.execute("INSERT INTO passes (kind, started) VALUES (?, ?)", (kind, time.time()))
            return int(cur.lastrowid or 0)

    def end_pass(self, n: int, **counts: Any) -> None:
        with self.transaction() as db:
            sets = ", ".join(f"{k}=?" for k in counts)
            db.execute(f"UPDATE passes SET finished=?, {sets} WHERE n=?",
                       (time.time(), *counts.values(), n))

    def passes(self, limit: int = 20) -> list[dict[str, Any]]:
        cur = self._db.execute("SELECT * FROM passes ORDER BY n DESC LIMIT ?", (limit,))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]
