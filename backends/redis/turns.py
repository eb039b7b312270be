"""commit_turn: the state row and the turn's events in ONE Lua script.

Everything that can be checked in Python is checked before the call (so malformed input
never reaches the server): the events are validated (UUID ids, finite embeddings, ours
or the engine's own event objects) before anything is sent. The script re-checks what
only the server knows (versions, owners, existing event ids, key types) before its first
write, and answers lost races in-band, which become :class:`StateVersionConflict` here.

Unlike the engine's own script, ours keeps the owner check of ``save``: a scoped turn
cannot take over another owner's session. A retried turn whose first attempt landed
(its reply lost) finds the row at the new version with the same blob, owner and
pending, and every one of its event ids stored: it returns the new version instead of
a conflict, and writes nothing again.
"""

from __future__ import annotations

from typing import Any, Sequence

from backends.contract import MemoryEvent, validate_turn_events
from backends.errors import InvalidEvent
from backends.redis import schema
from backends.redis.event_codec import event_args, event_keys
from backends.redis.errors import mapped_error, redis_errors
from backends.redis.scripts import no_script_error, script
from backends.contract import validate_save_args
from backends.redis.state import (ALREADY_EXISTS, ALREADY_STORED, EVENT_EXISTS, WRITTEN,
                                         conflict_for)

_COMMIT_TURN = script("commit_turn")
#: a turn without events: the scripts of save (see TurnWriter)
_CAS, _INSERT = script("cas"), script("insert")
#: insert.lua's integer replies, as commit_turn's codes
_INSERTED = {1: WRITTEN, 2: ALREADY_STORED, 0: ALREADY_EXISTS}


def _run(client: Any, where: str, mode: str, state_key: str, state_args: list,
         events: list[MemoryEvent], session_id: str | None = None,
         cut_connection: bool = False) -> list[int]:
    script_keys: list[Any] = [state_key]
    script_args: list[Any] = [mode, *state_args, str(len(events))]
    for event in events:
        script_keys.extend(event_keys(event))
        script_args.extend(event_args(event))
    with redis_errors(where, session_id):
        reply = script("commit_turn")(client, script_keys, script_args,
                                      cut_connection=cut_connection)
    return reply


