"""The erasure ledger as the operator sees it (``semvecctl erasures
list|check|identity|export|import|record``), and the doctor's check for data that came
back around it.

The ledger holds keyed hashes, never ids (:mod:`backends.transfer.withhold`): ``list``
shows each entry by a prefix of its hash, its time and its receipt reference; ``check``
hashes the subject it is given under each of the store's keys, so only someone who
knows the ids can ask about them.

For the transfer core (which sits below this layer, so the work is in
:mod:`backends.contract.ledger` and re-exported here): :func:`store_identity`,
:func:`ledger_state`, :func:`holds_ledger`, :class:`LedgerState`, :func:`session_digest`,
:data:`CLOCK_MARGIN`.
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import datetime
from typing import Any, Iterator, NamedTuple, Sequence

from backends.contract import LedgerEntry, LedgerKey, as_utc, event_defaults
from backends.contract.findings import Finding, Severity
from backends.contract.ledger import (CLOCK_MARGIN, ClockReading, LedgerState, holds_ledger,
                                      ledger_state, read_clock, session_digest, state_of,
                                      store_identity)
from backends.errors import IntegrityError, UnsupportedOperation
from backends.transfer.withhold import Withholding, ledger_of, own_key, subject_digest

__all__ = ["CLOCK_MARGIN", "LedgerState", "holds_ledger", "ledger_state", "session_digest",
           "store_identity", "list_erasures", "check_erasure", "ledger_findings",
           "record_subject", "export_ledger", "import_ledger", "record_certificate"]

#: characters of an entry's hash shown by ``erasures list``
PREFIX = 12


def _ledger(adapter: Any) -> Any:
    ledger = ledger_of(adapter)
    if ledger is None:
        raise UnsupportedOperation(f"backend {getattr(adapter, 'name', '?')!r} keeps no "
                                   "erasure ledger")
    return ledger


def list_erasures(adapter: Any) -> list[dict[str, Any]]:
    """Every entry, oldest erasure first: hash prefix, key id, time, receipt reference,
    how many session hashes it holds and its position in the ledger."""
    entries = sorted(_ledger(adapter).entries(), key=lambda e: (e.erased_at, e.digest))
    return [{"subject": e.digest[:PREFIX], "key": e.key_id,
             "erased_at": e.erased_at.isoformat(), "receipt": e.receipt,
             "sessions": len(e.sessions), "position": e.seq} for e in entries]


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


# -- erase: the entry, at the store's clock ---------------------------------------------


def record_subject(adapter: Any, user_id: str, owner: str | None, *,
                   sessions: Sequence[str], receipt: str | None,
                   clock: ClockReading | None = None) -> LedgerEntry | None:
    """Record an erased subject, with the keyed hashes of the sessions its erasure
    removed, at the store's time (``clock``, read now when not given); None when the
    store keeps no ledger."""
    ledger = ledger_of(adapter)
    if ledger is None:
        return None
    key = own_key(ledger)
    at = (clock or read_clock(ledger)).at
    entry = LedgerEntry(key.key_id, subject_digest(key.secret, user_id, owner), at, receipt,
                        tuple(sorted({session_digest(key.secret, s) for s in sessions if s})))
    ledger.add_entries([entry])
    return entry


def store_clock(adapter: Any) -> ClockReading | None:
    """The store's time and the local clock's skew from it (None: it keeps no ledger,
    so no clock of its own is asked)."""
    ledger = ledger_of(adapter)
    return read_clock(ledger) if ledger is not None else None


def clock_record(clock: ClockReading | None) -> dict[str, Any]:
    """What an erase receipt says of the clocks."""
    margin = CLOCK_MARGIN.total_seconds()
    if clock is None:
        return {"source": "local", "margin_seconds": margin,
                "note": "the backend keeps no ledger: the erasing machine's clock was used"}
    skew = clock.skew.total_seconds()
    found = {"source": "store", "store_time": clock.at.isoformat(),
             "skew_seconds": round(skew, 6),
             "round_trip_seconds": round(clock.round_trip.total_seconds(), 6),
             "margin_seconds": margin}
    if abs(skew) > margin:
        found["note"] = (f"the erasing machine's clock is {skew:+.3f}s from the store's, more "
                         "than the margin: check the clocks of the machines writing events")
    return found


# -- the store's identity ----------------------------------------------------------------


def identity_report(adapter: Any, *, create: bool = True) -> dict[str, Any]:
    """The store's identity and its ledger's state (what an archive names)."""
    ledger = _ledger(adapter)
    found = ledger.identity(create=create)
    state = state_of(ledger.entries())
    return {"identity": found.identity if found else None,
            "created_at": found.created_at.isoformat() if found else None,
            "ledger": state.as_dict()}


# -- moving a ledger between stores: erasures export / import ----------------------------

#: what an ``erasures export`` file says it is
FILE_KIND = "semvecctl-erasure-ledger"
FILE_VERSION = 1


class LedgerFileDamaged(IntegrityError):
    """An erasure-ledger file (or an engine certificate) that is not what it says it is:
    nothing of it is recorded."""


class LedgerFile(NamedTuple):
    """A read ``erasures export`` file: the store it came from, its ledger's state then,
    and the keys and entries."""

    identity: str | None
    state: LedgerState
    keys: list[LedgerKey]
    entries: list[LedgerEntry]


def ledger_document(adapter: Any) -> dict[str, Any]:
    """The store's whole ledger as an export file holds it: its identity, the state, the
    secrets its entries are keyed under (hex: the file is as sensitive as the ledger) and
    the entries with their session hashes and positions."""
    ledger = _ledger(adapter)
    entries = sorted(ledger.entries(), key=lambda e: (e.seq, e.key_id, e.digest))
    used = {e.key_id for e in entries}
    found = ledger.identity(create=True)
    return {
        "kind": FILE_KIND, "version": FILE_VERSION,
        "exported_at": as_utc(ledger.now()).isoformat(),
        "store": {"identity": found.identity if found else None,
                  "created_at": found.created_at.isoformat() if found else None},
        "state": state_of(entries).as_dict(),
        "keys": [{"key_id": k.key_id, "secret": k.secret.hex()}
                 for k in sorted(ledger.keys(), key=lambda k: k.key_id) if k.key_id in used],
        "entries": [{"key_id": e.key_id, "digest": e.digest,
                     "erased_at": as_utc(e.erased_at).isoformat(), "receipt": e.receipt,
                     "sessions": list(e.sessions), "seq": e.seq} for e in entries],
    }


def export_ledger(adapter: Any, path: str) -> dict[str, Any]:
    """Write the ledger to ``path`` (atomically, synced, mode 0600); its summary."""
    from backends.archive import atomic_output

    document = ledger_document(adapter)
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    with atomic_output(path) as stream:
        stream.write(text.encode("utf-8"))
    return {"file": path, "identity": document["store"]["identity"],
            "entries": len(document["entries"]), "state": document["state"]}


def read_ledger_file(path: str) -> LedgerFile:
    """An ``erasures export`` file, checked whole (LedgerFileDamaged naming what is
    wrong); its state is recomputed from its entries."""
    import gzip
    import zlib

    try:
        with open(path, "rb") as handle:
            raw = handle.read()
        if raw[:2] == b"\x1f\x8b":  # exported to a FILE.gz (atomic_output compresses it)
            raw = gzip.decompress(raw)
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, OSError, EOFError, zlib.error) as exc:
        if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError)):
            raise
        raise LedgerFileDamaged(f"{path} is not an erasure-ledger file (not JSON: {exc})") \
            from None
    if not isinstance(document, dict) or document.get("kind") != FILE_KIND:
        raise LedgerFileDamaged(f"{path} is not an erasure-ledger file (no kind {FILE_KIND!r})")
    if document.get("version") != FILE_VERSION:
        raise LedgerFileDamaged(f"{path}: erasure-ledger file version "
                                f"{document.get('version')!r} is not one this semvecctl reads")
    try:
        keys = [LedgerKey(k["key_id"], bytes.fromhex(k["secret"]), False)
                for k in document["keys"]]
        entries = [LedgerEntry(e["key_id"], e["digest"], _parse_time(e["erased_at"]),
                               e["receipt"], tuple(e["sessions"]), int(e["seq"]))
                   for e in document["entries"]]
        state = LedgerState.from_dict(document["state"])
        identity = document["store"]["identity"]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise LedgerFileDamaged(f"{path}: a field of the erasure-ledger file is missing or "
                                f"malformed ({type(exc).__name__}: {exc})") from None
    if not all(isinstance(x, str) for e in entries for x in (e.key_id, e.digest, *e.sessions)):
        raise LedgerFileDamaged(f"{path}: an entry's hashes are not strings")
    if {e.key_id for e in entries} - {k.key_id for k in keys}:
        raise LedgerFileDamaged(f"{path}: an entry is keyed under a secret the file lacks")
    if state_of(entries) != state:
        raise LedgerFileDamaged(f"{path}: the entries do not match the file's ledger state "
                                "(edited or truncated)")
    return LedgerFile(identity if isinstance(identity, str) else None, state, keys, entries)


def _parse_time(value: Any) -> datetime:
    if not isinstance(value, str):
        raise ValueError("a time is not a string")
    return as_utc(datetime.fromisoformat(value.replace("Z", "+00:00")))


def import_ledger(adapter: Any, found: LedgerFile) -> dict[str, Any]:
    """Add a ledger file's keys and entries to the store's ledger: a union (an entry held
    keeps the later time and gains the file's session hashes), so importing twice changes
    nothing the second time. Counts: in the file, new, updated, already held."""
    ledger = _ledger(adapter)
    before = {(e.key_id, e.digest): e for e in ledger.entries()}
    held_keys = {k.key_id for k in ledger.keys()}
    for key in found.keys:
        if key.key_id not in held_keys:
            ledger.add_key(LedgerKey(key.key_id, key.secret, False))
    ledger.add_entries(found.entries)
    after = {(e.key_id, e.digest): e for e in ledger.entries()}
    places = {(e.key_id, e.digest) for e in found.entries}
    new = sum(1 for p in places if p not in before)
    updated = sum(1 for p in places if p in before and after.get(p) != before[p])
    return {"entries": len(places), "added": new, "updated": updated,
            "already_held": len(places) - new - updated,
            "source_identity": found.identity, "state": state_of(after.values()).as_dict()}


# -- the engine's erasures: erasures record --certificate --------------------------------

#: the fields of the engine's DeletionCertificate (ENGINE-WIRE §9)
CERTIFICATE_FIELDS = ("user_id", "event_count", "deleted_at", "reason", "issuer")


def read_certificate(path: str) -> dict[str, Any]:
    """The engine's deletion certificate in ``path``: the object itself, or one holding
    it under ``certificate`` (as an API response may)."""
    try:
        with open(path, "rb") as handle:
            body = json.loads(handle.read().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LedgerFileDamaged(f"{path} is not a deletion certificate (not JSON: {exc})") \
            from None
    if isinstance(body, dict) and isinstance(body.get("certificate"), dict):
        body = body["certificate"]
    if not isinstance(body, dict) or not all(f in body for f in (*CERTIFICATE_FIELDS,
                                                                   "signature_b64")):
        raise LedgerFileDamaged(f"{path} is not the engine's deletion certificate (it needs "
                                f"{', '.join(CERTIFICATE_FIELDS)} and signature_b64)")
    if not isinstance(body["user_id"], str) or not body["user_id"].strip():
        raise LedgerFileDamaged(f"{path}: the certificate's user_id is not a non-empty string")
    try:
        _parse_time(body["deleted_at"])
        signature = base64.b64decode(body["signature_b64"], validate=True)
    except (ValueError, TypeError) as exc:
        raise LedgerFileDamaged(f"{path}: the certificate's deleted_at or signature_b64 is "
                                f"malformed ({exc})") from None
    if not signature:
        raise LedgerFileDamaged(f"{path}: the certificate's signature is empty")
    return body


def certificate_message(body: dict[str, Any]) -> bytes:
    """What the engine signs: the canonical JSON of the five other fields."""
    return json.dumps({f: body[f] for f in CERTIFICATE_FIELDS}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def verify_certificate(body: dict[str, Any], public_key: Any, where: str) -> None:
    """Check the certificate's Ed25519 signature with the engine's public key (loaded by
    :func:`backends.ops.signing.load_public_key` from ``where``): LedgerFileDamaged when it
    does not match."""
    from cryptography.exceptions import InvalidSignature

    try:
        public_key.verify(base64.b64decode(body["signature_b64"]), certificate_message(body))
    except InvalidSignature:
        raise LedgerFileDamaged("the certificate's signature does not match its fields under "
                                f"the key {where}") from None


def record_certificate(adapter: Any, body: dict[str, Any], owner: str | None) -> dict[str, Any]:
    """Record the erasure a certificate proves: the subject ``(user_id, owner)`` (the
    certificate names no owner: the caller's scope), at its ``deleted_at`` (the engine's
    clock, not the store's: the margin covers the skew), referenced by the digest of its
    signature. It names no session: the entry withholds by subject only."""
    ledger = _ledger(adapter)
    key = own_key(ledger)
    signature = base64.b64decode(body["signature_b64"])
    reference = f"certificate:sha256:{hashlib.sha256(signature).hexdigest()}"
    at = _parse_time(body["deleted_at"])
    entry = LedgerEntry(key.key_id, subject_digest(key.secret, body["user_id"], owner), at,
                        reference)
    place = (entry.key_id, entry.digest)
    held = {(e.key_id, e.digest): e for e in ledger.entries()}.get(place)
    ledger.add_entries([entry])
    now = {(e.key_id, e.digest): e for e in ledger.entries()}.get(place)
    return {"subject": entry.digest[:PREFIX], "erased_at": at.isoformat(),
            "receipt": reference, "event_count": body["event_count"],
            "reason": body["reason"], "issuer": body["issuer"], "recorded": now != held}


# -- doctor ------------------------------------------------------------------------------


def margin_withholding(*adapters: Any) -> Withholding:
    """The adapters' ledgers as one :class:`Withholding` whose erasure times carry the
    clock margin (an event up to :data:`CLOCK_MARGIN` after the erasure, by a writer's
    clock, is taken as older than it)."""
    base = Withholding.load(*adapters)
    if not base:
        return base
    keys: list[LedgerKey] = []
    entries: list[LedgerEntry] = []
    for adapter in adapters:
        ledger = ledger_of(adapter) if adapter is not None else None
        if ledger is not None:
            keys.extend(ledger.keys())
            entries.extend(e._replace(erased_at=as_utc(e.erased_at) + CLOCK_MARGIN)
                           for e in ledger.entries())
    return Withholding(keys, entries)


def restored_event_ids(adapter: Any) -> set[str]:
    """The events of an erased subject older than its erasure still stored, found by
    reading every stored event (index entry or not)."""
    return {f.event_id for f in ledger_findings(adapter) if f.event_id}


def ledger_findings(adapter: Any) -> Iterator[Finding]:
    """``erasure.restored-data``: events, and session states, of an erased subject older
    than its erasure (a restore that bypassed the ledger), the events found whether or not
    an index names them; then ``erasure.outside-ledger`` (info): logs emptied while their
    counter was kept (the engine's erasure deletes by id and keeps it) by no erasure in
    the ledger. Reads every stored event, and only while the ledger holds entries (the
    second check: on stores that keep a counter apart, Redis and MongoDB)."""
    if ledger_of(adapter) is None:
        return
    withholding = margin_withholding(adapter)
    store = adapter.event_store() if withholding else None
    flagged: set[str] = set()
    if store is not None:
        for finding in _restored_findings(adapter, store, withholding):
            flagged.add(finding.where)
            yield finding
    yield from _restored_sessions(adapter, flagged)
    if adapter.event_store() is not None:  # a store without a log empties none
        yield from _outside_ledger(adapter)


def _restored_findings(adapter: Any, store: Any, withholding: Withholding) -> Iterator[Finding]:
    from backends.contract import UNSCOPED
    from backends.transfer.withhold import SourceLogs

    by_session: dict[str, list[Any]] = {}
    for event in event_defaults(store).iter_stored_events():
        if withholding.withholds_event(event):
            found = _restored(f"event {event.event_id}", "an event")
            found.event_id = event.event_id
            yield found
            if event.session_id:
                by_session.setdefault(event.session_id, []).append(event)
    state = adapter.state_store()
    logs = SourceLogs(store, UNSCOPED)
    for sid in sorted(by_session):
        loaded = state.load_full(sid)
        if loaded is None:
            continue
        seen = {e.event_id for e in by_session[sid]}
        log = by_session[sid] + [e for e in logs.session_log(sid) if e.event_id not in seen]
        if withholding.withholds_session(log):
            yield _restored(f"session {sid}", "a session state")


def _restored_sessions(adapter: Any, flagged: set[str]) -> Iterator[Finding]:
    """Session states whose id an erasure removed (its keyed hash is in an entry), written
    back without their events (a prune archive, a state-only export): an error where the
    store keeps a write time not after the erasure (plus the margin); a warning on a
    store that keeps none (Redis), where a state written again since cannot be told
    from a restored one, unless an event of its log is newer than the erasure."""
    from backends.contract import Capability, offers

    ledger = ledger_of(adapter)
    entries = [e for e in ledger.entries() if e.sessions] if ledger is not None else []
    if not entries or not offers(adapter, Capability.SESSIONS):
        return
    secrets = {k.key_id: k.secret for k in ledger.keys()}
    erased: dict[str, dict[str, datetime]] = {}
    for e in entries:
        if e.key_id in secrets:
            at = as_utc(e.erased_at) + CLOCK_MARGIN
            table = erased.setdefault(e.key_id, {})
            for digest in e.sessions:
                table[digest] = max(at, table.get(digest, at))
    from backends.contract import UNSCOPED
    from backends.transfer.withhold import SourceLogs

    store = adapter.event_store()
    logs = SourceLogs(store, UNSCOPED) if store is not None else None
    for summary in adapter.iter_sessions():
        sid = summary.session_id
        when = max((table[h] for kid, table in erased.items()
                    if (h := session_digest(secrets[kid], sid)) in table), default=None)
        if when is None or f"session {sid}" in flagged:
            continue
        if summary.updated_at is not None:
            if as_utc(summary.updated_at) > when:
                continue  # written after the erasure: a new session of that id
            yield _restored(f"session {sid}", "a session state")
            continue
        if logs is not None and any(as_utc(e.created_at) > when
                                    for e in logs.session_log(sid)):
            continue  # its log goes on after the erasure
        found = _restored(f"session {sid}", "a session state")
        found.severity = Severity.warning
        found.why = ("its id is one an erasure removed, and the store keeps no write time: "
                     "restored around the ledger, or written again since")
        yield found


def _outside_ledger(adapter: Any) -> Iterator[Finding]:
    ledger = ledger_of(adapter)
    emptied = ledger.emptied_logs() if ledger is not None else None
    if not emptied:
        return
    checker = Withholding.load(adapter)
    owners = _owners_known(adapter)
    for user, counter in sorted(emptied):
        if any(checker.erased_at(user, owner) is not None for owner in owners):
            continue
        yield Finding(
            "erasure.outside-ledger", Severity.info, f"user {user}",
            f"no event of this user is left, though its counter says {counter} were "
            "written, and no erasure in the ledger names it under an owner the store knows",
            "its events were deleted one by one (the engine's erasure does so, as does a "
            "deletion by id or age); if the engine erased it, an older archive restores it",
            "semvecctl erasures record --certificate FILE --owner OWNER with the engine's "
            "deletion certificate, if there is one")


def _owners_known(adapter: Any) -> set[str | None]:
    """The owners the store's sessions name, and the unowned subject."""
    from backends.contract import Capability, offers

    owners: set[str | None] = {None}
    if offers(adapter, Capability.SESSIONS):
        owners.update(s.owner_subject for s in adapter.iter_sessions() if s.owner_subject)
    return owners


def _restored(where: str, what: str) -> Finding:
    return Finding("erasure.restored-data", Severity.error, where,
                   f"{what} of an erased subject, older than its erasure, is in the store",
                   "a restore wrote it back around the erasure ledger (not through "
                   "semvecctl import, copy or migrate, which withhold it)",
                   "erase the subject again with semvecctl erase (the receipt names the "
                   "erasure; semvecctl erasures check says whether an id was erased); "
                   "doctor --fix never indexes it again")
