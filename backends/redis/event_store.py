"""The compliance event log: per-user, gap-free sequences over the engine's indexes.

The sequence zset stands in for ``WHERE user_id = ? ORDER BY sequence`` and the time
zset for ``created_at < cutoff``; every write keeps both in step with the event hashes.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterator

from backends.contract import UNSCOPED, MemoryEvent, OwnerFilter, owner_matches, validate_owner_filter
from backends.redis import keys
from backends.redis.event_codec import decode_event
from backends.redis.failures import redis_errors
from backends.redis.scripts import script
from backends.redis.turns import append_events

PAGE_SIZE = 200
DELETE_BATCH = 500


class RedisEventStore:
    def __init__(self, client: Any, *, where: str) -> None:
        self._client = client
        self._where = where

    def append(self, event: MemoryEvent) -> MemoryEvent:
        return append_events(self._client, self._where, [event])[0]

    def get_event(self, event_id: str) -> MemoryEvent | None:
        with redis_errors(self._where):
            raw = self._client.hgetall(keys.event_key(event_id))
        return decode_event(raw)

    def _pages(self, user_id: str, after_sequence: int, page: int) -> Iterator[list[MemoryEvent]]:
        """Events of one user in sequence order, a page (one pipelined round trip) at a time."""
        index = keys.user_seq_index_key(user_id)
        low = f"({int(after_sequence)}"
        while True:
            with redis_errors(self._where):
                ids = self._client.zrangebyscore(index, low, "+inf", start=0, num=page, withscores=True)
                if not ids:
                    return
                pipe = self._client.pipeline(transaction=False)
                for event_id, _score in ids:
                    pipe.hgetall(keys.EVENT_PREFIX.encode() + event_id)
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

    def delete_older_than(self, cutoff: datetime, *, user_id: str | None = None) -> int:
        """Delete events created strictly before ``cutoff`` from the hashes and both indexes."""
        if not isinstance(cutoff, datetime) or cutoff.tzinfo is None:
            raise ValueError("cutoff must be a timezone-aware datetime")
        epoch = repr(cutoff.astimezone(timezone.utc).timestamp())
        users = [user_id] if user_id is not None else self._users_with_events()
        deleted = 0
        for user in users:
            time_index = keys.user_time_index_key(user)
            seq_index = keys.user_seq_index_key(user)
            while True:
                with redis_errors(self._where):
                    count = script("delete_older")(
                        self._client,
                        [time_index, seq_index],
                        [epoch, keys.EVENT_PREFIX, str(DELETE_BATCH)],
                    )
                deleted += int(count)
                if count < DELETE_BATCH:
                    break
        return deleted

    def purge_user(self, user_id: str) -> int:
        """Erase a user: every event, both indexes, then the sequence counter (so a next
        event starts again at 1). Returns the number of events removed."""
        if not isinstance(user_id, str) or not user_id:
            raise ValueError("user_id must be a non-empty string")
        index_keys = [keys.user_seq_index_key(user_id), keys.user_time_index_key(user_id),
                      keys.user_counter_key(user_id)]
        removed = 0
        while True:
            with redis_errors(self._where):
                deleted, done = script("purge_user")(
                    self._client, index_keys, [keys.EVENT_PREFIX, str(DELETE_BATCH)]
                )
            removed += int(deleted)
            if done:
                return removed

    def _users_with_events(self) -> Iterator[str]:
        prefix = keys.USER_TIME_INDEX_PREFIX
        pattern = keys.escape_glob(prefix) + "*"
        with redis_errors(self._where):
            for raw in self._client.scan_iter(match=pattern, count=500):
                yield raw.decode("utf-8")[len(prefix):]
