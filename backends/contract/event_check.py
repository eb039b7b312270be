"""The one strict judge of a stored event: every backend's audit hands it the event's
fields as the store holds them (:class:`StoredEvent`) and reports what it says, so the
same damage gets the same verdict, in the same words, on Redis, MongoDB and SQL.

The embedding and meta rules are :mod:`backends.contract.event_fields` (the decoders'
own); the rest is the engine's view of a row: a UUID event id that is the row's key, a
user id, a creation time, an embedding that is an array (``null`` is not), a source
event id that is a UUID when present and, on a store that numbers events, a positive
sequence. Layout differences stay out of the verdict: JSON held as text (a Redis hash, a
SQL column) or as a document (MongoDB) is ``text``; a store that keeps no sequence (the
engine's SQL layout) is not ``sequenced``.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from backends.contract.event_fields import embedding_problem, meta_problem


class _Missing:
    """The row has no such field at all (a hash without it, a document without the key)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
_POSITIVE = re.compile(r"[1-9][0-9]*")


@dataclass(frozen=True)
class StoredEvent:
    """An event's fields as stored, before any decoding (:data:`MISSING` where the row has
    no such field). ``key`` is what the row is filed under (the Redis key's id, the
    document's ``_id``, the SQL primary key)."""

    key: Any
    event_id: Any = MISSING
    user_id: Any = MISSING
    created_at: Any = MISSING
    embedding: Any = MISSING
    meta: Any = MISSING
    source_event_id: Any = MISSING
    sequence: Any = MISSING
    #: JSON fields are held as text (Redis, SQL), not as native arrays and documents
    text: bool = True
    #: the store numbers each user's events (not the engine's SQL layout)
    sequenced: bool = True


class EventProblem(NamedTuple):
    """One field of a stored event the engine could not read, and why."""

    field: str
    problem: str

    def __str__(self) -> str:
        return f"{self.field} {self.problem}"


def _absent(value: Any) -> bool:
    return value is MISSING or value is None or value == "" or value == b""


def _text(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return value


def _shown(value: Any) -> str:
    text = _text(value)
    return repr(text if text is not None else value)[:42]


def _is_uuid(value: Any) -> bool:
    if isinstance(value, uuid.UUID):  # a BSON UUID
        return True
    text = _text(value)
    if not isinstance(text, str):
        return False
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _event_id(raw: StoredEvent) -> str | None:
    if not _is_uuid(raw.event_id) or str(_text(raw.event_id)) != str(_text(raw.key)):
        return "is not a UUID matching its key"
    return None


def _user_id(raw: StoredEvent) -> str | None:
    if _absent(raw.user_id):
        return "is missing"
    text = _text(raw.user_id)
    if not isinstance(text, str):
        return f"is not a string (a {type(raw.user_id).__name__})"
    return None


def _created_at(raw: StoredEvent) -> str | None:
    value = raw.created_at
    if _absent(value):
        return "is missing"
    if isinstance(value, datetime):
        return None
    text = _text(value)
    if not isinstance(text, str):
        return f"is not a date (a {type(value).__name__})"
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return f"is not an ISO-8601 time ({_shown(text)})"
    return None


def _embedding(raw: StoredEvent) -> str | None:
    value = raw.embedding
    if value is MISSING:
        return "is missing"
    text = _text(value)
    if value is None or (isinstance(text, str) and text.strip() in ("", "null")):
        return "is null"
    return embedding_problem(value, text=raw.text)[1] or None


def _meta(raw: StoredEvent) -> str | None:
    if raw.meta is MISSING or raw.meta is None:
        return None
    return meta_problem(raw.meta, text=raw.text)[1] or None


def _source(raw: StoredEvent) -> str | None:
    if _absent(raw.source_event_id) or _is_uuid(raw.source_event_id):
        return None
    return f"is not a UUID ({_shown(raw.source_event_id)})"


def _sequence(raw: StoredEvent) -> str | None:
    if not raw.sequenced:
        return None
    value = raw.sequence
    if _absent(value):
        return "is missing"
    if isinstance(value, int) and not isinstance(value, bool):
        return None if value >= 1 else f"is not a positive integer ({_shown(str(value))})"
    text = _text(value)
    if isinstance(text, str) and _POSITIVE.fullmatch(text):
        return None
    return f"is not a positive integer ({_shown(text if isinstance(text, str) else value)})"


_RULES = (("event_id", _event_id), ("user_id", _user_id), ("created_at", _created_at),
          ("embedding", _embedding), ("meta", _meta), ("source_event_id", _source),
          ("sequence", _sequence))


def event_problems(raw: StoredEvent) -> list[EventProblem]:
    """Every field of ``raw`` the engine could not read, in field order; empty when the
    event is sound."""
    found = []
    for name, rule in _RULES:
        problem = rule(raw)
        if problem:
            found.append(EventProblem(name, problem))
    return found


def describe_problems(problems: list[EventProblem]) -> str:
    """The problems as one line, the way every audit words them."""
    return "; ".join(str(p) for p in problems)
