"""Removing what a run created (a conformance case, a load run): written once.

Only ids under the run's prefix are touched, never a foreign session or user. Each step
that fails is reported and the rest still run: a cleanup never raises.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from functools import partial
from typing import Any, Callable, Iterable

from backends.contract import Capability, offers

#: events created up to this far in the future still count as the run's
CLEANUP_HORIZON = timedelta(days=366)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def remove_run(adapter: Any, prefix: str, *, sessions: Iterable[str] = (),
               users: Iterable[str] = (), item_sessions: Iterable[str] = (),
               attempt: Callable[[Callable[[], Any]], Any] = lambda step: step(),
               describe: Callable[[BaseException], str] = _describe) -> list[str]:
    """Purge the mirrored items of ``item_sessions`` (when the adapter can), delete
    ``sessions`` and remove every event and counter of ``users``; return the problems.

    ``attempt`` runs each step (a load run retries through outages), ``describe`` words
    a failure for the caller's report."""
    from backends.conformance.drive import EventsDriver

    problems: list[str] = []

    def step(what: str, work: Callable[[], Any]) -> None:
        try:
            attempt(work)
        except Exception as exc:  # noqa: BLE001 - reported, the other steps still run
            problems.append(f"{what}: {describe(exc)}")

    def ours(ids: Iterable[str]) -> list[str]:
        return [i for i in ids if i.startswith(prefix)]

    if offers(adapter, Capability.PURGE_ITEMS):
        for sid in ours(item_sessions):
            step(f"purging items of {sid}", partial(adapter.purge_items, sid))
    holders: dict[str, Any] = {}
    for name, wanted in (("state_store", ours(sessions)), ("event_store", ours(users))):
        if wanted:
            step(f"{name}()", partial(_keep, holders, name, getattr(adapter, name)))
    store = holders.get("state_store")
    if store is not None:
        for sid in ours(sessions):
            step(f"deleting session {sid}", partial(store.delete, sid))
    events = holders.get("event_store")
    if events is None:
        return problems
    driver = EventsDriver(events)
    purges = offers(events, Capability.PURGE_USER) or callable(getattr(events, "delete_by_user", None))
    horizon = datetime.now(timezone.utc) + CLEANUP_HORIZON
    for uid in ours(users):
        if purges:
            step(f"purging user {uid}", partial(driver.purge, uid))
        else:
            step(f"deleting events of {uid}",
                 partial(driver.delete_older_than, horizon, user_id=uid))
    return problems


def _keep(holders: dict[str, Any], name: str, build: Callable[[], Any]) -> None:
    holders[name] = build()
