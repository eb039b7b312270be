"""The erasure ledger, and the one withholding rule every restore path applies.

``erase --apply`` records the subject ``(owner, user_id)`` in the store's own ledger
(a key family, table or collection the engine never reads: each backend's ``ledger.py``)
as HMAC-SHA256 under a per-store random secret kept in the store, over the length-
prefixed owner and user id (4-byte big-endian lengths, UTF-8): never the ids themselves.
The secret is made on first use and never printed (:class:`LedgerKey` hides it).

Re-keying: a keyed hash cannot be re-keyed without the ids, so a copy or migration
carries the source's secrets along with its entries (as *carried* keys, beside the
target's own): the target then answers for both. This is the simplest correct design:
an entry is checked under the key it was made with, whichever store made it, and a
store that meets the same subject again needs no ids from anyone.

The rule ("older than the erasure"), with ``T`` the subject's erasure time:

- an EVENT of a recorded subject (its ``user_id`` and ``owner_subject``) is withheld when
  its ``created_at`` is not after ``T``;
- a SESSION is withheld when its log holds a withheld event and nothing says it was
  written after the erasure: its ``updated_at`` (SQL, MongoDB; Redis keeps none) is not
  after ``T`` and no event of its log is newer than ``T``. A session is tied to a subject
  through its events only (an archive exported without events ties none). Its items go
  with it; the other subjects' events of a shared session flow, as the engine's erasure
  keeps them.

A subject that came back (a session or event made after the erasure) flows as usual.
The ledger is loaded once into a dict; one HMAC per (owner, user) pair seen, cached.
"""

from __future__ import annotations

import hashlib
import secrets as _secrets
from datetime import datetime, timezone
from typing import Any, Iterable, Sequence

from backends.contract import Capability, LedgerEntry, LedgerKey, as_utc, event_defaults, offers
from backends.contract.ledger import subject_digest, subject_message  # noqa: F401 - re-exported

_KEY_ID_TAG = b"semvecctl erasure ledger key id\x00"


def key_id_of(secret: bytes) -> str:
    """A secret's public name (a hash of it: the same secret has the same name anywhere)."""
    return hashlib.sha256(_KEY_ID_TAG + secret).hexdigest()[:16]


def ledger_of(adapter: Any) -> Any:
    """The adapter's ledger store, or None when it keeps none."""
    return adapter.erasure_ledger() if offers(adapter, Capability.LEDGER) else None


def own_key(ledger: Any) -> LedgerKey:
    """The store's own secret, made (32 random bytes) on first use."""
    for key in ledger.keys():
        if key.own:
            return key
    secret = _secrets.token_bytes(32)
    return ledger.add_key(LedgerKey(key_id_of(secret), secret, True))


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def record_erasure(adapter: Any, user_id: str, owner: str | None, *,
                   erased_at: datetime, receipt: str | None) -> LedgerEntry | None:
    """Record an erased subject in the adapter's ledger (None: it keeps none)."""
    ledger = ledger_of(adapter)
    if ledger is None:
        return None
    key = own_key(ledger)
    entry = LedgerEntry(key.key_id, subject_digest(key.secret, user_id, owner),
                        as_utc(erased_at), receipt)
    ledger.add_entries([entry])
    return entry


def carry_ledger(source: Any, target: Any) -> int:
    """Carry the source's entries, and the secrets they are keyed under, to the target
    (as carried keys; the target's own stays its own). Returns the entries carried."""
    src = ledger_of(source)
    if src is None:
        return 0
    entries = src.entries()
    return carry_entries(src.keys() if entries else [], entries, target)


def carry_entries(keys: Sequence[LedgerKey], entries: Sequence[LedgerEntry], target: Any) -> int:
    """Add ``entries`` and the secrets they are keyed under to the target's ledger (as
    carried keys); the entries carried (0 when the target keeps no ledger)."""
    dst = ledger_of(target)
    if dst is None or not entries:
        return 0
    held = {k.key_id for k in dst.keys()}
    for key in keys:
        if key.key_id not in held:
            dst.add_key(LedgerKey(key.key_id, key.secret, False))
    dst.add_entries(list(entries))
    return len(entries)


def ledger_record(adapter: Any) -> dict[str, Any] | None:
    """The adapter's ledger as an archive header carries it (format v4): its entries and
    the secrets they are keyed under, as hex; None when it keeps none or it is empty."""
    ledger = ledger_of(adapter)
    entries = ledger.entries() if ledger is not None else []
    if not entries:
        return None
    used = {e.key_id for e in entries}
    return {"keys": [{"key_id": k.key_id, "secret": k.secret.hex()}
                     for k in ledger.keys() if k.key_id in used],
            "entries": [{"key_id": e.key_id, "digest": e.digest,
                         "erased_at": as_utc(e.erased_at).isoformat(), "receipt": e.receipt}
                        for e in entries]}


