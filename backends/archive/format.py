"""The sessions archive format, version 4 (versions 1 to 3 are still read): JSON Lines,
gzip when the name ends in ``.gz``.

Line 1 is the header, then one line per session, then (v2) one line per whole-user log
(v3: one line per part of it), then the trailer::

    {"kind":"header","format":"semvecctl-sessions","format_version":4,...}
    {"kind":"session","n":1,"session_id":...,"blob":<base64>,"expires_at":...,"drift_exempt":false,...}
    {"kind":"user","n":2,"user_id":...,"part":1,"final":false,"counter":null,"events":[...],...}
    {"kind":"user","n":3,"user_id":...,"part":2,"final":true,"counter":7,"events":[...],...}
    {"kind":"trailer","count":N,"users":U,"digest":<hex>}

Every line is canonical JSON (sorted keys, no spaces, ASCII), so a reader can re-encode a
parsed record and get the writer's bytes back. ``line_sha256`` covers the record without
that field; ``n`` numbers the records from 1, which makes a reordered or a dropped line an
error with a line number rather than only a digest mismatch; the trailer's ``digest`` is
one sha256 run over the header line and every record line in order, so nothing can be
swapped, added or removed without the trailer disagreeing.

Version 2 adds, per session, ``drift_exempt``, an optional ``updated_at`` (the source's
last write time where it keeps one, so an import keeps the idle clock) and ``expires_at`` (an absolute UTC time,
so an import applies the time *remaining when it runs*; v1's ``ttl_seconds`` was the time
left at export and drifted by however long the archive sat on disk), optional
``events`` (the session's compliance events: ``MemoryEvent.to_dict()`` plus ``sequence``), and
``user`` records (a user's whole log and sequence counter, from ``export --user``).
A v1 session's ``ttl_seconds`` is read as ``header.created_at + ttl_seconds``.

Version 3 splits a user's log into consecutive parts of at most :data:`USER_PART_EVENTS`
events (``part`` numbered from 1, ``final`` on the last), so neither writer nor reader
holds a whole log as one line; only the final part carries the counter (read after every
event). A v2 user record reads as one final part.

Version 4 lets the header carry the source's erasure ledger (``ledger``: the secrets its
entries are keyed under, as hex, and the entries; never an id), so a store restored from
the archive withholds an erased subject from the next restore too (see
:mod:`backends.transfer.withhold`). The header is in the trailer's digest like every line.

Version 5 adds crypto-shredding (:mod:`backends.archive.shred`): with ``shred`` in the
header (``{"key_id": ...}``, the ledger secret the keyring's names are hashed under), each
session line is ``{"kind","n","sealed","line_sha256"}``: ``sealed`` is a list of parts,
each ``{"key","nonce","data"[,"events"]}``; the first is the session without its events
(canonical JSON, ``"events": []`` when it carried events) under the session's key, the
others each subject's events under the subject's key (``events``: how many). The line
checksum and the chain digest cover the ciphertext. Without ``shred`` a v5 line is a v4
line.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping, Sequence, TypeGuard, Union

from backends.archive.canonical import EncodedEvents, canonical, event_to_record, events_json
from backends.archive.errors import ArchiveDamaged, ArchiveUnsupported
from backends.contract import as_utc

FORMAT_NAME = "semvecctl-sessions"
FORMAT_VERSION = 5
#: format versions this code reads
READABLE_VERSIONS = frozenset({1, 2, 3, 4, 5})
#: events per user record (v3): what a writer or reader holds of one log at a time
USER_PART_EVENTS = 500

_HEADER_V1 = frozenset({"kind", "format", "format_version", "source_backend", "source_uri",
                        "created_at", "tool", "tool_version", "with_items", "filters"})
HEADER_KEYS = {1: _HEADER_V1, 2: _HEADER_V1 | {"with_events"}, 3: _HEADER_V1 | {"with_events"},
               4: _HEADER_V1 | {"with_events", "ledger"},
               5: _HEADER_V1 | {"with_events", "ledger", "shred"}}
_SESSION_COMMON = frozenset({"kind", "n", "session_id", "version", "owner_subject",
                             "pending_message", "blob", "blob_sha256", "items", "line_sha256"})
SESSION_KEYS = {1: _SESSION_COMMON | {"ttl_seconds"},
                2: _SESSION_COMMON | {"expires_at", "drift_exempt", "events", "updated_at"}}
SESSION_KEYS[3] = SESSION_KEYS[4] = SESSION_KEYS[5] = SESSION_KEYS[2]
#: a sealed session line (v5 with ``shred``)
SEALED_KEYS = frozenset({"kind", "n", "sealed", "line_sha256"})
_USER_V2 = frozenset({"kind", "n", "user_id", "counter", "events", "line_sha256"})
USER_KEYS = {2: _USER_V2, 3: _USER_V2 | {"part", "final"}}
USER_KEYS[4] = USER_KEYS[5] = USER_KEYS[3]
TRAILER_KEYS = {1: frozenset({"kind", "count", "digest"}),
                2: frozenset({"kind", "count", "users", "digest"})}
TRAILER_KEYS[3] = TRAILER_KEYS[4] = TRAILER_KEYS[5] = TRAILER_KEYS[2]
ITEM_KEYS = frozenset({"item_id", "text", "embedding", "tier", "tiers", "unit", "created_at",
                       "updated_at"})


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def parse_utc(value: str) -> datetime:
    """An ISO timestamp as an aware UTC datetime (``Z`` accepted; naive means UTC)."""
    return as_utc(datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value))


def iso_utc(value: datetime) -> str:
    return value.astimezone(timezone.utc).isoformat()


@dataclass(frozen=True)
class ArchiveHeader:
    source_backend: str
    source_uri: str
    created_at: str
    tool_version: str
    with_items: bool = False
    filters: Mapping[str, Any] = field(default_factory=dict)
    with_events: bool = False
    #: the format version the archive was written in (what is written is always the newest)
    format_version: int = FORMAT_VERSION
    #: the source's erasure ledger (v4: ``{"keys": [...], "entries": [...]}``), or None
    ledger: Mapping[str, Any] | None = None
    #: v5: ``{"key_id": ...}`` when the sessions are sealed for a shred keyring, or None
    shred: Mapping[str, Any] | None = None

    def to_record(self) -> dict[str, Any]:
        return {
            # v5 only where it is needed (sealed sessions): a v4 reader reads the rest
            "kind": "header", "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION if self.shred else 4,
            "source_backend": self.source_backend, "source_uri": self.source_uri,
            "created_at": self.created_at, "tool": "semvecctl", "tool_version": self.tool_version,
            "with_items": bool(self.with_items), "with_events": bool(self.with_events),
            "filters": dict(self.filters),
            **({"ledger": dict(self.ledger)} if self.ledger else {}),
            **({"shred": dict(self.shred)} if self.shred else {}),
        }

    @staticmethod
    def now() -> str:
        return utc_now().isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class SessionRecord:
    """One session as archived. ``items`` / ``events`` are None when the export did not
    carry them (as opposed to an empty tuple: the session had none). ``expires_at`` is
    the absolute UTC expiry, None when the session does not expire."""

    session_id: str
    version: int
    owner_subject: str | None
    pending_message: str | None
    blob: bytes
    expires_at: datetime | None = None
    items: tuple[Any, ...] | None = None  # MemoryItem
    drift_exempt: bool = False
    events: tuple[Any, ...] | None = None  # MemoryEvent, with their sequence numbers
    #: the source's last write time (SQL, MongoDB), None where the store keeps none
    updated_at: datetime | None = None
    #: v5 sealed: the state's key was destroyed (crypto-shredded); ``session_id`` is then a
    #: placeholder, the state is not readable and only the events whose keys remain are here
    shredded: bool = False

    @property
    def blob_sha256(self) -> str:
        return sha256_hex(self.blob)

    def ttl_left(self, now: datetime | None = None) -> int | None:
        """Whole seconds until expiry (rounded up) at ``now``; None = no expiry; <= 0 =
        already expired."""
        if self.expires_at is None:
            return None
        left = (self.expires_at - (now or utc_now())).total_seconds()
        return math.ceil(left) if left > 0 else 0


@dataclass(frozen=True)
class UserRecord:
    """A user's compliance log (``export --user``), or one part of it (v3): events with
    their sequence numbers, and on the final part the user's counter (the last sequence
    handed out; None when the source could not report it, then an import continues after
    the highest event). Parts of one log are consecutive, numbered from 1."""

    user_id: str
    counter: int | None
    events: tuple[Any, ...]  # MemoryEvent
    part: int = 1
    final: bool = True


ArchiveRecord = Union[SessionRecord, UserRecord]


def _iso(value: datetime | None) -> str | None:
    return None if value is None else as_utc(value).isoformat()


def item_to_record(item: Any) -> dict[str, Any]:
    """A MemoryItem as JSON. Session and owner are the session's, so they are not repeated;
    only live items are archived, so ``evicted`` is not either."""
    return {
        "item_id": item.item_id,
        "text": item.text,
        "embedding": [float(x) for x in item.embedding] if item.embedding is not None else None,
        "tier": item.tier,
        "tiers": list(item.tiers),
        "unit": dict(item.unit),
        "created_at": _iso(item.created_at),
        "updated_at": _iso(item.updated_at),
    }


#: hold the checksum's and the events' places while a signed line is encoded (plain
#: ASCII strings: encoded as they are)
_CHECKSUM_SLOT = b'"line_sha256":"' + b"0" * 64 + b'"'
_EVENTS_SLOT = b'"events":"' + b"1" * 64 + b'"'


def signed_line(body: dict[str, Any], events: Sequence[Any] | None = None) -> bytes:
    """``canonical`` of ``body`` (with ``"events"``: the events' records, when ``events``
    is not None) and its ``line_sha256``, in one encoding instead of two.

    A canonical object is its members, each encoded alone, joined by commas in key
    order: the line is encoded with placeholders for the events (then written by
    :func:`~backends.archive.canonical.events_json`) and for the checksum; the body's own
    bytes are the line less the checksum member and one comma, and their checksum takes
    its placeholder's place. Where a placeholder's bytes are not found exactly once (they
    could recur only inside a nested object), the body already has either key, or
    anything raises, the line is written plainly, which then gives the bytes or the error."""
    if "line_sha256" in body or "events" in body:
        return _plain_line(body, events)
    slots = {**body, "line_sha256": "0" * 64}
    if events is not None:
        slots["events"] = "1" * 64
    try:
        line = canonical(slots)
        if events is not None:
            if line.count(_EVENTS_SLOT) != 1:
                return _plain_line(body, events)
            line = line.replace(_EVENTS_SLOT, b'"events":' + events_json(events))
    except Exception:  # noqa: BLE001 - the plain way gives the error
        return _plain_line(body, events)
    at = line.find(_CHECKSUM_SLOT)
    if at < 1 or line.count(_CHECKSUM_SLOT) != 1:
        return _plain_line(body, events)
    before, after = line[:at], line[at + len(_CHECKSUM_SLOT):]
    if before.endswith(b","):
        unsigned = before[:-1] + after
    else:  # the first member: the comma after it (if any) goes
        unsigned = before + after.removeprefix(b",")
    return before + b'"line_sha256":"' + sha256_hex(unsigned).encode("ascii") + b'"' + after


def _plain_line(body: dict[str, Any], events: Sequence[Any] | None) -> bytes:
    """The line as plainly written: the records built, encoded, signed, encoded again."""
    if type(events) is EncodedEvents:
        body["events"] = events.records()
    elif events is not None:
        body["events"] = [event_to_record(e) for e in events]
    body["line_sha256"] = sha256_hex(canonical(body))
    return canonical(body)


def session_line(record: SessionRecord, n: int) -> bytes:
    """A session's archive line (record number ``n``, signed)."""
    return signed_line(session_body(record, n), record.events)


