"""The archive's one byte encoding of a record, canonical JSON (sorted keys, no spaces,
ASCII, no NaN), and a faster spelling of the same bytes for an archive's events.

Checksums and the chain digest cover these bytes, so they are pinned: ``json.dumps`` with
the options of :func:`canonical` is the definition. An export writes hundreds of thousands
of events, each the same ten fields, and spends most of its time per event in that
encoder; :func:`events_json` writes ``canonical([event_to_record(e) ...])`` for
:class:`~backends.contract.MemoryEvent` values of the usual types directly, each piece as
the standard encoder's own C code spells it: strings through the same escaper
(``encode_basestring_ascii``), the sequence by ``int.__repr__``, the embedding (floats
only) through :func:`backends.contract.embedding_text.compact_embedding_json` (``repr``'s digits,
property-tested), the meta through the standard encoder itself. An event of any other
shape is encoded the plain way; when anything raises, all of them are, which then gives
the error that writing them plainly gives. A property test pins the two together.
"""

from __future__ import annotations

import json
from datetime import timezone
from json import encoder as _json_encoder
from json.encoder import encode_basestring_ascii as _string
from typing import Any, Iterable

from backends.contract import MemoryEvent
from backends.contract.embedding_text import compact_embedding_json

#: one encoder kept (``json.dumps`` builds one per call for any non-default option)
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                              allow_nan=False)
#: its C core, made once and without the circular-reference check, for pieces of an
#: event (a cycle raises RecursionError there, and the plain way then reports it)
_C_MAKE = getattr(_json_encoder, "c_make_encoder", None)
_C_CORE = (None if _C_MAKE is None
           else _C_MAKE(None, _CANONICAL.default, _string, None, ":", ",", True, False, False))
_ONLY_FLOATS = {float}
#: from this many values on, orjson spells an embedding faster than the C core
_LONG_EMBEDDING = 16
#: an event record's keys in sorted order (MemoryEvent.to_dict's and ``sequence``)
_EVENT_TEMPLATE = ('{"content":%s,"created_at":%s,"embedding":%s,"event_id":%s,"meta":%s,'
                   '"owner_subject":%s,"sequence":%s,"session_id":%s,"source_event_id":%s,'
                   '"user_id":%s}')


def canonical(record: Any) -> bytes:
    """The one byte encoding of a record (what checksums and the chain digest cover):
    ``json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
    allow_nan=False)`` as ASCII."""
    return _CANONICAL.encode(record).encode("ascii")


def event_to_record(event: Any) -> dict[str, Any]:
    """``MemoryEvent.to_dict()`` (the engine's keys) plus ``sequence``, which the engine
    leaves to the store and an archive must keep so an import can continue the log."""
    return {**event.to_dict(), "sequence": event.sequence}


class EncodedEvents:
    """A session's events already encoded by :func:`events_json` (elsewhere: an export's
    events pass in a process of its own); ``len`` is how many there are."""

    __slots__ = ("json", "count")

    def __init__(self, json: bytes, count: int) -> None:
        self.json = json
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"EncodedEvents({self.count} event(s), {len(self.json)} bytes)"

    def records(self) -> list[Any]:
        """The events' records, decoded (what the plain way of writing a line puts in)."""
        return json.loads(self.json)


def events_json(events: Iterable[Any]) -> bytes:
    """``canonical([event_to_record(e) for e in events])``, fast for the usual events
    (and the bytes themselves of :class:`EncodedEvents`)."""
    if type(events) is EncodedEvents:
        return events.json
    events = tuple(events)
    try:
        return ("[" + ",".join([_event_json(e) for e in events]) + "]").encode("ascii")
    except Exception:  # noqa: BLE001 - the plain way gives the error (of the right event)
        return canonical([event_to_record(e) for e in events])


def _event_json(event: Any) -> str:
    fast = _usual_event_json(event) if type(event) is MemoryEvent else None
    return fast if fast is not None else _CANONICAL.encode(event_to_record(event))


def _piece(value: Any) -> str:
    return _CANONICAL.encode(value) if _C_CORE is None else "".join(_C_CORE(value, 0))


def _usual_event_json(event: MemoryEvent) -> str | None:
    """The event's canonical record, or None when a field is not of the usual type."""
    content, event_id, owner, session = (event.content, event.event_id, event.owner_subject,
                                         event.session_id)
    source, user, sequence, embedding = (event.source_event_id, event.user_id,
                                         event.sequence, event.embedding)
    if not (type(content) is str and type(event_id) is str and type(owner) is str
            and type(session) is str and type(user) is str and type(sequence) is int
            and (source is None or type(source) is str) and type(embedding) is tuple):
        return None
    if not embedding:
        vector = "[]"
    elif set(map(type, embedding)) != _ONLY_FLOATS:
        return None  # to_dict converts them with float()
    elif len(embedding) >= _LONG_EMBEDDING:
        vector = compact_embedding_json(embedding).decode("ascii")  # ValueError on NaN
    else:
        vector = _piece(embedding)  # ValueError on NaN
    meta = event.meta
    created = event.created_at.astimezone(timezone.utc).isoformat()  # as to_dict spells it
    return _EVENT_TEMPLATE % (
        _string(content), _string(created), vector, _string(event_id),
        "{}" if type(meta) is dict and not meta else _piece(dict(meta)),
        _string(owner), int.__repr__(sequence), _string(session),
        "null" if source is None else _string(source), _string(user))
