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
               event_ids: Iterable[str] = (),
               attempt: Callable[[Callable[[], Any]], Any] = lambda step: step(),
               describe: Callable[[BaseException], str] = _describe) -> list[str]:
    """Purge the mirrored items of ``item_sessions`` (when the adapter can), delete
    ``sessions``, remove every event and counter of ``users``, then every event of
    ``event_ids`` that is still there (an event a defective turn stored without indexing
    it, so no listing of its user finds it); return the problems.

    An event is deleted by id only when it belongs to one of the run's users (its user id
    carries ``prefix``): an id the run made up and someone else's event never meet here.
    One that cannot be removed (the store deletes no single event) is reported.

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
    event_ids = list(dict.fromkeys(str(e) for e in event_ids))
    for name, wanted in (("state_store", ours(sessions)),
                         ("event_store", ours(users) or event_ids)):
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
    if event_ids and driver.looks_up_by_id:  # else no event can be seen by its id
        for eid in event_ids:
            step(f"removing event {eid}", partial(_remove_event, driver, eid, prefix))
    return problems


def _remove_event(driver: Any, event_id: str, prefix: str) -> None:
    """Delete one of the run's events that is still stored (by id); raise when it stays."""
    found = driver.get_event(event_id)
    if found is None or not str(getattr(found, "user_id", "")).startswith(prefix):
        return
    if not driver.deletes_by_id:
        raise RuntimeError("still stored, and the event store deletes no single event by id")
    driver.delete_event(event_id)
    if driver.get_event(event_id) is not None:
        raise RuntimeError("still stored after deleting it by id")


def _keep(holders: dict[str, Any], name: str, build: Callable[[], Any]) -> None:
    holders[name] = build()
