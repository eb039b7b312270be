"""How a MemoryEvent is laid out in its Redis hash (and read back), in the engine's shape.

Every field of the layout is always present: absent strings are stored as ``''``
(owner_subject, session_id, source_event_id), the embedding as a JSON array (``[]`` when
empty, never ``null``: the engine parses it as a list), the sequence as a decimal.
Reading also accepts the older encodings this store once wrote (a ``null`` or empty
embedding reads as ``()``).
"""

from __future__ import annotations

import json
from datetime import timezone
from typing import Mapping

from backends.contract import MemoryEvent, meta_json
from backends.embedding_text import embedding_json_bytes
from backends.errors import IntegrityError
from backends.redis import keys


def event_args(event: MemoryEvent) -> list[str | bytes]:
    """The ten per-event arguments commit_turn.lua expects, in its order (the event is
    already validated: UUID ids, finite embedding, JSON-safe meta)."""
    created = event.created_at.astimezone(timezone.utc)
    return [
        event.event_id,
        event.user_id,
        event.owner_subject or "",
        event.session_id or "",
        created.isoformat(),
        repr(created.timestamp()),
        event.content,
        embedding_json_bytes(event.embedding),  # the engine's json.dumps bytes, fast
        meta_json(event.meta),
        event.source_event_id or "",
    ]


def event_keys(event: MemoryEvent) -> list[str]:
    """The four keys an event touches, in commit_turn.lua's order."""
    return [
        keys.event_key(event.event_id),
        keys.user_seq_index_key(event.user_id),
        keys.user_time_index_key(event.user_id),
        keys.user_counter_key(event.user_id),
    ]


def _json(raw: str, field: str, event_id: str):
    if raw == "":
        return None
    try:
        return json.loads(raw)
    except ValueError:
        raise IntegrityError(f"event {event_id!r} has malformed JSON in {field!r}") from None


def decode_event(raw: Mapping[bytes, bytes]) -> MemoryEvent | None:
    """A MemoryEvent from HGETALL output; None for a missing hash. ``''`` and a missing
    field both mean absent (owner, session, source); a null embedding reads as ()."""
    if not raw:
        return None
    fields = {k.decode("utf-8"): v.decode("utf-8", errors="replace") for k, v in raw.items()}
    event_id = fields.get("event_id", "")
    try:
        embedding = _json(fields.get("embedding", ""), "embedding", event_id)
        if embedding is not None and not isinstance(embedding, list):
            raise TypeError("embedding is not a JSON array")
        meta = _json(fields.get("meta", ""), "meta", event_id) or {}
        if not isinstance(meta, dict):
            raise TypeError("meta is not a JSON object")
        record = {
            "event_id": event_id,
            "user_id": fields["user_id"],
            "owner_subject": fields.get("owner_subject", ""),
            "session_id": fields.get("session_id", ""),
            "created_at": fields["created_at"],
            "content": fields.get("content", ""),
            "embedding": embedding,
            "meta": meta,
            "source_event_id": fields.get("source_event_id") or None,
            "sequence": fields.get("sequence") or None,
        }
        return MemoryEvent.from_dict(record)
    except (KeyError, ValueError, TypeError) as exc:
        raise IntegrityError(f"event {event_id!r} does not have the expected layout") from exc