def user_line(record: UserRecord, n: int) -> bytes:
    """A user record's archive line (record number ``n``, signed)."""
    return signed_line(user_body(record, n), record.events)


def session_body(record: SessionRecord, n: int) -> dict[str, Any]:
    """A session record without its events and ``line_sha256`` (see :func:`signed_line`)."""
    body: dict[str, Any] = {
        "kind": "session",
        "n": n,
        "session_id": record.session_id,
        "version": record.version,
        "owner_subject": record.owner_subject,
        "pending_message": record.pending_message,
        "expires_at": _iso(record.expires_at),
        "drift_exempt": bool(record.drift_exempt),
        "blob": base64.b64encode(record.blob).decode("ascii"),
        "blob_sha256": record.blob_sha256,
    }
    if record.items is not None:
        body["items"] = [item_to_record(i) for i in record.items]
    if record.updated_at is not None:
        body["updated_at"] = _iso(record.updated_at)
    return body


def sealed_session_line(record: SessionRecord, n: int, sealer: Any) -> bytes:
    """A session's v5 sealed line (see the module): its state under the session's key,
    each subject's events under the subject's key, the checksum over the ciphertext.

    The state part is the session's canonical record without ``blob``, a newline, then the
    blob's raw bytes (canonical JSON holds no raw newline), so the blob is base64-encoded
    once, as the ciphertext. The line is spelled here as :func:`canonical` spells it (its
    strings are key names and base64: nothing to escape)."""
    body = session_body(record, n)
    del body["blob"]
    if record.events is not None:
        body["events"] = []
    parts = [sealer.seal(sealer.session(record.session_id), canonical(body) + b"\n" + record.blob,
                         n, 0)]
    groups: dict[str, list[Any]] = {}
    if type(record.events) is EncodedEvents:  # already encoded elsewhere: their records
        for raw in record.events.records():
            name = sealer.subject(raw["user_id"], raw["owner_subject"] or None)
            groups.setdefault(name, []).append(raw)
        encoded = ({name: record.events.json for name in groups} if len(groups) == 1
                   else {name: canonical(group) for name, group in groups.items()})
    else:
        for event in record.events or ():
            name = sealer.subject(event.user_id, event.owner_subject or None)
            groups.setdefault(name, []).append(event)
        encoded = {name: events_json(group) for name, group in groups.items()}
    for index, (name, group) in enumerate(groups.items(), 1):
        part = sealer.seal(name, encoded[name], n, index)
        part["events"] = len(group)
        parts.append(part)
    sealed = "[" + ",".join(
        '{"data":"%s",%s"key":"%s","nonce":"%s"}' % (
            p["data"], '"events":%d,' % p["events"] if "events" in p else "", p["key"],
            p["nonce"]) for p in parts) + "]"
    unsigned = '{"kind":"session","n":%d,"sealed":%s}' % (n, sealed)
    digest = sha256_hex(unsigned.encode("ascii"))
    return ('{"kind":"session","line_sha256":"%s","n":%d,"sealed":%s}'
            % (digest, n, sealed)).encode("ascii")


