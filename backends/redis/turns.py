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

from backends.contract import MemoryEvent, normalise_pending, validate_turn_events
from backends.errors import InvalidEvent
from backends.redis import keys
from backends.redis.event_codec import event_args, event_keys
from backends.redis.failures import mapped_error, redis_errors
from backends.redis.scripts import script
from backends.contract import validate_save_args
from backends.redis.state_store import ALREADY_STORED, EVENT_EXISTS, WRITTEN, conflict_for

_COMMIT_TURN = script("commit_turn")


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


def commit_turn(
    client: Any,
    where: str,
    ttl_seconds: int,
    session_id: str,
    blob: bytes,
    *,
    expected_version: int | None,
    owner_subject: str | None,
    pending_message: str | None,
    events: Sequence[MemoryEvent] | None,
    cut_connection: bool = False,
    script_client: Any = None,
) -> int:
    """``script_client``: the standalone client the adapter keeps for its scripts, called
    as it is; None (a cluster, or a caller without one) looks it up from ``client``.

    A turn with no events is the hot path (one per engine turn, with a loopback round
    trip of a few tens of microseconds as its whole budget): it builds the script's
    arguments in place and catches driver errors itself instead of through helpers."""
    validate_save_args(session_id, blob, expected_version, owner_subject)
    checked = validate_turn_events(events) if events else []
    if expected_version is None:
        mode, expected, new_version = "insert", "", 1
    else:
        mode, expected, new_version = "update", str(expected_version), expected_version + 1
    script_keys: list[Any] = [keys.state_key(session_id)]
    script_args: list[Any] = [
        mode,
        expected,
        str(new_version),
        blob if blob.__class__ is bytes else bytes(blob),
        owner_subject or "",
        normalise_pending(pending_message) or "",
        str(ttl_seconds),
        str(len(checked)),
    ]
    for event in checked:
        script_keys.extend(event_keys(event))
        script_args.extend(event_args(event))
    try:
        if script_client is not None and not cut_connection:
            reply = _COMMIT_TURN.run(script_client, script_keys, script_args)
        else:
            reply = _COMMIT_TURN(client, script_keys, script_args, cut_connection=cut_connection)
    except Exception as exc:
        mapped = mapped_error(exc, where, session_id)
        if mapped is None:
            raise
        raise mapped from exc
    code = reply[0]
    if code == WRITTEN or code == ALREADY_STORED:  # ALREADY_STORED: a lost reply's retry
        return new_version
    if code == EVENT_EXISTS:
        duplicate = checked[int(reply[1]) - 1].event_id
        raise InvalidEvent(f"event id {duplicate!r} already exists; nothing of the turn was written")
    raise conflict_for(code, session_id, expected_version, reply[1])


def append_events(client: Any, where: str, events: Sequence[MemoryEvent]) -> list[MemoryEvent]:
    """Append events outside a turn (same script, no state row); returns them sequenced."""
    checked = validate_turn_events(events)
    if not checked:
        return []
    reply = _run(client, where, "none", keys.state_key(""), ["", "", b"", "", "", "0"], checked)
    if reply[0] == EVENT_EXISTS:
        duplicate = checked[int(reply[1]) - 1].event_id
        raise InvalidEvent(f"event id {duplicate!r} already exists; nothing was written")
    return [event.with_sequence(int(seq)) for event, seq in zip(checked, reply[1:])]
