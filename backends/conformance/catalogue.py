"""The catalogue: which groups exist, in which order, and which cases each holds.

A case is a plain function taking a :class:`CaseContext`; it raises
:class:`CaseFailure` (expected vs actual) or :class:`NotApplicable`. A group's
``applies`` probe looks at what the adapter offers and returns ``None`` when the group
applies, or the reason it cannot.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from backends.contract import Capability, offers

GROUP_ORDER = (
    "contract",
    "state",
    "commit_turn",
    "durability",
    "events",
    "concurrency",
    "faults",
    "isolation",
    "health",
    "retrieval",
    "indexes",
    # last: it fails the deployment's primary, so nothing may run after it
    "failover",
)

GROUP_DOCS = {
    "contract": "members, is_persistent, one state store, name, commit_turn's return type",
    "state": "insert, compare-and-set, owner and pending rules, three-state reads/deletes",
    "commit_turn": "state and events land together or not at all; owner check; refusals",
    "events": "per-user gap-free sequences, strict delete_older_than, tenant isolation",
    "durability": "the server's own durability (Redis: AOF, eviction policy); state and "
                  "events survive reopening; a fault, a cut connection or a SIGKILL "
                  "mid-turn leaves the whole turn or nothing",
    "concurrency": "racing writers, threads and child processes with their own adapters: "
                   "every version has exactly one winner",
    "faults": "through a loopback TCP proxy the suite starts: a connection cut, stalled or "
              "reset mid-call leaves every turn whole or absent, never duplicated; health "
              "says False while cut and True after",
    "isolation": "empty, padded, case-folded, Unicode-variant and prefix owners and blank "
                 "user ids find nothing of another owner or user (reads, listings, "
                 "deletes, events, retrieval)",
    "health": "check_health answers a bool, promptly, without raising",
    "retrieval": "filters (session, owner) are applied before top-k",
    "indexes": "ensure is idempotent; validate is read-only and passes after ensure",
    "failover": "writers in child processes while the primary fails and a replica is "
                "promoted (given a topology): no turn torn; acknowledged turns lost only "
                "where replication is asynchronous, and then counted",
}

_CASE_MODULES = {group: f"backends.conformance.cases.{group}" for group in GROUP_ORDER}


#: The capabilities a group needs, keyed on :class:`Capability` and checked in order
#: (after the group's own ``applies`` probe) through :func:`backends.contract.offers`,
#: each with the reason the group is skipped without it.
GROUP_CAPABILITIES: dict[str, tuple[tuple[Capability, str], ...]] = {
    "retrieval": (
        (Capability.ITEM_MIRROR,
         "the adapter has no ItemMirror (sync_items), so the suite cannot seed items"),
        (Capability.PURGE_ITEMS,
         "the adapter offers no purge_items(session_id), so seeded items could not be "
         "removed afterwards"),
    ),
    "indexes": (
        (Capability.INDEXES, "the adapter does not manage indexes (no IndexManager seam)"),
    ),
}

#: Groups whose cases are optional capabilities: a deployment that refuses one with
#: UnsupportedOperation (e.g. turns with events on a standalone MongoDB) makes the case
#: not applicable rather than failed. The event log is one (an adapter without an event
#: store), and so is every group that needs a :class:`Capability`.
CAPABILITY_GROUPS = ("events", *GROUP_CAPABILITIES)


@dataclass(frozen=True)
class Case:
    group: str
    name: str
    func: Callable[[Any], None]
    doc: str
    #: UnsupportedOperation from the adapter means "not applicable here", not a failure.
    refusal_is_na: bool = False

    @property
    def case_id(self) -> str:
        return f"{self.group}.{self.name}"


_REGISTERED: dict[str, list[Case]] = {}
_APPLIES: dict[str, Callable[[Any], str | None]] = {}


def case(group: str, name: str | None = None, *, needs_event_turns: bool = False
         ) -> Callable[[Callable[[Any], None]], Callable[[Any], None]]:
    """Register a case function under ``group`` (name defaults to the function's).

    ``needs_event_turns`` marks a case that cannot run where the deployment refuses
    turns with events (UnsupportedOperation): it is then not applicable.
    """

    def register(func: Callable[[Any], None]) -> Callable[[Any], None]:
        doc = (func.__doc__ or "").strip().splitlines()[0] if func.__doc__ else ""
        entry = Case(group, name or func.__name__, func, doc,
                     refusal_is_na=needs_event_turns or group in CAPABILITY_GROUPS)
        cases = _REGISTERED.setdefault(group, [])
        if any(c.name == entry.name for c in cases):
            raise ValueError(f"duplicate conformance case {entry.case_id}")
        cases.append(entry)
        return func

    return register


def applies(group: str) -> Callable[[Callable[[Any], str | None]], Callable[[Any], str | None]]:
    """Register the applicability probe of ``group``."""

    def register(func: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
        _APPLIES[group] = func
        return func

    return register


def _load(group: str) -> None:
    if group not in _REGISTERED:
        importlib.import_module(_CASE_MODULES[group])


def group_cases(group: str) -> list[Case]:
    if group not in GROUP_ORDER:
        raise KeyError(group)
    _load(group)
    return list(_REGISTERED.get(group, ()))


def group_applies(group: str, adapter: Any) -> str | None:
    _load(group)
    probe = _APPLIES.get(group)
    reason = probe(adapter) if probe is not None else None
    if reason is not None:
        return reason
    for capability, missing in GROUP_CAPABILITIES.get(group, ()):
        if not offers(adapter, capability):
            return missing
    return None


def select_cases(only: Any = None) -> list[Case]:
    """Cases in run order, restricted by ``only`` (group names and/or ``group.case``
    ids; a string may hold several, comma-separated). Unknown names raise ValueError."""
    wanted = _normalise_only(only)
    selected: list[Case] = []
    all_ids: set[str] = set()
    for group in GROUP_ORDER:
        for entry in group_cases(group):
            all_ids.add(entry.case_id)
            if wanted is None or group in wanted or entry.case_id in wanted:
                selected.append(entry)
    if wanted is not None:
        unknown = sorted(w for w in wanted if w not in GROUP_ORDER and w not in all_ids)
        if unknown:
            raise ValueError(
                f"unknown conformance group or case: {', '.join(unknown)} "
                f"(groups: {', '.join(GROUP_ORDER)})"
            )
    return selected


def _normalise_only(only: Any) -> set[str] | None:
    if only is None:
        return None
    items = [only] if isinstance(only, str) else list(only)
    wanted = {part.strip() for item in items for part in str(item).split(",") if part.strip()}
    folded = {w.replace("-", "_") if w.replace("-", "_") in GROUP_ORDER else w for w in wanted}
    return folded or None