def opened_state(plain: bytes) -> dict[str, Any]:
    """A sealed state part's record (the inverse of the state part's spelling)."""
    head, _, blob = plain.partition(b"\n")
    body: dict[str, Any] = json.loads(head)
    body["blob"] = base64.b64encode(blob).decode("ascii")
    return body


def check_sealed(record: dict[str, Any], line_no: int, expected_n: int) -> list[dict[str, Any]]:
    """Validate a sealed session line's checksum (over the ciphertext), number and parts;
    return the parts (opened by the reader when it has the keyring)."""
    _check_line(record, line_no, expected_n, SEALED_KEYS, "session")
    parts = record.get("sealed")
    if not isinstance(parts, list) or not parts:
        raise damaged(line_no, "a sealed session has no parts")
    for index, part in enumerate(parts):
        allowed = {"key", "nonce", "data"} | ({"events"} if index else set())
        if not isinstance(part, dict) or set(part) != allowed \
                or not all(isinstance(part[k], str) for k in ("key", "nonce", "data")) \
                or (index and (not _is_int(part["events"]) or part["events"] < 1)):
            raise damaged(line_no, "a sealed part is not {key, nonce, data[, events]}")
    return parts


def user_body(record: UserRecord, n: int) -> dict[str, Any]:
    """A user record without its events and ``line_sha256`` (see :func:`signed_line`)."""
    return {"kind": "user", "n": n, "user_id": record.user_id,
            "part": record.part, "final": bool(record.final),
            "counter": record.counter if record.final else None}


