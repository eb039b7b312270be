"""What an adapter can do beyond the required contract, named once, and the one detector
(:func:`offers`, :func:`capabilities_of`). Each capability's members are read from its
seam protocol, never listed again by hand."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from backends.contract.protocols import protocol_members
from backends.contract.seams import (BatchSessionRestorer, Closeable, DriftExemption, DriftStatus,
                                     ErasureLedgerOffer, ErasureOffer, EventDeleter, EventLogShapes, EventPurger,
                                     EventRestorer, FaultSeam, HealthDetails, IndexManager,
                                     ItemMirror, ItemPurger, LiveItemSource, SearchIndexWaiter,
                                     ServerRetrieval, SessionEnumerator, SessionRestorer,
                                     SessionStateLister, SessionSubjects, SubjectsBySession,
                                     VersionLister)


class Capability(str, Enum):
    """What an adapter can do beyond the required contract, named once.

    Each member maps (in :data:`CAPABILITIES`) to the object that offers it (the adapter,
    its state store or its event store), the protocol that describes it and the members
    that reveal it. :func:`capabilities_of` is the one detector."""

    SESSIONS = "sessions"
    RESTORE = "restore"
    INDEXES = "indexes"
    LIVE_ITEMS = "live-items"
    ITEM_MIRROR = "item-mirror"
    HEALTH_DETAILS = "health-details"
    SEARCH_INDEX_WAIT = "search-index-wait"
    SERVER_RETRIEVAL = "server-retrieval"
    PURGE_ITEMS = "purge-items"
    CLOSE = "close"
    FAULTS = "faults"
    DRIFT_EXEMPT = "drift-exempt"
    PURGE_USER = "purge-user"
    RESTORE_EVENTS = "restore-events"
    SESSION_SUBJECTS = "session-subjects"
    SUBJECTS_BY_SESSION = "subjects-by-session"
    ERASURE = "erasure"
    DELETE_EVENT = "delete-event"
    DRIFT_STATUS = "drift-status"
    EVENT_LOG_SHAPES = "event-log-shapes"
    BATCH_RESTORE = "batch-restore"
    VERSION_LIST = "version-list"
    SESSION_STATES = "session-states"
    LEDGER = "erasure-ledger"


@dataclass(frozen=True)
class CapabilitySpec:
    """Where a capability lives and how it shows. ``methods`` (all must be callable) and
    ``flag`` (a declared attribute: the fault seam's ``fault_points``, offered when it
    names at least one point) are read from ``protocol``, so a capability's members are
    said once, in its protocol; ``seam`` marks the operator seams the CLI lists and
    detects on the adapter. Shortcuts and declarations are no capabilities: they have a
    default on a base (:mod:`backends.contract.defaults`)."""

    holder: str
    protocol: type
    seam: bool = False
    methods: tuple[str, ...] = field(init=False)
    flag: str | None = field(init=False)

    def __post_init__(self) -> None:
        members = protocol_members(self.protocol)
        flags = [name for name, is_method in members if not is_method]
        if len(flags) > 1 or (flags and flags != ["fault_points"]):
            raise TypeError(f"{self.protocol.__name__} declares a flag other than the fault "
                            f"points ({flags}): a declaration has a default on a base instead")
        object.__setattr__(self, "methods", tuple(n for n, is_method in members if is_method))
        object.__setattr__(self, "flag", flags[0] if flags else None)

    def offered_by(self, obj: Any) -> bool:
        """Whether ``obj`` (a class or an instance of the holder) offers this."""
        if obj is None:
            return False
        if not all(callable(getattr(obj, m, None)) for m in self.methods):
            return False
        if self.flag is None:
            return True
        value = getattr(obj, self.flag, None)
        return isinstance(value, (set, frozenset)) and bool(value)


_A, _S, _E = "adapter", "state_store", "event_store"

#: Every capability, in the order reports list them.
CAPABILITIES: dict[Capability, CapabilitySpec] = {
    Capability.SESSIONS: CapabilitySpec(
        _A, SessionEnumerator, seam=True),
    Capability.RESTORE: CapabilitySpec(_A, SessionRestorer, seam=True),
    Capability.INDEXES: CapabilitySpec(
        _A, IndexManager, seam=True),
    Capability.LIVE_ITEMS: CapabilitySpec(_A, LiveItemSource, seam=True),
    Capability.ITEM_MIRROR: CapabilitySpec(_A, ItemMirror, seam=True),
    Capability.HEALTH_DETAILS: CapabilitySpec(_A, HealthDetails, seam=True),
    Capability.SEARCH_INDEX_WAIT: CapabilitySpec(
        _A, SearchIndexWaiter),
    Capability.PURGE_ITEMS: CapabilitySpec(_A, ItemPurger),
    Capability.SERVER_RETRIEVAL: CapabilitySpec(
        _A, ServerRetrieval, seam=True),
    Capability.CLOSE: CapabilitySpec(_A, Closeable),
    Capability.FAULTS: CapabilitySpec(_A, FaultSeam),
    Capability.DRIFT_EXEMPT: CapabilitySpec(_S, DriftExemption),
    Capability.PURGE_USER: CapabilitySpec(_E, EventPurger),
    Capability.RESTORE_EVENTS: CapabilitySpec(
        _E, EventRestorer),
    Capability.SESSION_SUBJECTS: CapabilitySpec(_E, SessionSubjects),
    Capability.SUBJECTS_BY_SESSION: CapabilitySpec(
        _E, SubjectsBySession),
    Capability.ERASURE: CapabilitySpec(_A, ErasureOffer),
    Capability.DELETE_EVENT: CapabilitySpec(_E, EventDeleter),
    Capability.DRIFT_STATUS: CapabilitySpec(_S, DriftStatus),
    Capability.EVENT_LOG_SHAPES: CapabilitySpec(_E, EventLogShapes),
    Capability.BATCH_RESTORE: CapabilitySpec(_S, BatchSessionRestorer),
    Capability.VERSION_LIST: CapabilitySpec(_A, VersionLister),
    Capability.SESSION_STATES: CapabilitySpec(_A, SessionStateLister),
    Capability.LEDGER: CapabilitySpec(_A, ErasureLedgerOffer),
}


def offers(obj: Any, capability: Capability) -> bool:
    """Whether ``obj`` (already the right holder: adapter, state store or event store)
    offers ``capability``."""
    return CAPABILITIES[capability].offered_by(obj)


def _holder(adapter: Any, name: str) -> Any:
    try:
        return getattr(adapter, name)()
    except Exception:  # noqa: BLE001 - a store that cannot be built offers nothing
        return None


def capabilities_of(adapter: Any, *, stores: bool = True) -> list[Capability]:
    """The capabilities an adapter offers, in :data:`CAPABILITIES` order.

    A class (nothing built) or ``stores=False`` answers for the adapter's own members
    only; an instance also asks its state and event stores. Never raises."""
    import inspect

    holders: dict[str, Any] = {_A: adapter}
    if stores and not inspect.isclass(adapter):
        holders[_S] = _holder(adapter, "state_store")
        holders[_E] = _holder(adapter, "event_store")
    return [cap for cap, spec in CAPABILITIES.items()
            if spec.holder in holders and spec.offered_by(holders[spec.holder])]


def server_retriever_of(adapter: Any) -> Any:
    """The adapter's server-side retriever through the :class:`ServerRetrieval` seam, or
    None (no seam, or the store cannot rank server-side). Never the engine's
    ``retrieval_backend()``: that one is the engine's, and in-process there."""
    if not offers(adapter, Capability.SERVER_RETRIEVAL):
        return None
    return adapter.server_retriever()


def fault_points_of(adapter: Any) -> frozenset[str]:
    """The fault points an adapter honours (empty without a fault seam)."""
    if not offers(adapter, Capability.FAULTS):
        return frozenset()
    return frozenset(adapter.fault_points)


def close_quietly(adapter: Any) -> None:
    """Close an adapter that offers ``close()``, swallowing what closing raises: used
    where the run is over and a close failure must not mask its result."""
    if offers(adapter, Capability.CLOSE):
        try:
            adapter.close()
        except Exception:  # noqa: BLE001
            pass
