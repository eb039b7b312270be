"""The adapter's own event class, in the engine's shape (ENGINE-WIRE §2)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Mapping


@dataclass(frozen=True)
class ComplianceEvent:
    """UUID ids, a list embedding (never None), "" for no owner or session, sequence 0
    until the store assigns it."""

    event_id: uuid.UUID
    user_id: str
    created_at: datetime
    content: str
    embedding: list = field(default_factory=list)
    meta: Mapping[str, Any] = field(default_factory=dict)
    source_event_id: uuid.UUID | None = None
    sequence: int = 0
    owner_subject: str = ""
    session_id: str = ""

    def with_sequence(self, sequence: int) -> "ComplianceEvent":
        return replace(self, sequence=sequence)

    def to_dict(self) -> dict[str, Any]:
        """The engine's keys and order; ``sequence`` is the store's, so it is left out."""
        return {
            "event_id": str(self.event_id),
            "user_id": self.user_id,
            "created_at": self.created_at.astimezone(timezone.utc).isoformat(),
            "content": self.content,
            "embedding": list(self.embedding),
            "meta": dict(self.meta),
            "owner_subject": self.owner_subject,
            "session_id": self.session_id,
            "source_event_id": None if self.source_event_id is None else str(self.source_event_id),
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> "ComplianceEvent":
        created = record["created_at"]
        if isinstance(created, str):
            created = datetime.fromisoformat(created)
        if created.tzinfo is None:  # naive timestamps read as UTC
            created = created.replace(tzinfo=timezone.utc)
        source = record.get("source_event_id")
        return cls(
            event_id=uuid.UUID(str(record["event_id"])),
            user_id=str(record["user_id"]),
            created_at=created,
            content=record.get("content") or "",
            embedding=[float(x) for x in record.get("embedding") or []],
            meta=dict(record.get("meta") or {}),
            source_event_id=uuid.UUID(str(source)) if source else None,
            sequence=int(record.get("sequence") or 0),
            owner_subject=record.get("owner_subject") or "",
            session_id=record.get("session_id") or "",
        )

    @classmethod
    def adopt(cls, event: Any) -> "ComplianceEvent":
        """Any object with the engine's event attributes, as this class."""
        if isinstance(event, cls):
            return event
        if hasattr(event, "to_dict"):
            return cls.from_dict(event.to_dict())
        return cls.from_dict({name: getattr(event, name, None) for name in (
            "event_id", "user_id", "created_at", "content", "embedding", "meta",
            "source_event_id", "sequence", "owner_subject", "session_id")})
