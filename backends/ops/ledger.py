"""The erasure ledger as the operator sees it (``semvecctl erasures list|check``), and
the doctor's check for data that came back around it.

The ledger holds keyed hashes, never ids (:mod:`backends.transfer.withhold`): ``list``
shows each entry by a prefix of its hash, its time and its receipt reference; ``check``
hashes the subject it is given under each of the store's keys, so only someone who
knows the ids can ask about them.
"""

from __future__ import annotations

from typing import Any, Iterator

from backends.contract import event_defaults
from backends.contract.findings import Finding, Severity
from backends.errors import UnsupportedOperation
from backends.transfer.withhold import Withholding, ledger_of, subject_digest

#: characters of an entry's hash shown by ``erasures list``
PREFIX = 12


def _ledger(adapter: Any) -> Any:
    ledger = ledger_of(adapter)
    if ledger is None:
        raise UnsupportedOperation(f"backend {getattr(adapter, 'name', '?')!r} keeps no "
                                   "erasure ledger")
    return ledger


def list_erasures(adapter: Any) -> list[dict[str, Any]]:
    """Every entry, oldest erasure first: hash prefix, key id, time, receipt reference."""
    entries = sorted(_ledger(adapter).entries(), key=lambda e: (e.erased_at, e.digest))
    return [{"subject": e.digest[:PREFIX], "key": e.key_id,
             "erased_at": e.erased_at.isoformat(), "receipt": e.receipt} for e in entries]


def check_erasure(adapter: Any, user_id: str, owner: str | None) -> dict[str, Any]:
    """Whether the subject ``(user_id, owner)`` was erased; when, by which receipt."""
    if not isinstance(user_id, str) or not user_id.strip():
        raise ValueError("--user must be a non-empty string")
    ledger = _ledger(adapter)
    secrets = {k.key_id: k.secret for k in ledger.keys()}
    found = None
    for entry in ledger.entries():
        secret = secrets.get(entry.key_id)
        if secret is None or subject_digest(secret, user_id, owner) != entry.digest:
            continue
        if found is None or entry.erased_at > found.erased_at:
            found = entry
    if found is None:
        return {"erased": False, "erased_at": None, "receipt": None, "subject": None}
    return {"erased": True, "erased_at": found.erased_at.isoformat(),
            "receipt": found.receipt, "subject": found.digest[:PREFIX]}


def ledger_findings(adapter: Any) -> Iterator[Finding]:
    """``erasure.restored-data``: events, and session states, of an erased subject older
    than its erasure (a restore that bypassed the ledger). Reads every user's log, and
    only while the ledger holds entries."""
    withholding = Withholding.load(adapter)
    store = adapter.event_store() if withholding else None
    if store is None:
        return
    state = adapter.state_store()
    for user in sorted(event_defaults(store).user_ids() or ()):
        log = store.list_events(user)
        for event in log:
            if withholding.withholds_event(event):
                yield _restored(f"event {event.event_id}", "an event")
        for sid in sorted({e.session_id for e in log if withholding.withholds_event(e)
                           and e.session_id}):
            if state.load_full(sid) is not None and withholding.withholds_session(
                    [e for e in log if e.session_id == sid]):
                yield _restored(f"session {sid}", "a session state")


def _restored(where: str, what: str) -> Finding:
    return Finding("erasure.restored-data", Severity.error, where,
                   f"{what} of an erased subject, older than its erasure, is in the store",
                   "a restore wrote it back around the erasure ledger (not through "
                   "semvecctl import, copy or migrate, which withhold it)",
                   "erase the subject again with semvecctl erase (the receipt names the "
                   "erasure; semvecctl erasures check says whether an id was erased)")