# -- decoding (every check names the line; nothing is read best-effort) -----------------


def log_order(event: Any) -> tuple[int, datetime, str]:
    """The order of a user's log: by sequence; events without one (the engine's SQL
    layout keeps none, they read back as 0) by ``created_at``, ties broken by event id.
    Exports write logs in this order and imports number unnumbered events in it, so on a
    store that assigns sequences 1 is the oldest event."""
    return (int(event.sequence or 0), as_utc(event.created_at), str(event.event_id))


def damaged(line_no: int, what: str) -> ArchiveDamaged:
    return ArchiveDamaged(f"archive line {line_no}: {what}; the archive is rejected whole")


def check_header(record: Any, line_no: int = 1) -> ArchiveHeader:
    if not isinstance(record, dict) or record.get("kind") != "header":
        raise ArchiveUnsupported(
            "not a semvecctl sessions archive: the first line is not a header "
            f"(expected format {FORMAT_NAME!r})"
        )
    name = record.get("format")
    if name != FORMAT_NAME:
        raise ArchiveUnsupported(
            f"unsupported archive format {name!r}: this semvecctl reads {FORMAT_NAME!r} only"
        )
    version = record.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise damaged(line_no, "the header's format_version is not an integer")
    if version not in READABLE_VERSIONS:
        newest = max(READABLE_VERSIONS)
        if version > newest:
            advice = ("it was written by a newer semvecctl; upgrade semvecctl to read it "
                      "(semvecctl is not on PyPI: install a newer one from its source "
                      "checkout, e.g. git pull, then pip install .)")
        else:
            advice = "this version is no longer readable; re-export it with this semvecctl"
        raise ArchiveUnsupported(
            f"archive format {FORMAT_NAME} version {version} is not supported (this semvecctl "
            f"reads version {', '.join(str(v) for v in sorted(READABLE_VERSIONS))}): {advice}"
        )
    unknown = set(record) - HEADER_KEYS[version]
    if unknown:
        raise damaged(line_no, f"header has unknown fields {sorted(unknown)}")
    for key in ("source_backend", "source_uri", "created_at", "tool_version"):
        if not isinstance(record.get(key), str):
            raise damaged(line_no, f"header field {key!r} is missing or not a string")
    try:
        parse_utc(record["created_at"])
    except ValueError:
        raise damaged(line_no, "header field 'created_at' is not an ISO timestamp") from None
    filters = record.get("filters")
    if not isinstance(filters, dict):
        raise damaged(line_no, "header field 'filters' is not an object")
    return ArchiveHeader(
        source_backend=record["source_backend"], source_uri=record["source_uri"],
        created_at=record["created_at"], tool_version=record["tool_version"],
        with_items=bool(record.get("with_items")), filters=filters,
        with_events=bool(record.get("with_events")), format_version=version,
        ledger=_checked_ledger(record.get("ledger"), line_no),
        shred=_checked_shred(record.get("shred"), line_no),
    )


