"""Set-based reads and writes for a transfer's batches (the ``bulk`` role: the same file
in every backend): a batch of users' logs, of events by id, of counters, and a batch of
numbered events written with each clash held back alone, each in one or two pipelined
round trips or one script call, never one per user or per event. Mixed into the stores
(:class:`~backends.contract.defaults.EventStoreDefaults` gives the slow default)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from backends.contract import (UNSCOPED, MemoryEvent, OwnerFilter, coerce_event, owner_matches,
                               validate_owner_filter, validate_turn_events)
from backends.errors import IntegrityError, InvalidEvent
from backends.redis import schema
from backends.redis.errors import redis_errors
from backends.redis.event_codec import decode_event, event_args, event_keys
from backends.redis.scripts import script

#: events per script call of a batch restore (11 arguments and 4 keys each)
EVENTS_PER_CALL = 2000
#: keys per pipelined round trip of a batch read
KEYS_PER_TRIP = 5000


def _hgetall(pipe: Any, key: Any) -> Any:
    return pipe.hgetall(key)


class RedisEventBulk:
    """The batch members of :class:`~backends.redis.events.RedisEventStore`."""

    _client: Any
    _where: str

    def _pipelined(self, keys: Sequence[Any], command: Callable[[Any, Any], Any]) -> list[Any]:
        """``command(pipe, key)`` for each key, one pipeline per :data:`KEYS_PER_TRIP`."""
        out: list[Any] = []
        with redis_errors(self._where):
            for start in range(0, len(keys), KEYS_PER_TRIP):
                pipe = self._client.pipeline(transaction=False)
                for key in keys[start:start + KEYS_PER_TRIP]:
                    command(pipe, key)
                out.extend(pipe.execute())
        return out

    def events_of_users(self, user_ids: Sequence[str], *,
                        owner_subject: OwnerFilter = UNSCOPED) -> dict[str, list[MemoryEvent]]:
        """Each user's log in sequence order: one pipeline of the users' sequence
        indexes, one of their event hashes (an index entry whose hash is gone is left
        out, as ``list_events`` leaves it)."""
        validate_owner_filter(owner_subject)
        users = list(dict.fromkeys(user_ids))
        indexes = self._pipelined([schema.user_seq_index_key(u) for u in users],
                                  lambda pipe, key: pipe.zrange(key, 0, -1))
        ids = [(u, i) for u, found in zip(users, indexes) for i in found]
        raws = self._pipelined([schema.EVENT_PREFIX.encode() + i for _, i in ids], _hgetall)
        logs: dict[str, list[MemoryEvent]] = {u: [] for u in users}
        for (user, key), raw in zip(ids, raws):
            event = decode_event(raw, (schema.EVENT_PREFIX.encode() + key).decode(errors="replace"))
            if event is not None and owner_matches(event.owner_subject, owner_subject):
                logs[user].append(event)
        return logs

    def log_sizes(self, user_ids: Sequence[str], *,
                  owner_subject: OwnerFilter = UNSCOPED) -> dict[str, tuple[int, int]]:
        """Unscoped: each user's sequence index counted (ZCARD, and ZCOUNT above 0 for
        the numbered), one pipeline, no event read; an index entry whose hash is gone
        (damage the doctor reports) counts too. Under an owner filter the events are
        read, as the owner is in each hash."""
        if owner_subject is not UNSCOPED:
            return {u: (len(log), sum(1 for e in log if e.sequence)) for u, log in
                    self.events_of_users(user_ids, owner_subject=owner_subject).items()}
        users = list(dict.fromkeys(user_ids))
        keys = [schema.user_seq_index_key(u) for u in users]
        both = self._pipelined(keys, lambda pipe, key: pipe.zcard(key).zcount(key, "(0", "+inf"))
        return {u: (int(both[2 * i]), int(both[2 * i + 1])) for i, u in enumerate(users)}

    def events_by_ids(self, event_ids: Sequence[str]) -> dict[str, MemoryEvent]:
        """The stored events among ``event_ids``, one pipeline of their hashes."""
        ids = list(dict.fromkeys(str(i) for i in event_ids))
        raws = self._pipelined([schema.event_key(i) for i in ids], _hgetall)
        found = {}
        for event_id, raw in zip(ids, raws):
            event = decode_event(raw, schema.event_key(event_id))
            if event is not None:
                found[event_id] = event
        return found

    def read_counters(self, user_ids: Sequence[str]) -> dict[str, int]:
        """Each user's counter (0 when none), one MGET per round trip."""
        users = list(dict.fromkeys(user_ids))
        values: dict[str, int] = {}
        with redis_errors(self._where):
            for start in range(0, len(users), KEYS_PER_TRIP):
                part = users[start:start + KEYS_PER_TRIP]
                raws = self._client.mget([schema.user_counter_key(u) for u in part])
                for user, raw in zip(part, raws):
                    try:
                        values[user] = int(raw) if raw is not None else 0
                    except ValueError:
                        raise IntegrityError(f"the sequence counter of user {user!r} is not "
                                             "an integer") from None
        return values

    def raise_counters(self, values: Mapping[str, int]) -> None:
        """Each user's counter raised to at least its value, one script call a batch."""
        wanted = [(u, v) for u, v in values.items() if v > 0]
        for start in range(0, len(wanted), EVENTS_PER_CALL):
            part = wanted[start:start + EVENTS_PER_CALL]
            with redis_errors(self._where):
                script("raise_counters")(self._client, [schema.user_counter_key(u) for u, _ in part],
                                         [str(int(v)) for _, v in part])

    def restore_event_batch(self, events: Sequence[MemoryEvent]) -> set[str]:
        """Numbered events written, a clash (id stored, sequence taken) skipped and
        returned alone: one script call per :data:`EVENTS_PER_CALL` events."""
        coerced = [coerce_event(e) for e in events]
        for event in coerced:
            if isinstance(event.sequence, bool) or not isinstance(event.sequence, int) \
                    or event.sequence < 1:
                raise InvalidEvent("a restored event needs its sequence (a positive int)")
        checked = validate_turn_events([replace(e, sequence=0) for e in coerced])
        clashes: set[str] = set()
        for start in range(0, len(checked), EVENTS_PER_CALL):
            part = list(zip(checked, coerced))[start:start + EVENTS_PER_CALL]
            keys: list[Any] = []
            args: list[Any] = []
            for event, original in part:
                keys.extend(event_keys(event))
                args.extend([*event_args(event), str(original.sequence)])
            with redis_errors(self._where):
                reply = script("restore_event_batch")(self._client, keys, args)
            clashes.update(part[int(i) - 1][0].event_id for i in reply[1:])
        return clashes