class TurnWriter:
    """commit_turn for one adapter: its clients, its redacted URI and its TTL bound once.

    A turn without events is the hot path: one per engine turn, and on loopback its whole
    budget is a round trip of a few tens of microseconds, of which each Python call or
    check here takes a measurable share (see bench/bench_redis.py). So that turn is
    checked inline for the common argument types (anything else goes through the shared
    ``validate_save_args``, which gives the refusal), and its EVALSHA goes straight to the
    adapter's script client with the arguments written out; a NOSCRIPT reply loads the
    script and sends the call again, as :meth:`LuaScript.run` does for every other call.

    With no events a turn is exactly a save: the row's compare-and-set (or insert) with
    the owner rule and the lost-reply retry, which ``cas.lua`` and ``insert.lua`` are, with
    two arguments fewer than ``commit_turn.lua`` and none of its event checks to run on
    the server; measured, that is about 5% of the call against a ``return 1`` floor."""

    __slots__ = ("client", "script_client", "where", "ttl_text", "waits")

    def __init__(self, client: Any, script_client: Any, where: str, ttl_seconds: int,
                 waits: bool = False) -> None:
        self.client = client
        #: the standalone client kept for scripts (no command retry); None on a cluster,
        #: whose client routes each script to the node owning its key
        self.script_client = script_client
        self.where = where
        self.ttl_text = str(ttl_seconds)
        #: every script is followed by WAIT (``LuaScript.run`` does it): no shortcut here
        self.waits = waits

    def commit(self, session_id: str, blob: bytes, expected_version: int | None,
               owner_subject: str | None, pending_message: str | None,
               events: Sequence[MemoryEvent] | None, cut_connection: bool = False) -> int:
        """One turn (the adapter's commit_turn, arguments checked there for the cluster
        and the fault seam); a bound method, which Python calls faster than ``__call__``."""
        # the common case of validate_save_args inline (a subset of what it accepts)
        if not (session_id.__class__ is str and session_id and blob.__class__ is bytes
                and (expected_version is None
                     or (expected_version.__class__ is int and expected_version > 0))
                and (owner_subject is None or (owner_subject.__class__ is str and owner_subject))):
            validate_save_args(session_id, blob, expected_version, owner_subject)
            blob = bytes(blob)
        if expected_version is None:
            mode, expected, new_text, new_version = "insert", "", "1", 1
        else:
            new_version = expected_version + 1
            mode, expected, new_text = "update", str(expected_version), str(new_version)
        owner = owner_subject or ""
        pending = pending_message or ""  # normalise_pending's rule: an empty one is none
        state_key = schema.STATE_PREFIX + session_id  # schema.state_key, without the call
        target = self.script_client
        if events or cut_connection or target is None:
            checked = validate_turn_events(events)
            reply = self._general(session_id, cut_connection, checked, state_key,
                                  [mode, expected, new_text, blob, owner, pending,
                                   self.ttl_text, str(len(checked))])
            code = reply[0]
        elif expected_version is None:  # no events: save's insert (see the class)
            checked = []
            args: tuple[Any, ...] = (1, state_key, blob, "1", owner, pending, self.ttl_text)
            try:
                reply = _INSERT.run(target, *args) if self.waits \
                    else target.evalsha(_INSERT.sha, *args)
            except Exception as exc:  # noqa: BLE001 - NOSCRIPT, mapped, or re-raised
                reply = self._after_failure(exc, session_id, _INSERT, args)
            code, reply = _INSERTED[reply], (None, "")
        else:  # no events: save's compare-and-set
            checked = []
            args = (1, state_key, expected, new_text, blob, owner, pending, self.ttl_text)
            try:
                reply = _CAS.run(target, *args) if self.waits else target.evalsha(_CAS.sha, *args)
            except Exception as exc:  # noqa: BLE001 - NOSCRIPT, mapped, or re-raised
                reply = self._after_failure(exc, session_id, _CAS, args)
            code = reply[0]
        if code == WRITTEN or code == ALREADY_STORED:  # ALREADY_STORED: a lost reply's retry
            return new_version
        if code == EVENT_EXISTS:
            duplicate = checked[int(reply[1]) - 1].event_id
            raise InvalidEvent(f"event id {duplicate!r} already exists; "
                               "nothing of the turn was written")
        raise conflict_for(code, session_id, expected_version, reply[1])

    def _general(self, session_id: str, cut_connection: bool, checked: list[MemoryEvent],
                 state_key: str, script_args: list[Any]) -> Any:
        """A turn with events, on a cluster, or through the conformance fault seam."""
        script_keys: list[Any] = [state_key]
        for event in checked:
            script_keys.extend(event_keys(event))
            script_args.extend(event_args(event))
        try:
            if self.script_client is None or cut_connection:
                return _COMMIT_TURN(self.client, script_keys, script_args,
                                    cut_connection=cut_connection)
            return _COMMIT_TURN.run(self.script_client, len(script_keys),
                                    *script_keys, *script_args)
        except Exception as exc:
            mapped = mapped_error(exc, self.where, session_id)
            if mapped is None:
                raise
            raise mapped from exc

    def _after_failure(self, exc: Exception, session_id: str, lua: Any,
                       keys_and_args: tuple[Any, ...]) -> Any:
        """The hot path's call of ``lua`` failed: NOSCRIPT loads the script and sends the
        call again; a driver error is raised categorised, anything else as it is."""
        if isinstance(exc, no_script_error()):
            try:
                return lua.load_and_run(self.script_client, *keys_and_args)
            except Exception as again:  # noqa: BLE001 - mapped below, or re-raised
                exc = again
        mapped = mapped_error(exc, self.where, session_id)
        if mapped is None:
            raise exc
        raise mapped from exc


def append_events(client: Any, where: str, events: Sequence[MemoryEvent]) -> list[MemoryEvent]:
    """Append events outside a turn (same script, no state row); returns them sequenced."""
    checked = validate_turn_events(events)
    if not checked:
        return []
    reply = _run(client, where, "none", schema.state_key(""), ["", "", b"", "", "", "0"], checked)
    if reply[0] == EVENT_EXISTS:
        duplicate = checked[int(reply[1]) - 1].event_id
        raise InvalidEvent(f"event id {duplicate!r} already exists; nothing was written")
    return [event.with_sequence(int(seq)) for event, seq in zip(checked, reply[1:])]