def _checked_shred(value: Any, line_no: int) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"key_id"} \
            or not isinstance(value["key_id"], str) or not value["key_id"]:
        raise damaged(line_no, "the header's shred field is not {key_id}")
    return value


_LEDGER_KEY_FIELDS = {"key_id", "secret"}
_LEDGER_ENTRY_FIELDS = {"key_id", "digest", "erased_at", "receipt"}


def _is_hex(value: Any) -> bool:
    try:
        return isinstance(value, str) and bool(bytes.fromhex(value))
    except ValueError:
        return False


def _checked_ledger(value: Any, line_no: int) -> Mapping[str, Any] | None:
    """The header's ledger, its shape checked (ArchiveDamaged naming what is wrong)."""
    if value is None:
        return None
    keys = value.get("keys") if isinstance(value, dict) else None
    entries = value.get("entries") if isinstance(value, dict) else None
    if set(value or ()) != {"keys", "entries"} or not isinstance(keys, list) \
            or not isinstance(entries, list):
        raise damaged(line_no, "the header's ledger is not {keys: [...], entries: [...]}")
    for key in keys:
        if not isinstance(key, dict) or set(key) != _LEDGER_KEY_FIELDS \
                or not isinstance(key["key_id"], str) or not _is_hex(key["secret"]):
            raise damaged(line_no, "a key of the header's ledger is not {key_id, secret (hex)}")
    for entry in entries:
        if not isinstance(entry, dict) or set(entry) != _LEDGER_ENTRY_FIELDS \
                or not all(isinstance(entry[k], str) for k in ("key_id", "digest", "erased_at")) \
                or not isinstance(entry["receipt"], (str, type(None))):
            raise damaged(line_no, "an entry of the header's ledger is not {key_id, digest, "
                                   "erased_at, receipt}")
        _opt_time(entry["erased_at"], line_no, "a ledger entry's erased_at")
    return value


