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
- :mod:`~backends.contract.mixins`: derived surfaces (engine event calls, reads, close);
- :mod:`~backends.contract.capabilities`: the seams named once, and ``offers()`` /
  ``capabilities_of()``, the one detector.
"""

from __future__ import annotations

#: Re-exported here so the contract stays the one import for adapter authors.
from backends.errors import StateVersionConflict, is_state_version_conflict
from backends.owner import (
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
    LoadedState,
    MemoryEvent,
    MemoryItem,
    MemoryUnit,
    Reranker,
    RetrievalContext,
    SessionSummary,
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
    WriteCheck,
    BatchStateReader,
    Closeable,
    DriftExemption,
    ErasureOffer,
    EventDeleter,
    EventPurger,
    EventRefReader,
    EventRestorer,
    ExpiryDeclaration,
    FAULT_POINTS,
    FaultSeam,
    HealthDetails,
    IndexEntryDropper,
    IndexEntryReader,
    IndexManager,
    ItemMirror,
    ItemPurger,
    LiveItemSource,
    PagedEventReader,
    RetryDeclaration,
    SearchIndexWaiter,
    SequenceDeclaration,
    ServerRetrieval,
    SessionEnumerator,
    SessionRestorer,
    SessionSubjects,
    SubjectsBySession,
    WriteTimeDeclaration,
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
    "BatchStateReader",
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
    "WriteTimeDeclaration",
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
    "ErasureOffer",
    "EventRefReader",
    "IndexEntryReader",
    "IndexEntryDropper",
    "EventDeleter",
    "PagedEventReader",
    "RetryDeclaration",
    "SequenceDeclaration",
    "ExpiryDeclaration",
    "ItemEraser",
    "DriftStatus",
    "WriteCheck",
]
