"""The compliance event log: per-user, gap-free sequences over the engine's indexes.

The sequence zset stands in for ``WHERE user_id = ? ORDER BY sequence`` and the time
zset for ``created_at < cutoff``; every write keeps both in step with the event hashes.
Besides our surface (append, list_events, get_event, delete_events_before, purge_user)
the store offers the engine's (:class:`EngineEventSurface`) and lossless restore
(:class:`EventRestorer`); every multi-key write is one Lua script.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Iterator, Sequence

from backends.contract import (
    UNSCOPED,
    LogShape,
    EngineEventSurface,
    MemoryEvent,
    OwnerFilter,
    coerce_event,
    owner_matches,
    speaks_both_conventions,
    validate_owner_filter,
    validate_turn_events,
)
from backends.errors import InvalidEvent, IntegrityError, StateVersionConflict
from backends.redis import schema
from backends.redis.bulk import RedisEventBulk
from backends.redis.event_codec import decode_event, event_args, event_keys
from backends.redis.errors import redis_errors
from backends.redis.scripts import script
from backends.redis.turns import append_events

PAGE_SIZE = 200
DELETE_BATCH = 500
#: keys SCAN walks per round trip (the event hashes among them read in one pipeline)
SCAN_BATCH = 5000


def _user_id(user_id: Any) -> str:
    if not isinstance(user_id, str) or not user_id:
        raise ValueError("user_id must be a non-empty string")
    return user_id


@speaks_both_conventions
class RedisEventStore(RedisEventBulk, EngineEventSurface):
    #: per-user, 1-based, gap-free sequences from the user's counter
    assigns_sequences = True

    def __init__(self, client: Any, *, where: str) -> None:
        self._client = client
        self._where = where

    def append(self, event: Any) -> MemoryEvent:
        """Append one event (ours or the engine's object); returns it with its sequence."""
        return append_events(self._client, self._where, [event])[0]

    def append_batch(self, events: Sequence[MemoryEvent]) -> list[MemoryEvent]:
        """Events appended in one script call, numbered by the store in the given order
        (all or none: an id already stored refuses the batch)."""
        return append_events(self._client, self._where, list(events)) if events else []

    def get_event(self, event_id: Any, *,
                  owner_subject: OwnerFilter = UNSCOPED) -> MemoryEvent | None:
        """One event by id; an owner filter hides events of other owners (None = only
        unowned events)."""
        validate_owner_filter(owner_subject)
        with redis_errors(self._where):
            raw = self._client.hgetall(schema.event_key(str(event_id)))
        event = decode_event(raw)
        if event is None or not owner_matches(event.owner_subject, owner_subject):
            return None
        return event

    def _pages(self, user_id: str, after_sequence: int, page: int) -> Iterator[list[MemoryEvent]]:
        """Events of one user in sequence order, a page (one pipelined round trip) at a time."""
        index = schema.user_seq_index_key(user_id)
        low = f"({int(after_sequence)}"
        while True:
            with redis_errors(self._where):
                ids = self._client.zrangebyscore(index, low, "+inf", start=0, num=page, withscores=True)
                if not ids:
                    return
                pipe = self._client.pipeline(transaction=False)
                for event_id, _score in ids:
                    pipe.hgetall(schema.EVENT_PREFIX.encode() + event_id)
                raws = pipe.execute()
            yield [e for e in (decode_event(raw) for raw in raws) if e is not None]
            if len(ids) < page:
                return
            low = f"({int(ids[-1][1])}"

    def list_events(
        self,
        user_id: str,
        *,
        owner_subject: OwnerFilter = UNSCOPED,
        after_sequence: int = 0,
        limit: int | None = None,
    ) -> list[MemoryEvent]:
        validate_owner_filter(owner_subject)
        if limit is not None and limit <= 0:
            return []
        page = PAGE_SIZE if limit is None else max(1, min(PAGE_SIZE, limit))
        found: list[MemoryEvent] = []
        for events in self._pages(user_id, after_sequence, page):
            for event in events:  # the owner filter BEFORE the limit
                if owner_matches(event.owner_subject, owner_subject):
                    found.append(event)
                    if limit is not None and len(found) >= limit:
                        return found
        return found

    def count_for_user(self, user_id: str) -> int:
        """The user's stored events: one ZCARD of the sequence index."""
        with redis_errors(self._where):
            return int(self._client.zcard(schema.user_seq_index_key(user_id)))

    def delete_event(self, event_id: Any) -> bool:
        """Delete one event from its hash and both indexes; the counter is kept."""
        with redis_errors(self._where):
            deleted = script("delete_event")(
                self._client, [schema.event_key(str(event_id))],
                [schema.USER_SEQ_INDEX_PREFIX, schema.USER_TIME_INDEX_PREFIX])
        return bool(deleted)

    def delete_events_before(self, cutoff: datetime, *, user_id: str | None = None) -> int:
        """Delete events created strictly before ``cutoff`` from the hashes and both indexes."""
        if not isinstance(cutoff, datetime) or cutoff.tzinfo is None:
            raise ValueError("cutoff must be a timezone-aware datetime")
        epoch = repr(cutoff.astimezone(timezone.utc).timestamp())
        users = [user_id] if user_id is not None else self._users_with_events()
        deleted = 0
        for user in users:
            time_index = schema.user_time_index_key(user)
            seq_index = schema.user_seq_index_key(user)
            while True:
                with redis_errors(self._where):
                    count = script("delete_older")(
                        self._client,
                        [time_index, seq_index],
                        [epoch, schema.EVENT_PREFIX, str(DELETE_BATCH)],
                    )
                deleted += int(count)
                if count < DELETE_BATCH:
                    break
        return deleted

    def purge_user(self, user_id: str) -> int:
        """Erase a user: every event, both indexes, then the sequence counter (so a next
        event starts again at 1). Returns the number of events removed."""
        _user_id(user_id)
        index_keys = [schema.user_seq_index_key(user_id), schema.user_time_index_key(user_id),
                      schema.user_counter_key(user_id)]
        removed = 0
        while True:
            with redis_errors(self._where):
                deleted, done = script("purge_user")(
                    self._client, index_keys, [schema.EVENT_PREFIX, str(DELETE_BATCH)]
                )
            removed += int(deleted)
            if done:
                return removed

    def session_subjects(self, session_id: str) -> list[str]:
        """The user ids with at least one event of ``session_id``, sorted.

        Cost: there is no per-session index in the engine's layout, so this SCANs every
        event hash and reads two fields of each, a batch per round trip: O(all events in
        the database). Meant for erasure and audits, not for a request path; for many
        sessions use :meth:`subjects_by_session`, which pays that scan once.
        """
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("session_id must be a non-empty string")
        return self.subjects_by_session().get(session_id, [])

    def subjects_by_session(self) -> dict[str, list[str]]:
        """Every session id that has events, with its user ids (sorted): one SCAN of the
        event hashes for all sessions at once (memory: one entry per session and user)."""
        found: dict[str, set[str]] = {}
        pattern = schema.escape_glob(schema.EVENT_PREFIX) + "*"
        cursor = 0
        while True:
            with redis_errors(self._where):
                cursor, names = self._client.scan(cursor, match=pattern, count=SCAN_BATCH)
                if names:
                    pipe = self._client.pipeline(transaction=False)
                    for name in names:
                        pipe.hmget(name, "session_id", "user_id")
                    rows = pipe.execute(raise_on_error=False)
                else:
                    rows = []
            for row in rows:
                if isinstance(row, Exception):
                    continue  # a foreign key of another type under our prefix
                session, user = row
                if session and user:
                    found.setdefault(session.decode("utf-8", errors="replace"), set()).add(
                        user.decode("utf-8", errors="replace"))
            if cursor == 0:
                return {sid: sorted(users) for sid, users in found.items()}

    def iter_stored_events(self) -> Iterator[MemoryEvent]:
        """Every event hash that decodes, found by a SCAN of the hashes themselves, not
        through the per-user indexes (an unindexed event is found too); a batch of hashes
        per round trip."""
        pattern = schema.escape_glob(schema.EVENT_PREFIX) + "*"
        cursor = 0
        while True:
            with redis_errors(self._where):
                cursor, names = self._client.scan(cursor, match=pattern, count=SCAN_BATCH)
                pipe = self._client.pipeline(transaction=False)
                for name in names:
                    pipe.hgetall(name)
                raws = pipe.execute(raise_on_error=False) if names else []
            for raw in raws:
                if isinstance(raw, Exception) or not raw:
                    continue  # a foreign key of another type under our prefix
                try:
                    event = decode_event(raw)
                except IntegrityError:
                    continue  # damaged: the audit reports it as event.unreadable
                if event is not None:
                    yield event
            if int(cursor) == 0:
                return

    # -- EventRestorer -----------------------------------------------------------------

    def restore_events(self, events: Sequence[Any]) -> int:
        """Write events that keep their sequence numbers, all or nothing (one script).

        An event id already stored, or a sequence another event of that user holds, is a
        :class:`StateVersionConflict` and nothing is written. Each user's counter ends at
        least at the highest restored sequence, so the next append continues after it.
        """
        coerced = [coerce_event(e) for e in events]
        for event in coerced:
            if isinstance(event.sequence, bool) or not isinstance(event.sequence, int) \
                    or event.sequence < 1:
                raise InvalidEvent("a restored event needs its sequence (a positive int)")
        checked = validate_turn_events([replace(e, sequence=0) for e in coerced])
        if not checked:
            return 0
        script_keys: list[Any] = []
        script_args: list[Any] = []
        for event, original in zip(checked, coerced):
            script_keys.extend(event_keys(event))
            script_args.extend([*event_args(event), str(original.sequence)])
        with redis_errors(self._where):
            reply = script("restore_events")(self._client, script_keys, script_args)
        code = int(reply[0])
        if code == 1:
            return int(reply[1])
        culprit = checked[int(reply[1]) - 1]
        if code == -5:
            raise StateVersionConflict(
                f"event {culprit.event_id!r} already exists; nothing was restored")
        raise StateVersionConflict(
            f"sequence {coerced[int(reply[1]) - 1].sequence} of user {culprit.user_id!r} is "
            "already taken (or repeated in the batch); nothing was restored")

    def read_counter(self, user_id: str) -> int:
        """The user's last handed-out sequence (0 when none)."""
        _user_id(user_id)
        with redis_errors(self._where):
            raw = self._client.get(schema.user_counter_key(user_id))
        if raw is None:
            return 0
        try:
            return int(raw)
        except ValueError:
            raise IntegrityError(f"the sequence counter of user {user_id!r} is not an "
                                 "integer") from None

    def raise_counter(self, user_id: str, value: int) -> int:
        """Set the user's counter to at least ``value`` (never lower it), atomically;
        returns the counter afterwards."""
        _user_id(user_id)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError("value must be a non-negative int")
        with redis_errors(self._where):
            return int(script("raise_counter")(
                self._client, [schema.user_counter_key(user_id)], [str(value)]))

    def index_entries(self, user_id: str) -> dict[str, int]:
        """Entries of the user's two index sorted sets (by sequence, by time), one
        pipelined round trip: what an erasure removes beside the event hashes."""
        _user_id(user_id)
        with redis_errors(self._where):
            pipe = self._client.pipeline(transaction=False)
            pipe.zcard(schema.user_seq_index_key(user_id))
            pipe.zcard(schema.user_time_index_key(user_id))
            by_sequence, by_time = pipe.execute()
        return {"sequence_index": int(by_sequence), "time_index": int(by_time)}

    def event_refs(self, user_id: str) -> list[tuple[str, str | None, str | None, str | None]]:
        """Every event id the user's two indexes name, read raw (for erasure): tuples
        ``(event_id, owner_subject, session_id, problem)``; ``problem`` says why the event
        cannot be decoded (None when it can), and owner and session are None for an index
        entry whose event hash is gone. In index order, each id once."""
        _user_id(user_id)
        with redis_errors(self._where):
            pipe = self._client.pipeline(transaction=False)
            pipe.zrange(schema.user_seq_index_key(user_id), 0, -1)
            pipe.zrange(schema.user_time_index_key(user_id), 0, -1)
            by_sequence, by_time = pipe.execute()
        ids = list(dict.fromkeys([*by_sequence, *by_time]))
        refs: list[tuple[str, str | None, str | None, str | None]] = []
        for start in range(0, len(ids), SCAN_BATCH):
            chunk = ids[start:start + SCAN_BATCH]
            with redis_errors(self._where):
                pipe = self._client.pipeline(transaction=False)
                for event_id in chunk:
                    pipe.hgetall(schema.EVENT_PREFIX.encode() + event_id)
                raws = pipe.execute()
            for event_id, raw in zip(chunk, raws):
                name = event_id.decode("utf-8", errors="replace")
                if not raw:
                    refs.append((name, None, None, "index entry without an event hash"))
                    continue
                field = {k.decode("utf-8", "replace"): v.decode("utf-8", "replace")
                         for k, v in raw.items()}
                try:
                    decode_event(raw)
                    problem = None
                except IntegrityError as exc:
                    problem = str(exc)
                refs.append((name, field.get("owner_subject", ""), field.get("session_id", ""),
                             problem))
        return refs

    def drop_index_entries(self, user_id: str, event_ids: Sequence[str]) -> int:
        """Remove ids from the user's two indexes (entries whose event hash is gone);
        returns the entries removed."""
        _user_id(user_id)
        if not event_ids:
            return 0
        with redis_errors(self._where):
            pipe = self._client.pipeline(transaction=True)
            pipe.zrem(schema.user_seq_index_key(user_id), *event_ids)
            pipe.zrem(schema.user_time_index_key(user_id), *event_ids)
            return sum(int(n) for n in pipe.execute())

    def iter_log_shapes(self, *, batch_size: int = 500) -> Iterator[LogShape]:
        """Every user's event count and events per UTC day: a SCAN of the time indexes
        (one per user), then per batch of users one pipelined ZCARD each and their
        scores (the events' creation times) read a page at a time."""
        from collections import Counter

        prefix = schema.USER_TIME_INDEX_PREFIX
        pattern = schema.escape_glob(prefix) + "*"
        cursor = 0
        while True:
            with redis_errors(self._where):
                cursor, names = self._client.scan(cursor, match=pattern, count=batch_size)
            for name in names:
                user = (name.decode("utf-8", "replace") if isinstance(name, bytes)
                        else str(name))[len(prefix):]
                per_day: Counter[str] = Counter()
                start = 0
                while True:
                    with redis_errors(self._where):
                        page = self._client.zrange(name, start, start + PAGE_SIZE * 5 - 1,
                                                   withscores=True)
                    for _member, score in page:
                        day = datetime.fromtimestamp(float(score), timezone.utc).date()
                        per_day[day.isoformat()] += 1
                    if len(page) < PAGE_SIZE * 5:
                        break
                    start += len(page)
                yield LogShape(user, sum(per_day.values()), dict(per_day))
            if int(cursor) == 0:
                return

    def _users_with_events(self) -> Iterator[str]:
        prefix = schema.USER_TIME_INDEX_PREFIX
        pattern = schema.escape_glob(prefix) + "*"
        with redis_errors(self._where):
            for raw in self._client.scan_iter(match=pattern, count=500):
                yield raw.decode("utf-8")[len(prefix):]