def _opt_str(record: Mapping[str, Any], key: str, line_no: int, *, empty_ok: bool = False) -> str | None:
    value = record.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or (not value and not empty_ok):
        raise damaged(line_no, f"field {key!r} must be null or a non-empty string")
    return value


def _opt_time(value: Any, line_no: int, what: str) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_utc(value)
    except (TypeError, ValueError, AttributeError):
        raise damaged(line_no, f"{what} is not an ISO timestamp") from None


#: the largest version, sequence or counter an archive may hold (a signed 64-bit integer;
#: anything larger is damage, not data any store could have written)
MAX_INT = 2**63 - 1


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_INT


def finite_floats(values: Any) -> tuple[float, ...] | None:
    """``values`` as finite floats, or None when any is not a finite number (a JSON integer
    too large for a float included)."""
    if not isinstance(values, list):
        return None
    out = []
    for x in values:
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            return None
        try:
            value = float(x)
        except OverflowError:
            return None
        if not math.isfinite(value):
            return None
        out.append(value)
    return tuple(out)


def _item_from_record(raw: Any, line_no: int, session_id: str, owner: str | None) -> Any:
    from backends.contract import MemoryItem

    if not isinstance(raw, dict) or set(raw) != ITEM_KEYS:
        raise damaged(line_no, "an item does not have exactly the archived item fields")
    if not isinstance(raw["item_id"], str) or not raw["item_id"] or not isinstance(raw["text"], str):
        raise damaged(line_no, "an item's item_id/text is malformed")
    embedding = raw["embedding"]
    if embedding is not None:
        embedding = finite_floats(embedding)
        if embedding is None:
            raise damaged(line_no, f"item {raw['item_id']!r} has a malformed embedding")
    tiers = raw["tiers"]
    if not isinstance(tiers, list) or not all(isinstance(t, str) for t in tiers):
        raise damaged(line_no, f"item {raw['item_id']!r} has malformed tiers")
    if raw["tier"] is not None and not isinstance(raw["tier"], str):
        raise damaged(line_no, f"item {raw['item_id']!r} has a malformed tier")
    if not isinstance(raw["unit"], dict):
        raise damaged(line_no, f"item {raw['item_id']!r} has a malformed unit")
    return MemoryItem(
        item_id=raw["item_id"], text=raw["text"], embedding=embedding, tier=raw["tier"],
        tiers=tuple(tiers), unit=raw["unit"],
        created_at=_opt_time(raw["created_at"], line_no, "an item's created_at"),
        updated_at=_opt_time(raw["updated_at"], line_no, "an item's updated_at"),
        owner_subject=owner, session_id=session_id,
    )


