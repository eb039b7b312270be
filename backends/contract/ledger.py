"""The erasure ledger's rules that every layer may call (the transfer core included, which
sits below :mod:`backends.ops`): the store's identity, the ledger's *state* an archive
names, whether a store still holds a state it once showed, session hashes, one merge rule
for the storages and the store's clock.

Identity: a random name made once and kept with the ledger (each backend's ``ledger.py``;
on a sharded SQL deployment on the primary, one for the deployment). A copy of a store
(a database backup restored, a replica promoted) keeps it: the identity says which store
the data came from, the state says how much of its ledger a copy still holds.

State: ``LedgerState(entries, seq, digest)``, where ``seq`` is the highest position the
store had given an entry and ``digest`` a sha256 over the sorted ``key_id:digest`` lines
of the entries at or below it. Entries are never removed and keep their position, so the
same store holds a state it showed as long as the entries up to ``seq`` hash to the same
digest: a store rolled back to a backup taken before the state lacks some and fails.
What no local check can see: a store rolled back to a backup taken after the state but
before a later erasure (only an outside copy of the ledger, ``erasures export``, knows).
"""

from __future__ import annotations

import hashlib
import hmac
import time
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, NamedTuple

from backends.contract.capabilities import Capability, offers
from backends.contract.values import LedgerEntry, StoreIdentity, as_utc

#: event times are written by the engine's machines, an erasure's time by the store: an
#: event is taken as older than an erasure when its ``created_at`` is not after the
#: erasure time plus this margin (the skew we allow between them; the erase receipt
#: shows the skew measured between the erasing machine and the store)
CLOCK_MARGIN = timedelta(seconds=5)

_SESSION_TAG = b"semvecctl erasure ledger session\x00"


def new_identity(created_at: datetime) -> StoreIdentity:
    return StoreIdentity(f"semvec-store-{uuid.uuid4().hex}", as_utc(created_at))


def subject_message(user_id: str, owner: str | None) -> bytes:
    """The subject, unambiguously: length-prefixed owner ('' = unowned), then user id."""
    o, u = (owner or "").encode("utf-8"), user_id.encode("utf-8")
    return len(o).to_bytes(4, "big") + o + len(u).to_bytes(4, "big") + u


def subject_digest(secret: bytes, user_id: str, owner: str | None) -> str:
    """A subject's keyed hash (HMAC-SHA256 under a ledger secret): what the ledger and a
    shred keyring name it by."""
    return hmac.digest(secret, subject_message(user_id, owner), "sha256").hex()


def session_digest(secret: bytes, session_id: str) -> str:
    """A session id's keyed hash (HMAC-SHA256 under a ledger secret, tagged apart from the
    subjects' hashes, so neither can be taken for the other)."""
    raw = session_id.encode("utf-8")
    return hmac.digest(secret, _SESSION_TAG + len(raw).to_bytes(4, "big") + raw,
                       "sha256").hex()


def merged(held: LedgerEntry | None, incoming: LedgerEntry) -> LedgerEntry | None:
    """What a storage keeps when ``incoming`` meets the entry it ``held`` for the same
    subject: the later time (and its receipt), the union of the session hashes, the held
    position; None when nothing changes. A new entry comes back with ``seq`` 0, for the
    storage to give it its next position."""
    if held is None:
        return incoming._replace(erased_at=as_utc(incoming.erased_at),
                                 sessions=tuple(sorted(set(incoming.sessions))), seq=0)
    later = as_utc(incoming.erased_at) > as_utc(held.erased_at)
    sessions = tuple(sorted(set(held.sessions) | set(incoming.sessions)))
    if not later and sessions == tuple(sorted(held.sessions)):
        return None
    base = incoming if later else held
    return held._replace(erased_at=as_utc(base.erased_at), receipt=base.receipt,
                         sessions=sessions)


class LedgerState(NamedTuple):
    """How much of its ledger a store showed: entries, highest position, digest."""

    entries: int
    seq: int
    digest: str

    def as_dict(self) -> dict[str, Any]:
        return {"entries": self.entries, "seq": self.seq, "digest": self.digest}

    @classmethod
    def from_dict(cls, value: Any) -> "LedgerState":
        """A state as an archive or an export names it; ValueError when it is not one."""
        if not isinstance(value, dict) or set(value) != {"entries", "seq", "digest"} \
                or not all(isinstance(value[k], int) and not isinstance(value[k], bool)
                           and value[k] >= 0 for k in ("entries", "seq")) \
                or not isinstance(value["digest"], str) or len(value["digest"]) != 64:
            raise ValueError("a ledger state is {entries: int, seq: int, digest: sha256 hex}")
        return cls(value["entries"], value["seq"], value["digest"])


def _digest(entries: Iterable[LedgerEntry]) -> tuple[int, str]:
    lines = sorted(f"{e.key_id}:{e.digest}" for e in entries)
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode("ascii") + b"\n")
    return len(lines), h.hexdigest()


def state_of(entries: Iterable[LedgerEntry]) -> LedgerState:
    entries = list(entries)
    seq = max((e.seq for e in entries), default=0)
    count, digest = _digest(entries)
    return LedgerState(count, seq, digest)


def contains(entries: Iterable[LedgerEntry], state: LedgerState) -> bool:
    """Whether these entries still hold ``state``: those at or below its position hash to
    its digest."""
    count, digest = _digest(e for e in entries if e.seq <= state.seq)
    return (count, digest) == (state.entries, state.digest)


# -- over an adapter: what the transfer core and the CLI call ----------------------------


def ledger_of(adapter: Any) -> Any:
    """The adapter's ledger storage, or None when it keeps none."""
    return adapter.erasure_ledger() if offers(adapter, Capability.LEDGER) else None


def store_identity(adapter: Any, *, create: bool = True) -> StoreIdentity | None:
    """The store's identity (made on first use unless ``create`` is false); None for a
    store that keeps no ledger, or has no identity yet and ``create`` is false."""
    ledger = ledger_of(adapter)
    return ledger.identity(create=create) if ledger is not None else None


def ledger_state(adapter: Any) -> LedgerState | None:
    """The state of the store's ledger now (None: it keeps none)."""
    ledger = ledger_of(adapter)
    return state_of(ledger.entries()) if ledger is not None else None


def holds_ledger(adapter: Any, identity: str | None, state: LedgerState | None) -> bool:
    """Whether this store can show it holds the ledger of the store ``identity`` as that
    store showed it in ``state``: it is that store (same identity; an empty or another
    store is not) and its entries up to the state's position are the same. Read-only:
    a store without an identity yet is not the one named."""
    if identity is None or state is None:
        return False
    ledger = ledger_of(adapter)
    if ledger is None:
        return False
    mine = ledger.identity(create=False)
    return mine is not None and mine.identity == identity and contains(ledger.entries(), state)


class ClockReading(NamedTuple):
    """The store's time, and how far the local clock is from it (``skew``: store minus
    local, at the middle of the round trip)."""

    at: datetime
    skew: timedelta
    round_trip: timedelta


def read_clock(ledger: Any) -> ClockReading:
    """Ask the store for its time, timing the question with the local clock."""
    before = time.time()
    at = as_utc(ledger.now())
    after = time.time()
    middle = datetime.fromtimestamp((before + after) / 2, timezone.utc)
    return ClockReading(at, at - middle, timedelta(seconds=after - before))
