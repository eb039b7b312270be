"""Tenant isolation probed with the owners and user ids that slip through in production:
empty, padded, case-folded, a Unicode name in its other normal form, a prefix of
another owner, and user ids ``""`` and ``" "``.

Well-formed owners are the ``state`` and ``events`` groups' business. Here every read,
listing, count, delete, event listing and server-side search is asked with a value that is *not* the stored
owner (or user) and must find nothing of it: refusing the value (an exception that is not
a version conflict) is as good as finding nothing; "everything" for an empty value (the
ADK Redis backend's bug for an empty user id) or a match after trimming, case-folding or
Unicode normalisation is a leak. Owners are compared as the exact strings they are.
"""

from __future__ import annotations

import unicodedata
from typing import Any, Callable

from backends.conformance.catalogue import case
from backends.conformance.context import CaseContext
from backends.conformance.model import SubCheckNotApplicable
from backends.contract import Capability, offers
from backends.errors import is_state_version_conflict

_REFUSED = object()


def _leak(stored_owner: str | None, probe: str) -> bool:
    """Whether a row of ``stored_owner`` must stay hidden from owner ``probe``. ``""`` is
    how the engine writes "no owner", so an empty probe may find unowned rows, never an
    owned one."""
    stored = stored_owner or None
    if probe == "":
        return stored is not None
    return stored != probe


def _ask(fn: Callable[[], Any]) -> Any:
    """The answer, or _REFUSED when the store refused the value (not a conflict)."""
    try:
        return fn()
    except SubCheckNotApplicable:
        raise
    except Exception as exc:  # noqa: BLE001 - a refusal is an acceptable answer
        if is_state_version_conflict(exc):
            raise
        return _REFUSED


class _Tenants:
    """Rows of three owners (one a prefix of another, one a Unicode name) plus an unowned
    row, and events of each, made by the case."""

    def __init__(self, ctx: CaseContext) -> None:
        self.ctx = ctx
        self.acme = ctx.owner("acme")
        self.longer = ctx.owner("acme-corp")            # acme is a prefix of it
        self.cafe = ctx.owner(unicodedata.normalize("NFC", "caf\u00e9 m\u00fcller"))
        self.sessions: dict[str, str | None] = {}
        for owner in (self.acme, self.longer, self.cafe, None):
            sid = ctx.session("iso")
            ctx.call("save", lambda: ctx.store.save(sid, f"blob of {owner}".encode(),
                                                    expected_version=None,
                                                    owner_subject=owner))
            self.sessions[sid] = owner
        self.events = events = ctx.events
        self.user = ctx.user("iso")
        self.event_ids: dict[str, str | None] = {}
        if events is not None:
            for sid, owner in self.sessions.items():
                event = ctx.event(self.user, f"event of {owner}", session_id=sid,
                                  owner_subject=owner)
                try:
                    ctx.call("append", lambda: events.append(event))
                except Exception:  # noqa: BLE001 - a store may take events only in turns
                    ctx.call("commit_turn with an event", lambda: ctx.commit_turn(
                        sid, b"turn", expected_version=1, owner_subject=owner, events=[event]))
                self.event_ids[str(event.event_id)] = owner


def _state_probes(ctx: CaseContext, tenants: _Tenants, probe: str, label: str) -> None:
    """Every state read and delete of every row, asked with owner ``probe``: nothing of a
    row whose owner is not exactly ``probe``."""
    store = ctx.store
    for sid, owner in tenants.sessions.items():
        if not _leak(owner, probe):
            continue
        for read in ("load", "load_full", "load_owner", "current_version"):
            with ctx.subcheck(f"{read}() with owner {label}"):
                got = _ask(lambda: getattr(store, read)(sid, owner_subject=probe))
                ctx.expect(got is None or got is _REFUSED,
                           f"{read}({sid!r}) with owner {label} (the row's owner is {owner!r})",
                           "None or a refusal", repr(got))
        with ctx.subcheck(f"delete() with owner {label}"):
            got = _ask(lambda: store.delete(sid, owner_subject=probe))
            ctx.expect(got is _REFUSED or not got,
                       f"delete({sid!r}) with owner {label} (the row's owner is {owner!r})",
                       "False or a refusal", repr(got))
            still = ctx.call("load_full", lambda: store.load_full(sid))
            ctx.expect(still is not None, f"row {sid!r} after delete() with owner {label}",
                       "still stored", "deleted")
    if offers(store.raw, Capability.SESSIONS):
        with ctx.subcheck(f"iter_sessions() with owner {label}"):
            pattern = f"{ctx.prefix}{ctx.case_slug}-*"
            got = _ask(lambda: list(store.raw.iter_sessions(
                **_owner_kw(store.raw.iter_sessions, probe), match=pattern)))
            if got is not _REFUSED:
                leaked = sorted(s.session_id for s in got
                                if _leak(s.owner_subject, probe))
                ctx.expect(not leaked, f"iter_sessions() with owner {label}",
                           "no session of another owner", f"listed {leaked}")


def _owner_kw(method: Any, probe: str) -> dict[str, Any]:
    from backends.conformance.drive import owner_kwargs

    return owner_kwargs(method, probe, read=True)


def _event_owner_probes(ctx: CaseContext, tenants: _Tenants, probe: str, label: str) -> None:
    events = tenants.events
    if events is None:
        return
    with ctx.subcheck(f"list_events() with owner {label}"):
        got = _ask(lambda: events.list_events(tenants.user, owner_subject=probe))
        if got is not _REFUSED:
            leaked = sorted(e.content for e in got if _leak(e.owner_subject, probe))
            ctx.expect(not leaked, f"list_events() with owner {label}",
                       "no event of another owner", f"listed {leaked}")
    for event_id, owner in tenants.event_ids.items():
        if not _leak(owner, probe):
            continue
        with ctx.subcheck(f"get_event() with owner {label}"):
            got = _ask(lambda: events.get_event(event_id, owner_subject=probe))
            ctx.expect(got is None or got is _REFUSED,
                       f"get_event() of an event of {owner!r} with owner {label}",
                       "None or a refusal", repr(got))