def event_from_record(raw: Any, line_no: int) -> Any:
    """One archived event (``MemoryEvent.to_dict()``), checked as strictly as a store checks
    an event before writing it, except that it keeps its sequence number."""
    from dataclasses import replace

    from backends.contract import EVENT_FIELDS, MemoryEvent, validate_event
    from backends.errors import InvalidEvent

    if not isinstance(raw, dict) or set(raw) != set(EVENT_FIELDS):
        raise damaged(line_no, "an event does not have exactly the engine's event fields")
    sequence = raw["sequence"]
    if not _is_int(sequence) or sequence < 0:
        raise damaged(line_no, "an event's sequence is not a non-negative integer")
    if not isinstance(raw["created_at"], str) or finite_floats(raw["embedding"]) is None:
        raise damaged(line_no, "an event's created_at/embedding is malformed")
    for key in ("owner_subject", "session_id"):
        if not isinstance(raw[key], str):
            raise damaged(line_no, f"an event's {key} is not a string")
    try:
        event = MemoryEvent.from_dict(raw)
        checked = validate_event(replace(event, sequence=0))
    except (InvalidEvent, TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
        raise damaged(line_no, f"event {str(raw.get('event_id'))[:40]!r} is malformed "
                               f"({str(exc).splitlines()[0][:80] if str(exc) else type(exc).__name__})") from None
    return replace(checked, sequence=sequence)


def _events(raw: Any, line_no: int, what: str) -> tuple[Any, ...]:
    if not isinstance(raw, list):
        raise damaged(line_no, f"{what}: events must be a list")
    events = tuple(event_from_record(e, line_no) for e in raw)
    ids = [e.event_id for e in events]
    if len(set(ids)) != len(ids):
        raise damaged(line_no, f"{what}: an event id appears twice")
    return events


def _check_line(record: dict[str, Any], line_no: int, expected_n: int, allowed: frozenset[str],
                what: str) -> None:
    unknown = set(record) - allowed
    if unknown:
        raise damaged(line_no, f"{what} record has unknown fields {sorted(unknown)}")
    claimed = record.get("line_sha256")
    body = {k: v for k, v in record.items() if k != "line_sha256"}
    if not isinstance(claimed, str) or sha256_hex(canonical(body)) != claimed:
        raise damaged(line_no, "the line's checksum does not match its content (changed after export)")
    n = record.get("n")
    if not _is_int(n):
        raise damaged(line_no, f"{what} record has no sequence number")
    if n != expected_n:
        raise damaged(line_no, f"record {n} found where record {expected_n} was expected "
                               "(lines were reordered, removed or duplicated)")


def check_session(record: dict[str, Any], line_no: int, expected_n: int,
                  header: ArchiveHeader | None = None, *,
                  opened: bool = False) -> tuple[SessionRecord, bytes]:
    """Validate one session line; return the record and its canonical bytes (for the chain).
    ``opened``: a record opened from a sealed line, whose checksum (over the ciphertext)
    and authentication were checked already; then no bytes are returned."""
    version_of_format = header.format_version if header is not None else FORMAT_VERSION
    if opened:
        unknown = set(record) - SESSION_KEYS[version_of_format]
        if unknown or record.get("n") != expected_n:
            raise damaged(line_no, "a sealed session opens to a record that is not this line's")
    else:
        _check_line(record, line_no, expected_n, SESSION_KEYS[version_of_format], "session")
    session_id = record.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        raise damaged(line_no, "session_id must be a non-empty string")
    version = record.get("version")
    if not _is_int(version) or version < 1:
        raise damaged(line_no, f"session {session_id!r} has an invalid version")
    expires_at = None
    drift_exempt = False
    if version_of_format == 1:
        ttl = record.get("ttl_seconds")
        if ttl is not None and (not _is_int(ttl) or ttl < 0):
            raise damaged(line_no, f"session {session_id!r} has an invalid ttl_seconds")
        if ttl is not None:
            # v1 kept the seconds left at export: anchor them to the export's start
            created = parse_utc(header.created_at) if header is not None else utc_now()
            try:
                expires_at = created + timedelta(seconds=ttl)
            except OverflowError:
                raise damaged(line_no, f"session {session_id!r} has an invalid ttl_seconds") from None
    else:
        expires_at = _opt_time(record.get("expires_at"), line_no,
                               f"session {session_id!r}: expires_at")
        flag = record.get("drift_exempt")
        if not isinstance(flag, bool):
            raise damaged(line_no, f"session {session_id!r}: drift_exempt must be true or false")
        drift_exempt = flag
    owner = _opt_str(record, "owner_subject", line_no)
    pending = _opt_str(record, "pending_message", line_no, empty_ok=True)
    try:
        blob = base64.b64decode(record.get("blob") or "", validate=True)
    except (binascii.Error, ValueError, TypeError):
        raise damaged(line_no, f"session {session_id!r}: the blob is not valid base64") from None
    if sha256_hex(blob) != record.get("blob_sha256"):
        raise damaged(line_no, f"session {session_id!r}: the blob does not match its sha256")
    items = None
    if "items" in record:
        if not isinstance(record["items"], list):
            raise damaged(line_no, f"session {session_id!r}: items must be a list")
        items = tuple(_item_from_record(r, line_no, session_id, owner) for r in record["items"])
        ids = [i.item_id for i in items]
        if len(set(ids)) != len(ids):
            raise damaged(line_no, f"session {session_id!r}: an item id appears twice")
    events = None
    if "events" in record:
        events = _events(record["events"], line_no, f"session {session_id!r}")
        if any(e.session_id != session_id for e in events):
            raise damaged(line_no, f"session {session_id!r} carries an event of another session")
    updated_at = _opt_time(record.get("updated_at"), line_no,
                           f"session {session_id!r}: updated_at")
    return (SessionRecord(session_id, version, owner, pending or None, blob, expires_at, items,
                          drift_exempt, events, updated_at),
            b"" if opened else canonical(record))


def check_user(record: dict[str, Any], line_no: int, expected_n: int, format_version: int = 2,
               top_before: int = 0) -> tuple[UserRecord, bytes]:
    """Validate one user line (v2: a whole log; v3: one part of it). ``top_before`` is the
    highest sequence the log's earlier parts carried (the final counter covers them too);
    that parts follow each other is the reader's check."""
    _check_line(record, line_no, expected_n, USER_KEYS[max(format_version, 2)], "user")
    user_id = record.get("user_id")
    if not isinstance(user_id, str) or not user_id:
        raise damaged(line_no, "user_id must be a non-empty string")
    part: Any = 1
    final: Any = True
    if format_version >= 3:
        part, final = record.get("part"), record.get("final")
        if not _is_int(part) or part < 1 or not isinstance(final, bool):
            raise damaged(line_no, f"user {user_id!r}: part must be a positive integer and "
                                   "final true or false")
    counter = record.get("counter")
    if counter is not None and (not _is_int(counter) or counter < 0 or not final):
        raise damaged(line_no, f"user {user_id!r} has an invalid counter")
    events = _events(record.get("events"), line_no, f"user {user_id!r}")
    if any(e.user_id != user_id for e in events):
        raise damaged(line_no, f"user {user_id!r} carries an event of another user")
    top = max((e.sequence for e in events), default=top_before)
    top = max(top, top_before)
    if counter is not None and counter < top:
        raise damaged(line_no, f"user {user_id!r}: the counter {counter} is below the highest "
                               f"sequence {top} it carries")
    return UserRecord(user_id, counter, events, part, final), canonical(record)


def check_trailer(record: dict[str, Any], line_no: int, count: int, digest: str,
                  users: int = 0, format_version: int = FORMAT_VERSION) -> None:
    unknown = set(record) - TRAILER_KEYS[format_version]
    if unknown:
        raise damaged(line_no, f"trailer has unknown fields {sorted(unknown)}")
    if record.get("count") != count:
        raise damaged(line_no, f"the trailer counts {record.get('count')} sessions but the "
                               f"archive holds {count}")
    if format_version >= 2 and record.get("users") != users:
        raise damaged(line_no, f"the trailer counts {record.get('users')} user log(s) but the "
                               f"archive holds {users}")
    if record.get("digest") != digest:
        raise damaged(line_no, "the trailer digest does not match the lines (the archive was "
                               "altered after export)")


def parse_line(raw: bytes, line_no: int) -> dict[str, Any]:
    try:
        record = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise damaged(line_no, "not a complete JSON object (truncated or corrupted)") from None
    if not isinstance(record, dict):
        raise damaged(line_no, "not a JSON object")
    return record
