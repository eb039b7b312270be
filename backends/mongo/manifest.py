"""Every index the Mongo backend needs, as data: names, keys and ALL options.

One manifest drives ``plan``, ``ensure`` and ``validate``, so what we create and what
we check can never disagree. Identity indexes pin the simple (binary) collation so
opaque ids stay case-sensitive even under a collection default collation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from backends.contract import IndexSpec
from backends.mongo.schema import (
    COUNTERS_COLLECTION,
    EVENT_USER_INDEX,
    EVENT_USER_SEQ_INDEX,
    EVENT_USER_TIME_INDEX,
    EVENTS_COLLECTION,
    ITEMS_COLLECTION,
    ITEMS_LIVE_RECENCY_INDEX,
    ITEMS_SESSION_INDEX,
    LEXICAL_SEARCH_INDEX,
    SESSION_TTL_INDEX,
    STATE_COLLECTION,
    STATE_OWNER_INDEX,
    VECTOR_SEARCH_INDEX,
)

SIMPLE_COLLATION: Mapping[str, Any] = {"locale": "simple"}

#: Filter fields every search sub-pipeline uses; declared in both search indexes so the
#: filters run inside the index, before top-k.
SEARCH_FILTER_FIELDS = ("session_id", "evicted", "owner_subject")


@dataclass(frozen=True)
class RegularIndex:
    name: str
    collection: str
    keys: tuple[tuple[str, int], ...]
    unique: bool = False
    partial_filter: Mapping[str, Any] | None = None
    collation: Mapping[str, Any] | None = None
    expire_after_seconds: int | None = None
    required: bool = True

    @property
    def kind(self) -> str:
        if self.expire_after_seconds is not None:
            return "ttl"
        return "unique" if self.unique else "regular"

    def create_options(self) -> dict[str, Any]:
        """Keyword arguments for ``create_index``, exactly the options we mean."""
        options: dict[str, Any] = {"name": self.name}
        if self.unique:
            options["unique"] = True
        if self.partial_filter is not None:
            options["partialFilterExpression"] = dict(self.partial_filter)
        if self.collation is not None:
            options["collation"] = dict(self.collation)
        if self.expire_after_seconds is not None:
            options["expireAfterSeconds"] = int(self.expire_after_seconds)
        return options

    def to_spec(self) -> IndexSpec:
        options = self.create_options()
        options.pop("name")
        return IndexSpec(
            name=self.name,
            target=self.collection,
            kind=self.kind,
            definition={"keys": [[k, d] for k, d in self.keys], "options": options},
            required=self.required,
        )


@dataclass(frozen=True)
class SearchIndex:
    name: str
    collection: str
    type: str  # "vectorSearch" | "search"
    definition: Mapping[str, Any] | None  # None: cannot be sized yet (dimensions unknown)
    required: bool = True
    note: str = field(default="")

    @property
    def kind(self) -> str:
        return self.type

    def to_spec(self) -> IndexSpec:
        return IndexSpec(
            name=self.name,
            target=self.collection,
            kind=self.type,
            definition={"type": self.type, "definition": self.definition},
            required=self.required,
        )


def vector_index_definition(dimensions: int | None) -> dict[str, Any] | None:
    if dimensions is None:
        return None
    return {
        "fields": [
            {"type": "vector", "path": "embedding", "numDimensions": int(dimensions),
             "similarity": "cosine"},
            *({"type": "filter", "path": path} for path in SEARCH_FILTER_FIELDS),
        ]
    }


def lexical_index_definition() -> dict[str, Any]:
    return {
        "mappings": {
            "dynamic": False,
            "fields": {
                "text": {"type": "string"},
                "session_id": {"type": "token"},
                "evicted": {"type": "boolean"},
                "owner_subject": {"type": "token"},
            },
        }
    }


def build_manifest(*, session_ttl_s: int | None, include_items: bool,
                   dimensions: int | None) -> list[RegularIndex | SearchIndex]:
    """What this configuration needs. The item collection and its search indexes are
    included when the item mirror is on, or when the operator sized them explicitly.

    ``required`` marks what the engine itself creates and relies on (ENGINE-WIRE §4: the
    idle-TTL index when a TTL is configured, the three event indexes, the two item search
    indexes); the others are semvecctl's recommendations (owner listing, item sync and
    recency), which a stock engine deployment does not have and ``validate`` only warns
    about unless told to be strict."""
    manifest: list[RegularIndex | SearchIndex] = [
        RegularIndex(STATE_OWNER_INDEX, STATE_COLLECTION, (("owner_subject", 1), ("_id", 1)),
                     collation=SIMPLE_COLLATION, required=False),
    ]
    if session_ttl_s is not None:
        manifest.append(RegularIndex(SESSION_TTL_INDEX, STATE_COLLECTION, (("updated_at", 1),),
                                     expire_after_seconds=int(session_ttl_s)))
    manifest += [
        RegularIndex(EVENT_USER_INDEX, EVENTS_COLLECTION, (("user_id", 1),),
                     collation=SIMPLE_COLLATION),
        RegularIndex(EVENT_USER_SEQ_INDEX, EVENTS_COLLECTION, (("user_id", 1), ("sequence", 1)),
                     unique=True, collation=SIMPLE_COLLATION),
        RegularIndex(EVENT_USER_TIME_INDEX, EVENTS_COLLECTION, (("user_id", 1), ("created_at", 1)),
                     collation=SIMPLE_COLLATION),
    ]
    if include_items:
        manifest += [
            RegularIndex(ITEMS_SESSION_INDEX, ITEMS_COLLECTION, (("session_id", 1), ("item_id", 1)),
                         collation=SIMPLE_COLLATION, required=False),
            RegularIndex(ITEMS_LIVE_RECENCY_INDEX, ITEMS_COLLECTION,
                         (("session_id", 1), ("updated_at", -1)),
                         partial_filter={"evicted": False}, collation=SIMPLE_COLLATION,
                         required=False),
            SearchIndex(VECTOR_SEARCH_INDEX, ITEMS_COLLECTION, "vectorSearch",
                        vector_index_definition(dimensions),
                        note="" if dimensions else
                        "numDimensions unknown: pass --dimensions N or set SEMVEC_MONGO_EMBEDDING_DIM"),
            SearchIndex(LEXICAL_SEARCH_INDEX, ITEMS_COLLECTION, "search", lexical_index_definition()),
        ]
    return manifest


#: Collections the manifest manages (counters need only ``_id``).
MANAGED_COLLECTIONS = (STATE_COLLECTION, EVENTS_COLLECTION, COUNTERS_COLLECTION, ITEMS_COLLECTION)
#: Name prefixes we own: an index with one of these that is not in the plan is "extra".
OWNED_PREFIXES = ("semvec_", "ix_evt_", "ix_items_", "ix_state_")