def _user_probes(ctx: CaseContext, tenants: _Tenants, user: str) -> None:
    """Event listings and counts for user ``user``: only events of exactly that user."""
    events = tenants.events
    if events is None:
        return
    label = repr(user)
    with ctx.subcheck(f"list_events({label})"):
        got = _ask(lambda: events.list_events(user))
        if got is not _REFUSED:
            leaked = sorted({e.user_id for e in got if e.user_id != user})
            ctx.expect(not leaked, f"list_events() for user id {label}",
                       "no event of another user (never everything)",
                       f"{len(got)} event(s) of users {leaked[:3]}")
    count = getattr(events.raw, "count_for_user", None)
    if events.engine and callable(count):
        got = _ask(lambda: count(user))
        ctx.expect(got is _REFUSED or got == 0, f"count_for_user({label})",
                   "0 (no event has that user id) or a refusal", repr(got))


def _empty_owner_probes(ctx: CaseContext, tenants: _Tenants) -> None:
    _state_probes(ctx, tenants, "", "''")
    _event_owner_probes(ctx, tenants, "", "''")


@case("isolation")
def empty_values(ctx: CaseContext) -> None:
    """Owner "" and user ids "" and " " find nothing of anyone (never "everything")."""
    tenants = _Tenants(ctx)
    _empty_owner_probes(ctx, tenants)
    for user in ("", " "):
        _user_probes(ctx, tenants, user)


@case("isolation")
def owner_variants(ctx: CaseContext) -> None:
    """Padded, case-folded, NFD-for-NFC and prefix owners find nothing of the real owner."""
    tenants = _Tenants(ctx)
    nfd = unicodedata.normalize("NFD", tenants.cafe)
    assert nfd != tenants.cafe
    probes = [
        (" " + tenants.acme, "' acme' (padded)"),
        (tenants.acme + " ", "'acme ' (padded)"),
        (tenants.acme.upper(), "'ACME' (case-folded)"),
        (tenants.cafe.upper(), "'CAFÉ MÜLLER' (case-folded)"),
        (nfd, "the NFD form of an NFC name"),
        (tenants.acme[:-1], "a prefix of another owner"),
        (tenants.acme + "-", "another owner's name cut short"),
    ]
    for probe, label in probes:
        _state_probes(ctx, tenants, probe, label)
        _event_owner_probes(ctx, tenants, probe, label)
    user_variants = [(" " + tenants.user, "padded"), (tenants.user.upper(), "case-folded"),
                     (tenants.user[:-1], "a prefix")]
    for user, _label in user_variants:
        _user_probes(ctx, tenants, user)


@case("isolation")
def retrieval_owner_variants(ctx: CaseContext) -> None:
    """Server-side retrieval asked with owner "", padded, case-folded, NFD and prefix
    owners returns none of the real owner's items."""
    import time

    from backends.conformance.model import NotApplicable
    from backends.contract import RetrievalContext, server_retriever_of
    from backends.errors import UnsupportedOperation

    retriever = server_retriever_of(ctx.adapter)
    if retriever is None:
        raise NotApplicable("the adapter offers no server-side retriever: retrieval runs "
                            "in-process, in the engine, which applies the owner itself")
    if not (offers(ctx.adapter, Capability.ITEM_MIRROR)
            and offers(ctx.adapter, Capability.PURGE_ITEMS)):
        raise NotApplicable("the adapter cannot seed items (sync_items) and remove them "
                            "(purge_items), so nothing can be searched for")
    from backends.conformance.cases.retrieval import _configured_dimensions, _unit

    dims = ctx.options.retrieval_dimensions or _configured_dimensions(ctx.adapter) or 8
    owner = ctx.owner(unicodedata.normalize("NFC", "acme caf\u00e9"))
    sid = ctx.item_session("iso")
    query = _unit(dims, 0)
    items = [ctx.item(f"iso-{n}", f"isolated content {n}", _unit(dims, 0, 0.1 * n),
                      unit={"text": f"isolated content {n}"}) for n in range(3)]
    ctx.call("sync_items", lambda: ctx.adapter.sync_items(sid, items, owner_subject=owner))

    def search(probe: Any) -> Any:
        rc = RetrievalContext(session_id=sid, query_embedding=query,
                              query_text="isolated content", top_k=3, owner_subject=probe)
        return retriever.search(rc)

    deadline = time.monotonic() + ctx.options.retrieval_wait
    try:
        found = search(owner)
        while len(found) < len(items) and time.monotonic() < deadline:
            time.sleep(0.5)
            found = search(owner)
    except UnsupportedOperation as exc:
        raise NotApplicable(f"the deployment refuses server-side search: {exc}") from None
    ctx.expect_equal(len(found), len(items), "items found by their own owner (the control)")
    probes = [("", "''"), (" " + owner, "padded"), (owner.upper(), "case-folded"),
              (unicodedata.normalize("NFD", owner), "the NFD form of an NFC name"),
              (owner[:-1], "a prefix of the owner")]
    for probe, label in probes:
        got = _ask(lambda: search(probe))
        leaked = [] if got is _REFUSED else [u.item_id for u in got]
        ctx.expect(not leaked, f"search() with owner {label}", "none of the owner's items",
                   f"returned {leaked}")