#: session rows per script call of a batch restore
ROWS_PER_CALL = 1000


class RedisStateBulk:
    """The batch members of :class:`~backends.redis.state.RedisStateStore`."""

    _client: Any
    _where: str
    _ttl: Any

    def restore_sessions(self, rows: Sequence[Any]) -> set[str]:
        """``restore_session`` for many rows, one script call per :data:`ROWS_PER_CALL`:
        never overwriting (a row whose key exists is left and its id returned), each
        written with its drift flag and expiry. Every row is checked before any I/O."""
        from backends.contract import normalise_pending, validate_save_args
        from backends.contract.session_ids import has_undecodable, shown

        by_id: dict[str, Any] = {}
        for row in rows:  # a repeated id: its first row
            by_id.setdefault(row.session_id, row)
        rows = list(by_id.values())
        args: list[Any] = []
        for row in rows:
            validate_save_args(row.session_id, row.blob, row.version, row.owner_subject)
            if has_undecodable(row.session_id):
                raise ValueError(f"session_id {shown(row.session_id)} is not valid UTF-8")
            ttl = self._ttl if row.ttl_seconds is None else row.ttl_seconds
            if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 0:
                raise ValueError("ttl_seconds must be None or a non-negative int")
            args.append([bytes(row.blob), str(row.version), row.owner_subject or "",
                         normalise_pending(row.pending_message) or "", str(ttl),
                         "1" if row.drift_exempt else "0"])
        existed: set[str] = set()
        for start in range(0, len(rows), ROWS_PER_CALL):
            part = rows[start:start + ROWS_PER_CALL]
            flat = [value for values in args[start:start + ROWS_PER_CALL] for value in values]
            with redis_errors(self._where):
                reply = script("restore_sessions")(
                    self._client, [schema.state_key(r.session_id) for r in part], flat)
            existed.update(part[int(i) - 1].session_id for i in reply)
        return existed
