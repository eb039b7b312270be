"""The shred keyring bound to a store: keys named by the keyed hashes of the store's own
ledger secret (:mod:`backends.archive.shred` seals with them), so that the erasure of a
subject in that store names the same keys to destroy."""

from __future__ import annotations

from typing import Any, Iterable

from backends.errors import UnsupportedOperation


def sealer_for(adapter: Any, keyring: Any) -> Any:
    """A :class:`~backends.archive.shred.Sealer` for ``adapter``'s records (its ledger's own
    secret made on first use); refused for a store that keeps no ledger."""
    from backends.archive.shred import Sealer
    from backends.transfer.withhold import ledger_of, own_key

    ledger = ledger_of(adapter)
    if ledger is None:
        raise UnsupportedOperation(
            f"backend {getattr(adapter, 'name', '?')!r} keeps no erasure ledger, so there is "
            "no keyed hash to name shred keys by; drop --shred-keys")
    key = own_key(ledger)
    return Sealer(keyring, key.key_id, key.secret)


def shred_names(adapter: Any, user_id: str, owner: str | None,
                sessions: Iterable[str]) -> list[str]:
    """The names of the keys an erasure destroys: the subject's, and those of the sessions
    it removed, under every secret the store's ledger holds (its own and carried ones)."""
    from backends.archive.shred import SESSION, SUBJECT, key_name
    from backends.contract.ledger import session_digest, subject_digest
    from backends.transfer.withhold import ledger_of

    ledger = ledger_of(adapter)
    if ledger is None:
        return []
    names = []
    sessions = [s for s in sessions if s]
    for key in ledger.keys():
        names.append(key_name(SUBJECT, key.key_id, subject_digest(key.secret, user_id, owner)))
        names.extend(key_name(SESSION, key.key_id, session_digest(key.secret, s))
                     for s in sessions)
    return names
