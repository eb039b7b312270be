"""Structural checks: what ``isinstance`` can see, plus the few typed promises it cannot
(``is_persistent`` declared on the class, one state store, an int version)."""

from __future__ import annotations

import inspect

from backends.conformance.catalogue import case
from backends.conformance.context import CaseContext, describe_exception
from backends.conformance.drive import (
    ENGINE_EVENT_CALLS,
    OUR_EVENT_CALLS,
    event_surface,
    missing_event_calls,
)
from backends.conformance.model import NotApplicable
from backends.contract import (
    REQUIRED_ADAPTER_MEMBERS,
    Capability,
    EventStore,
    RetrievalBackend,
    StateStoreProtocol,
    offers,
)
from backends.registry import fold_name

_STATE_METHODS = ("save", "load", "load_full", "load_owner", "current_version", "delete")



@case("contract")
def members(ctx: CaseContext) -> None:
    """Every BackendAdapter member is present; methods are callable; name is a string."""
    missing = [m for m, _ in REQUIRED_ADAPTER_MEMBERS if not hasattr(ctx.adapter, m)]
    ctx.expect(not missing, "adapter members", "all of " + ", ".join(
        m for m, _ in REQUIRED_ADAPTER_MEMBERS), "missing " + ", ".join(missing))
    not_callable = [m for m, must in REQUIRED_ADAPTER_MEMBERS
                    if must and not callable(getattr(ctx.adapter, m))]
    ctx.expect(not not_callable, "adapter methods", "callable",
               "not callable: " + ", ".join(not_callable))
    name = ctx.adapter.name
    ctx.expect(isinstance(name, str) and bool(name.strip()), "adapter name",
               "a non-empty str", repr(name))


@case("contract")
def is_persistent_class_bool(ctx: CaseContext) -> None:
    """is_persistent is declared on the class as a real bool (not a property, not 0/1)."""
    declared = inspect.getattr_static(type(ctx.adapter), "is_persistent", None)
    ctx.expect(declared is not None, "is_persistent on the adapter class",
               "a class attribute", "nothing declared on the class")
    ctx.expect(isinstance(declared, bool), "is_persistent on the adapter class",
               "a bool", f"{type(declared).__name__} {declared!r}")
    ctx.expect_equal(ctx.adapter.is_persistent, declared, "is_persistent read on the instance")


@case("contract")
def state_store_same_instance(ctx: CaseContext) -> None:
    """state_store() returns the same object every call, with every store method."""
    first = ctx.call("state_store()", ctx.adapter.state_store)
    second = ctx.call("second state_store()", ctx.adapter.state_store)
    ctx.expect(first is second, "state_store() called twice", "the same instance",
               f"two objects ({type(first).__name__} at {id(first):#x} and {id(second):#x})")
    missing = [m for m in _STATE_METHODS if not callable(getattr(first, m, None))]
    ctx.expect(not missing, "state store methods", ", ".join(_STATE_METHODS),
               "missing or not callable: " + ", ".join(missing))
    ctx.expect(isinstance(first, StateStoreProtocol), "isinstance(store, StateStoreProtocol)",
               "True", "False")


@case("contract")
def optional_halves(ctx: CaseContext) -> None:
    """event_store() and retrieval_backend() return None or an object of the protocol."""
    events = ctx.call("event_store()", ctx.adapter.event_store)
    if events is not None and event_surface(events) is None:
        missing = missing_event_calls(events)
        ctx.fail("event store methods",
                 "our surface (" + ", ".join(OUR_EVENT_CALLS) + ") or the engine's ("
                 + ", ".join(ENGINE_EVENT_CALLS) + ")",
                 "; ".join(f"{surface} surface misses {', '.join(calls)}"
                           for surface, calls in missing.items()))
    if events is not None and event_surface(events) == "ours":
        ctx.expect(isinstance(events, EventStore), "isinstance(events, EventStore)",
                   "True", "False")
    retriever = ctx.call("retrieval_backend()", ctx.adapter.retrieval_backend)
    if retriever is not None:
        ctx.expect(isinstance(retriever, RetrievalBackend),
                   "isinstance(retriever, RetrievalBackend)",
                   "name, inert_fields and search()", type(retriever).__name__)


@case("contract")
def name_matches_selection(ctx: CaseContext) -> None:
    """name folds to the name the adapter was selected by (entry-point key / --backend)."""
    if not ctx.selected_name:
        raise NotApplicable("no selected name to compare with (adapter given directly)")
    name = ctx.adapter.name
    ctx.expect(isinstance(name, str) and fold_name(name) == fold_name(ctx.selected_name),
               "adapter name against the selected name",
               f"{ctx.selected_name!r} (folded)", repr(name))


@case("contract")
def commit_turn_returns_int(ctx: CaseContext) -> None:
    """commit_turn returns the new version as an int (a bool is not a version)."""
    sid = ctx.session()
    version = ctx.call("commit_turn insert",
                       lambda: ctx.commit_turn(sid, b"v1", expected_version=None))
    ctx.expect_int_version(version, 1, "commit_turn insert return value")
    version = ctx.call("commit_turn update",
                       lambda: ctx.commit_turn(sid, b"v2", expected_version=1))
    ctx.expect_int_version(version, 2, "commit_turn update return value")


@case("contract")
def close_is_idempotent(ctx: CaseContext) -> None:
    """close(), when offered, can be called twice on a fresh adapter without raising."""
    if ctx.factory is None:
        raise NotApplicable("no adapter factory: cannot build a throw-away adapter to close")
    if not offers(ctx.adapter, Capability.CLOSE):
        raise NotApplicable("the adapter offers no close()")
    fresh = ctx.call("building a second adapter", ctx.factory)
    for attempt in ("first", "second"):
        try:
            fresh.close()
        except Exception as exc:  # noqa: BLE001
            ctx.fail(f"{attempt} close()", "no exception", f"raised {describe_exception(exc)}")