def ledger_from_record(record: Any) -> tuple[list[LedgerKey], list[LedgerEntry]]:
    """The keys and entries of an archive header's ledger (checked by the reader)."""
    if not record:
        return [], []
    keys = [LedgerKey(k["key_id"], bytes.fromhex(k["secret"]), False) for k in record["keys"]]
    entries = [LedgerEntry(e["key_id"], e["digest"], datetime.fromisoformat(
        e["erased_at"].replace("Z", "+00:00")), e["receipt"]) for e in record["entries"]]
    return keys, entries


def _later(a: datetime | None, b: datetime) -> datetime:
    return b if a is None or b > a else a


class Withholding:
    """The ledgers of the stores a restore reads and writes, loaded once (see module)."""

    def __init__(self, keys: Iterable[LedgerKey] = (), entries: Iterable[LedgerEntry] = ()) -> None:
        self._secrets = {k.key_id: k.secret for k in keys}
        self._entries: dict[tuple[str, str], datetime] = {}
        for e in entries:
            if e.key_id in self._secrets:
                self._entries[(e.key_id, e.digest)] = _later(
                    self._entries.get((e.key_id, e.digest)), as_utc(e.erased_at))
        self._used = sorted({kid for kid, _ in self._entries})
        self._cache: dict[tuple[str, str], datetime | None] = {}

    @classmethod
    def load(cls, *adapters: Any,
             carried: tuple[Sequence[LedgerKey], Sequence[LedgerEntry]] = ((), ())
             ) -> "Withholding":
        """The union of the adapters' ledgers (one that keeps none adds nothing) and the
        ``carried`` keys and entries (an archive's)."""
        keys: list[LedgerKey] = list(carried[0])
        entries: list[LedgerEntry] = list(carried[1])
        for adapter in adapters:
            ledger = ledger_of(adapter) if adapter is not None else None
            found = ledger.entries() if ledger is not None else []
            if ledger is not None and found:  # its keys only when entries are keyed under them
                entries.extend(found)
                keys.extend(ledger.keys())
        return cls(keys, entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def erased_at(self, user_id: str, owner: str | None) -> datetime | None:
        """When the subject was erased (the latest time), or None."""
        pair = (user_id, owner or "")
        if pair in self._cache:
            return self._cache[pair]
        found: datetime | None = None
        for kid in self._used:
            at = self._entries.get((kid, subject_digest(self._secrets[kid], user_id, owner)))
            if at is not None:
                found = _later(found, at)
        self._cache[pair] = found
        return found

    def event_erasure(self, event: Any) -> datetime | None:
        """The erasure that withholds ``event``, or None (it flows)."""
        if not self._entries:
            return None
        at = self.erased_at(event.user_id, event.owner_subject or None)
        return at if at is not None and as_utc(event.created_at) <= at else None

    def withholds_event(self, event: Any) -> bool:
        return self.event_erasure(event) is not None

    def withholds_session(self, events: Sequence[Any] | None,
                          updated_at: datetime | None = None) -> bool:
        """Whether a session with this log (and last write time) is withheld."""
        if not self._entries or not events:
            return False
        latest = None
        for event in events:
            at = self.event_erasure(event)
            if at is not None:
                latest = _later(latest, at)
        if latest is None:
            return False
        if updated_at is not None and as_utc(updated_at) > latest:
            return False
        return not any(as_utc(e.created_at) > latest for e in events)


class SourceLogs:
    """A source's event logs as the rule needs them, each read once: a user's log, and a
    session's (its subjects' events that name it), for a migration pass or its verify."""

    def __init__(self, events: Any, owner_subject: Any) -> None:
        self._events, self._scope = events, owner_subject
        self._users: dict[str, list[Any]] = {}
        self._by_session: dict[str, list[str]] | None = None

    def user_log(self, user: str) -> list[Any]:
        if user not in self._users:
            self._users[user] = self._events.list_events(user, owner_subject=self._scope)
        return self._users[user]

    def user_logs(self, users: Sequence[str]) -> dict[str, list[Any]]:
        """:meth:`user_log` of each user, those not read yet read in one batch."""
        missing = [u for u in dict.fromkeys(users) if u not in self._users]
        if missing:
            self._users.update(event_defaults(self._events).events_of_users(
                missing, owner_subject=self._scope))
        return {u: self._users[u] for u in users}

    def subjects(self, session_id: str) -> list[str]:
        if offers(self._events, Capability.SUBJECTS_BY_SESSION):
            if self._by_session is None:  # one scan of the log (Redis)
                self._by_session = self._events.subjects_by_session()
            return list(self._by_session.get(session_id, ()))
        if offers(self._events, Capability.SESSION_SUBJECTS):
            return list(self._events.session_subjects(session_id))
        return []

    def session_log(self, session_id: str) -> list[Any]:
        return [e for user in sorted(set(self.subjects(session_id)))
                for e in self.user_log(user) if e.session_id == session_id]
