"""The contract's argument rules, said once: what every store refuses before any I/O
(save arguments, versions, events and their embeddings)."""

from __future__ import annotations

import json
import math
import operator
import re
import sys
from collections.abc import Iterable, Mapping  # not typing's: isinstance is on the hot path
from dataclasses import replace
from datetime import datetime
from typing import Any, Sequence

from backends.contract.values import MemoryEvent, coerce_event
from backends.errors import InvalidEvent, StateVersionConflict


def normalise_pending(pending_message: str | None) -> str | None:
    """An empty pending message is stored as none."""
    return pending_message if pending_message else None


def check_delete_version(session_id: str, stored_version: int,
                         expected_version: int | None) -> None:
    """The rule of a version-checked delete, said once: a row that has moved past what
    the caller saw is a conflict, and nothing is deleted."""
    if expected_version is None:
        return
    if isinstance(expected_version, bool) or not isinstance(expected_version, int) \
            or expected_version < 1:
        raise ValueError("expected_version must be None or a positive int")
    if stored_version != expected_version:
        raise StateVersionConflict(
            f"session {session_id!r} is at version {stored_version}, not "
            f"{expected_version}; nothing was deleted"
        )


def validate_save_args(session_id: Any, blob: Any, expected_version: Any,
                       owner_subject: Any) -> None:
    """Refuse malformed save/restore arguments before any I/O, the same way in every store.

    ``expected_version`` is the CAS version (or the version to restore at): ``None`` or a
    positive int, never a bool.
    """
    if not isinstance(session_id, str) or not session_id:
        raise ValueError("session_id must be a non-empty string")
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise TypeError("blob must be bytes")
    if expected_version is not None and (
        isinstance(expected_version, bool) or not isinstance(expected_version, int)
        or expected_version < 1
    ):
        raise ValueError("expected_version must be None or a positive int")
    if owner_subject is not None and (not isinstance(owner_subject, str) or not owner_subject):
        raise ValueError("owner_subject must be None or a non-empty string")


_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _uuid_text(value: Any, name: str) -> str:
    """The canonical text of a UUID given as a UUID object or a string; InvalidEvent else."""
    import uuid

    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str):
        if _CANONICAL_UUID.fullmatch(value):
            return value
        try:
            return str(uuid.UUID(value))
        except ValueError:
            pass
    raise InvalidEvent(f"event {name} must be a UUID (the engine cannot read {value!r})")


_STRICT_JSON = json.JSONEncoder(allow_nan=False)


def meta_json(meta: Mapping[str, Any]) -> str:
    """An event's meta as the engine stores it: ``json.dumps`` with its defaults, NaN and
    infinity refused (ValueError; TypeError for what JSON cannot hold). One encoder is
    kept: ``json.dumps`` builds a new one per call for any non-default option."""
    return _STRICT_JSON.encode(dict(meta))


def validate_event(event: Any) -> MemoryEvent:
    """Validate one event before anything of its turn is written; return it in canonical
    form (UUID text, float embedding).

    Raises :class:`InvalidEvent` naming the field. Stores call this for every event of a
    turn *before* their first write, so a malformed event leaves state and events untouched.
    """
    event = coerce_event(event)
    event_id = _uuid_text(event.event_id, "event_id")
    source = (None if event.source_event_id is None
              else _uuid_text(event.source_event_id, "source_event_id"))
    if not isinstance(event.user_id, str) or not event.user_id:
        raise InvalidEvent("event user_id must be a non-empty string")
    if not isinstance(event.content, str):
        raise InvalidEvent("event content must be a string")
    if not isinstance(event.created_at, datetime) or event.created_at.tzinfo is None:
        raise InvalidEvent("event created_at must be a timezone-aware datetime")
    if event.sequence not in (0, None):
        raise InvalidEvent("event sequence is assigned by the store; leave it 0")
    embedding = _checked_embedding(event.embedding)
    if not isinstance(event.meta, Mapping):
        raise InvalidEvent("event meta must be a mapping")
    try:
        meta_json(event.meta)
    except (TypeError, ValueError):
        raise InvalidEvent("event meta must be JSON-serialisable") from None
    for name in ("owner_subject", "session_id"):
        if not isinstance(getattr(event, name), str):
            raise InvalidEvent(f"event {name} must be a string ('' when absent)")
    if ((event_id, source) == (event.event_id, event.source_event_id)
            and embedding is event.embedding):
        return event
    return replace(event, event_id=event_id, source_event_id=source, embedding=embedding)


def _checked_embedding(embedding: Any) -> tuple[float, ...]:
    """Finite floats, as a tuple, with no per-float Python work: a numpy array is checked
    in one vectorised pass; a tuple or list of exact floats is recognised by a C-level
    count of their types and kept; any other sequence goes through ``float()`` once, at C
    speed. One C-level sum then screens it (a sum is finite only if every value is; the rare
    overflowing sum is settled value by value)."""
    if isinstance(embedding, (str, bytes)) or not isinstance(embedding, Iterable):
        raise InvalidEvent("event embedding must be a sequence of numbers")
    array = _numeric_array(embedding)
    if array is not None:
        import numpy as np

        if not bool(np.isfinite(array).all()):
            _refuse_non_finite(array.tolist())
        return tuple(array.tolist())
    if (isinstance(embedding, (tuple, list))
            and operator.countOf(map(type, embedding), float) == len(embedding)):
        values = tuple(embedding)  # exact floats already (a tuple is kept, so is the event)
    else:
        values = _floats(embedding)
    if not math.isfinite(sum(values)) and not all(map(math.isfinite, values)):
        _refuse_non_finite(values)
    return values


def _numeric_array(embedding: Any) -> Any:
    """A one-dimensional numpy array of numbers as float64; None for anything else (numpy
    is only looked at when the caller already loaded it)."""
    np = sys.modules.get("numpy")
    if np is None or not isinstance(embedding, np.ndarray) or embedding.dtype.kind not in "fiub":
        return None
    if embedding.ndim != 1:
        raise InvalidEvent("event embedding must be a sequence of numbers")
    return embedding.astype(np.float64, copy=False)


def _refuse_non_finite(values: Sequence[float]) -> None:
    bad = next(i for i, x in enumerate(values) if not math.isfinite(x))
    raise InvalidEvent(f"event embedding must not contain NaN or infinity "
                       f"(value {bad} is {values[bad]!r})")


def _floats(embedding: Any) -> tuple[float, ...]:
    """``float()`` of every value; InvalidEvent for anything that is not a number."""
    try:
        return tuple(map(float, embedding))
    except (TypeError, ValueError, OverflowError):
        raise InvalidEvent("event embedding must be a sequence of numbers") from None


def validate_turn_events(events: Iterable[Any] | None) -> list[MemoryEvent]:
    """Validate every event of a turn; duplicate event ids within a turn are refused."""
    checked = [validate_event(e) for e in (events or ())]
    seen: set[str] = set()
    for event in checked:
        if event.event_id in seen:
            raise InvalidEvent(f"event id {event.event_id!r} appears twice in one turn")
        seen.add(event.event_id)
    return checked
