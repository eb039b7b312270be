"""The sessions archive format, version 1: JSON Lines, gzip when the name ends in ``.gz``.

Line 1 is the header, then one line per session, then the trailer::

    {"kind":"header","format":"semvecctl-sessions","format_version":1,...}
    {"kind":"session","n":1,"session_id":...,"blob":<base64>,"blob_sha256":...,"line_sha256":...}
    {"kind":"trailer","count":N,"digest":<hex>}

Every line is canonical JSON (sorted keys, no spaces, ASCII), so a reader can re-encode a
parsed record and get the writer's bytes back. ``line_sha256`` covers the session record
without that field; ``n`` numbers the sessions from 1, which makes a reordered or a
dropped line an error with a line number rather than only a digest mismatch; the trailer's
``digest`` is one sha256 run over the header line and every session line in order, so
nothing can be swapped, added or removed without the trailer disagreeing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Mapping

from backends.archive.errors import ArchiveDamaged, ArchiveUnsupported

FORMAT_NAME = "semvecctl-sessions"
FORMAT_VERSION = 1
#: format versions this code reads
READABLE_VERSIONS = frozenset({1})

HEADER_KEYS = frozenset({"kind", "format", "format_version", "source_backend", "source_uri",
                         "created_at", "tool", "tool_version", "with_items", "filters"})
SESSION_KEYS = frozenset({"kind", "n", "session_id", "version", "owner_subject",
                          "pending_message", "ttl_seconds", "blob", "blob_sha256", "items",
                          "line_sha256"})
TRAILER_KEYS = frozenset({"kind", "count", "digest"})
ITEM_KEYS = frozenset({"item_id", "text", "embedding", "tier", "tiers", "unit", "created_at",
                       "updated_at"})


def canonical(record: Mapping[str, Any]) -> bytes:
    """The one byte encoding of a record (what checksums and the chain digest cover)."""
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode("ascii")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class ArchiveHeader:
    source_backend: str
    source_uri: str
    created_at: str
    tool_version: str
    with_items: bool = False
    filters: Mapping[str, Any] = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        return {
            "kind": "header", "format": FORMAT_NAME, "format_version": FORMAT_VERSION,
            "source_backend": self.source_backend, "source_uri": self.source_uri,
            "created_at": self.created_at, "tool": "semvecctl", "tool_version": self.tool_version,
            "with_items": bool(self.with_items), "filters": dict(self.filters),
        }

    @staticmethod
    def now() -> str:
        return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class SessionRecord:
    """One session as archived. ``items`` is None when the export did not carry items
    (as opposed to an empty tuple: the session had no live items)."""

    session_id: str
    version: int
    owner_subject: str | None
    pending_message: str | None
    blob: bytes
    ttl_seconds: int | None = None
    items: tuple[Any, ...] | None = None  # MemoryItem

    @property
    def blob_sha256(self) -> str:
        return sha256_hex(self.blob)


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).isoformat()


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


def session_to_record(record: SessionRecord, n: int) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "session",
        "n": n,
        "session_id": record.session_id,
        "version": record.version,
        "owner_subject": record.owner_subject,
        "pending_message": record.pending_message,
        "ttl_seconds": record.ttl_seconds,
        "blob": base64.b64encode(record.blob).decode("ascii"),
        "blob_sha256": record.blob_sha256,
    }
    if record.items is not None:
        body["items"] = [item_to_record(i) for i in record.items]
    body["line_sha256"] = sha256_hex(canonical(body))
    return body


# -- decoding (every check names the line; nothing is read best-effort) -----------------


def damaged(line_no: int, what: str) -> ArchiveDamaged:
    return ArchiveDamaged(f"archive line {line_no}: {what}; nothing was imported from it")


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
            advice = ("it was written by a newer semvecctl; upgrade semvecctl "
                      "(pip install -U semvecctl) to read it")
        else:
            advice = "this version is no longer readable; re-export it with this semvecctl"
        raise ArchiveUnsupported(
            f"archive format {FORMAT_NAME} version {version} is not supported (this semvecctl "
            f"reads version {', '.join(str(v) for v in sorted(READABLE_VERSIONS))}): {advice}"
        )
    unknown = set(record) - HEADER_KEYS
    if unknown:
        raise damaged(line_no, f"header has unknown fields {sorted(unknown)}")
    for key in ("source_backend", "source_uri", "created_at", "tool_version"):
        if not isinstance(record.get(key), str):
            raise damaged(line_no, f"header field {key!r} is missing or not a string")
    filters = record.get("filters")
    if not isinstance(filters, dict):
        raise damaged(line_no, "header field 'filters' is not an object")
    return ArchiveHeader(
        source_backend=record["source_backend"], source_uri=record["source_uri"],
        created_at=record["created_at"], tool_version=record["tool_version"],
        with_items=bool(record.get("with_items")), filters=filters,
    )


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
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise damaged(line_no, f"{what} is not an ISO timestamp") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _item_from_record(raw: Any, line_no: int, session_id: str, owner: str | None) -> Any:
    from backends.contract import MemoryItem

    if not isinstance(raw, dict) or set(raw) != ITEM_KEYS:
        raise damaged(line_no, "an item does not have exactly the archived item fields")
    if not isinstance(raw["item_id"], str) or not raw["item_id"] or not isinstance(raw["text"], str):
        raise damaged(line_no, "an item's item_id/text is malformed")
    embedding = raw["embedding"]
    if embedding is not None:
        if not isinstance(embedding, list) or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
            for x in embedding
        ):
            raise damaged(line_no, f"item {raw['item_id']!r} has a malformed embedding")
        embedding = tuple(float(x) for x in embedding)
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


def check_session(record: dict[str, Any], line_no: int, expected_n: int) -> tuple[SessionRecord, bytes]:
    """Validate one session line; return the record and its canonical bytes (for the chain)."""
    unknown = set(record) - SESSION_KEYS
    if unknown:
        raise damaged(line_no, f"session record has unknown fields {sorted(unknown)}")
    claimed = record.get("line_sha256")
    body = {k: v for k, v in record.items() if k != "line_sha256"}
    if not isinstance(claimed, str) or sha256_hex(canonical(body)) != claimed:
        raise damaged(line_no, "the line's checksum does not match its content (changed after export)")
    n = record.get("n")
    if isinstance(n, bool) or not isinstance(n, int):
        raise damaged(line_no, "session record has no sequence number")
    if n != expected_n:
        raise damaged(line_no, f"session record {n} found where record {expected_n} was expected "
                               "(lines were reordered, removed or duplicated)")
    session_id = record.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        raise damaged(line_no, "session_id must be a non-empty string")
    version = record.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise damaged(line_no, f"session {session_id!r} has an invalid version")
    ttl = record.get("ttl_seconds")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 0):
        raise damaged(line_no, f"session {session_id!r} has an invalid ttl_seconds")
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
    return (SessionRecord(session_id, version, owner, pending or None, blob, ttl, items),
            canonical(record))


def check_trailer(record: dict[str, Any], line_no: int, count: int, digest: str) -> None:
    unknown = set(record) - TRAILER_KEYS
    if unknown:
        raise damaged(line_no, f"trailer has unknown fields {sorted(unknown)}")
    if record.get("count") != count:
        raise damaged(line_no, f"the trailer counts {record.get('count')} sessions but the "
                               f"archive holds {count}")
    if record.get("digest") != digest:
        raise damaged(line_no, "the trailer digest does not match the lines (the archive was "
                               "altered after export)")


def parse_line(raw: bytes, line_no: int) -> dict[str, Any]:
    try:
        record = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise damaged(line_no, "not a complete JSON object (truncated or corrupted)") from None
    if not isinstance(record, dict):
        raise damaged(line_no, "not a JSON object")
    return record
