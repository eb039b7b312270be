"""How a MemoryEvent is laid out in its Redis hash (and read back), in the engine's shape.

Every field of the layout is always present: absent strings are stored as ``''``
(owner_subject, session_id, source_event_id), the embedding as a JSON array (``[]`` when
empty, never ``null``: the engine parses it as a list), the sequence as a decimal.
Reading also accepts the older encodings this store once wrote (a ``null`` or empty
embedding reads as ``()``); anything else that is not the layout is a damaged row
(:class:`~backends.errors.CorruptEvent`, naming the event and the field).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Mapping

from backends.contract import MemoryEvent, as_utc, meta_json
from backends.contract.embedding_text import embedding_json_bytes
from backends.errors import CorruptEvent
from backends.contract.event_fields import strict_embedding, strict_meta
from backends.redis import schema


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
        schema.event_key(event.event_id),
        schema.user_seq_index_key(event.user_id),
        schema.user_time_index_key(event.user_id),
        schema.user_counter_key(event.user_id),
    ]


_DECIMAL = re.compile(r"[0-9]+")


def decode_event(raw: Mapping[bytes, bytes], key: str | None = None) -> MemoryEvent | None:
    """A MemoryEvent from HGETALL output; None for a missing hash. ``''`` and a missing
    field both mean absent (owner, session, source); a null embedding reads as ().

    Strict: a field that is not UTF-8, a ``meta`` that is not a JSON object, an
    ``embedding`` that is not a JSON array of finite numbers, a missing ``user_id`` or
    ``created_at``, a ``created_at`` that is not ISO-8601 or a ``sequence`` that is not a
    decimal raises :class:`CorruptEvent` naming the event and the field (``key``, when
    given, names the event whose hash lacks its own ``event_id``)."""
    if not raw:
        return None
    fallback = key[len(schema.EVENT_PREFIX):] if key and key.startswith(schema.EVENT_PREFIX) else "?"
    fields: dict[str, str] = {}
    bad: tuple[str, str] | None = None
    for k, v in raw.items():
        name = k.decode("utf-8", errors="replace")
        try:
            fields[name] = v.decode("utf-8")
        except UnicodeDecodeError:
            bad = bad or (name, "is not UTF-8 text")
    event_id = fields.get("event_id") or fallback
    user_id = fields.get("user_id") or None

    def damaged(field: str, problem: str) -> CorruptEvent:
        return CorruptEvent(event_id, field, problem, user_id=user_id)

    if bad is not None:
        raise damaged(*bad)
    for required in ("event_id", "user_id", "created_at"):
        if not fields.get(required):
            raise damaged(required, "is missing")
    embedding = strict_embedding(fields.get("embedding", ""), event_id, user_id)
    meta = strict_meta(fields.get("meta", ""), event_id, user_id)
    sequence = fields.get("sequence") or ""
    if sequence and not _DECIMAL.fullmatch(sequence):
        raise damaged("sequence", f"is not a decimal ({sequence[:20]!r})")
    try:
        created = datetime.fromisoformat(fields["created_at"])
    except ValueError:
        raise damaged("created_at", f"is not an ISO-8601 time ({fields['created_at'][:40]!r})") \
            from None
    return MemoryEvent(
        event_id=event_id,
        user_id=fields["user_id"],
        owner_subject=fields.get("owner_subject", ""),
        session_id=fields.get("session_id", ""),
        created_at=as_utc(created),
        content=fields.get("content", ""),
        embedding=embedding,
        meta=meta,
        source_event_id=fields.get("source_event_id") or None,
        sequence=int(sequence) if sequence else 0,
    )
