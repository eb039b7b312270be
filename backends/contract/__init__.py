"""The session-backend contract: value types, validation, the required protocols, the
optional operator seams, the mixins that derive one part from another, and the capabilities
(one detector). One import for adapter authors: every name is re-exported here.

This package is the single source of truth for what an adapter must offer. It imports
nothing heavy (no drivers, no numpy) so that the registry and ``semvecctl --help`` stay
fast. Behavioural rules that ``isinstance`` cannot see are pinned by
``backends.conformance``.

- :mod:`~backends.contract.values`: sessions, events, items, index reports (plain data);
- :mod:`~backends.contract.validation`: what every store refuses before any I/O;
- :mod:`~backends.contract.protocols`: the required contract (adapter, stores, retriever);
- :mod:`~backends.contract.seams`: optional seams an adapter or its stores may offer;
- :mod:`~backends.contract.defaults`: shortcuts (batch reads, digests, counts, listing
  variants, declarations) with a correct default on a base, overridden where faster;
- :mod:`~backends.contract.mixins`: derived surfaces (engine event calls, reads, close);
- :mod:`~backends.contract.capabilities`: the seams named once, and ``offers()`` /
  ``capabilities_of()``, the one detector.
"""

from __future__ import annotations

#: Re-exported here so the contract stays the one import for adapter authors.
from backends.errors import StateVersionConflict, is_state_version_conflict
from backends.contract.owner import (
    ANONYMOUS_OWNER,
    OwnerFilter,
    OwnerScope,
    UNSCOPED,
    owner_matches,
    owner_of_scope,
    speaks_both_conventions,
    takes_scope,
    validate_owner_filter,
)
from backends.contract.values import (
    EVENT_FIELDS,
    FieldDiff,
    IndexAction,
    IndexReport,
    IndexSpec,
    ItemSyncResult,
    LedgerEntry,
    LedgerKey,
    StoreIdentity,
    LoadedState,
    MemoryEvent,
    MemoryItem,
    MemoryUnit,
    Reranker,
    RetrievalContext,
    SessionSummary,
    LogShape,
    as_utc,
    coerce_event,
)
from backends.contract.validation import (
    check_delete_version,
    meta_json,
    normalise_pending,
    validate_event,
    validate_save_args,
    validate_turn_events,
)
from backends.contract.protocols import (
    BackendAdapter,
    EventStore,
    REQUIRED_ADAPTER_MEMBERS,
    RetrievalBackend,
    StateStoreProtocol,
    protocol_members,
)
from backends.contract.seams import (
    DriftStatus,
    EventLogShapes,
    BatchSessionRestorer,
    RestoreRow,
    StoredDigest,
    VersionLister,
    SessionStateLister,
    Closeable,
    DriftExemption,
    ErasureLedger,
    ErasureLedgerOffer,
    ErasureOffer,
    EventDeleter,
    EventPurger,
    EventRestorer,
    FAULT_POINTS,
    FaultSeam,
    HealthDetails,
    IndexManager,
    ItemMirror,
    ItemPurger,
    LiveItemSource,
    SearchIndexWaiter,
    ServerRetrieval,
    SessionEnumerator,
    SessionRestorer,
    SessionSubjects,
    SubjectsBySession,
)
from backends.contract.defaults import (
    AdapterDefaults,
    EventStoreDefaults,
    StateStoreDefaults,
    adapter_defaults,
    event_defaults,
    state_defaults,
)
from backends.contract.mixins import (
    ItemEraser,
    ClosesOnce,
    DerivedReads,
    EngineEventSurface,
    StateStoreSeams,
)
from backends.contract.capabilities import (
    CAPABILITIES,
    Capability,
    CapabilitySpec,
    capabilities_of,
    close_quietly,
    fault_points_of,
    offers,
    server_retriever_of,
)

__all__ = [
    "UNSCOPED",
    "ANONYMOUS_OWNER",
    "OwnerFilter",
    "OwnerScope",
    "owner_of_scope",
    "speaks_both_conventions",
    "takes_scope",
    "coerce_event",
    "EngineEventSurface",
    "EventRestorer",
    "FaultSeam",
    "FAULT_POINTS",
    "StateVersionConflict",
    "is_state_version_conflict",
    "LoadedState",
    "MemoryEvent",
    "MemoryItem",
    "MemoryUnit",
    "RetrievalContext",
    "SessionSummary",
    "IndexSpec",
    "IndexAction",
    "IndexReport",
    "FieldDiff",
    "ItemSyncResult",
    "LedgerEntry",
    "LedgerKey",
    "StoreIdentity",
    "StateStoreProtocol",
    "EventStore",
    "RetrievalBackend",
    "BackendAdapter",
    "SessionEnumerator",
    "IndexManager",
    "LiveItemSource",
    "ItemMirror",
    "SessionRestorer",
    "HealthDetails",
    "EventPurger",
    "BatchSessionRestorer",
    "RestoreRow",
    "StoredDigest",
    "AdapterDefaults",
    "EventStoreDefaults",
    "StateStoreDefaults",
    "adapter_defaults",
    "event_defaults",
    "state_defaults",
    "VersionLister",
    "SessionStateLister",
    "ItemPurger",
    "ServerRetrieval",
    "server_retriever_of",
    "REQUIRED_ADAPTER_MEMBERS",
    "Capability",
    "CapabilitySpec",
    "CAPABILITIES",
    "capabilities_of",
    "offers",
    "fault_points_of",
    "close_quietly",
    "SearchIndexWaiter",
    "Closeable",
    "SessionSubjects",
    "SubjectsBySession",
    "DriftExemption",
    "owner_matches",
    "validate_event",
    "validate_owner_filter",
    "validate_save_args",
    "StateStoreSeams",
    "ClosesOnce",
    "DerivedReads",
    "validate_turn_events",
    "normalise_pending",
    "as_utc",
    "check_delete_version",
    "Reranker",
    "EVENT_FIELDS",
    "meta_json",
    "protocol_members",
    "ErasureLedger",
    "ErasureLedgerOffer",
    "ErasureOffer",
    "EventDeleter",
    "ItemEraser",
    "DriftStatus",
    "EventLogShapes",
    "LogShape",
]
