"""The event log: per-user gap-free sequences, strict retention, tenant isolation and
record fidelity. Every user id is the run's own, so listing and deleting by user id
touches nothing else."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from backends.conformance.catalogue import applies, case
from backends.conformance.context import CaseContext
from backends.conformance.drive import ENGINE_EVENT_CALLS
from backends.conformance.model import NotApplicable
from backends.contract import as_utc


@applies("events")
def _has_event_store(adapter) -> str | None:
    if adapter.event_store() is None:
        return "event_store() is None: this backend keeps no event log"
    return None


def _listed(ctx: CaseContext, user: str, **kwargs) -> list:
    return ctx.call(f"list_events({user!r}, {kwargs})",
                    lambda: ctx.require_events().list_events(user, **kwargs))


@case("events")
def sequence_gap_free(ctx: CaseContext) -> None:
    """A user's events get sequences 1, 2, 3 ... in order, with no gap after refused turns."""
    events = ctx.require_events()
    if not events.assigns_sequences:  # declared: nothing to try
        ctx.require_sequences([], "declared")
    sid, user = ctx.session(), ctx.user()
    written: list[str] = []

    def turn(expected, contents):
        batch = [ctx.event(user, c, session_id=sid) for c in contents]
        ctx.call(f"commit_turn with {len(batch)} events", lambda: ctx.commit_turn(
            sid, f"v{len(written)}".encode(), expected_version=expected, events=batch))
        written.extend(str(e.event_id) for e in batch)

    turn(None, ["one", "two"])
    ctx.require_sequences(_listed(ctx, user), "the first turn's two events")
    ctx.expect_conflict("commit_turn with an event on a stale version",
                        lambda: ctx.commit_turn(sid, b"stale", expected_version=7,
                                                events=[ctx.event(user, "stale")]))
    ctx.expect_conflict("inserting commit_turn with an event over an existing session",
                        lambda: ctx.commit_turn(sid, b"again", expected_version=None,
                                                events=[ctx.event(user, "again")]))
    turn(1, ["three"])
    appended = ctx.call("append", lambda: events.append(ctx.event(user, "four")))
    written.append(str(appended.event_id))
    ctx.expect_equal(appended.sequence, 4, "sequence returned by append after three events")
    listed = _listed(ctx, user)
    ctx.expect_equal([str(e.event_id) for e in listed], written, "event ids in listed order")
    ctx.expect_equal([e.sequence for e in listed], [1, 2, 3, 4],
                     "sequences after two turns, two refused turns and an append")
    ctx.expect_equal([e.content for e in listed], ["one", "two", "three", "four"],
                     "contents in listed order")
    with ctx.subcheck("list_events(after_sequence=2)"):
        after = _listed(ctx, user, after_sequence=2)
        ctx.expect_equal([e.sequence for e in after], [3, 4], "list_events(after_sequence=2)")
    with ctx.subcheck("list_events(limit=2)"):
        limited = _listed(ctx, user, limit=2)
        ctx.expect_equal([e.sequence for e in limited], [1, 2], "list_events(limit=2)")


@case("events")
def delete_older_than_is_strict(ctx: CaseContext) -> None:
    """delete_older_than removes only events strictly older than the cutoff, of that user."""
    events = ctx.require_events()
    user, bystander = ctx.user("a"), ctx.user("b")
    base = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=3)
    stamps = [base, base + timedelta(hours=1), base + timedelta(hours=2)]
    for who in (user, bystander):
        for n, stamp in enumerate(stamps):
            ctx.call("append", lambda: events.append(ctx.event(who, f"e{n}", created_at=stamp)))
    deleted = ctx.call("delete_older_than(the second timestamp)",
                       lambda: events.delete_older_than(stamps[1], user_id=user))
    ctx.expect_equal(deleted, 1, "count deleted by a cutoff equal to the second event's time")
    ctx.expect_log([e.content for e in _listed(ctx, user)], ["e1", "e2"],
                   "events left after the cutoff (the one at the cutoff stays)")
    ctx.expect_log([e.content for e in _listed(ctx, bystander)], ["e0", "e1", "e2"],
                   "another user's events after a delete scoped to the first user")


@case("events")
def tenants_isolated(ctx: CaseContext) -> None:
    """Two tenants with identical content and embeddings see only their own events."""
    events = ctx.require_events()
    user_a, user_b, user_anon = ctx.user("a"), ctx.user("b"), ctx.user("anon")
    owner_a, owner_b = ctx.owner("tenant-a"), ctx.owner("tenant-b")
    sid_a, sid_b = ctx.session("a"), ctx.session("b")
    stamp = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=5)
    same: dict[str, Any] = {"content": "identical content", "embedding": (0.25, 0.5, -1.0),
            "meta": {"k": "v"}, "created_at": stamp}
    ctx.call("insert a", lambda: ctx.commit_turn(
        sid_a, b"a", expected_version=None, owner_subject=owner_a,
        events=[ctx.event(user_a, session_id=sid_a, owner_subject=owner_a, **same)]))
    ctx.call("insert b", lambda: ctx.commit_turn(
        sid_b, b"b", expected_version=None, owner_subject=owner_b,
        events=[ctx.event(user_b, session_id=sid_b, owner_subject=owner_b, **same)]))
    anon_event = ctx.call("append unowned", lambda: events.append(
        ctx.event(user_anon, **same)))

    def ids(user, **kw):
        return [(e.user_id, e.owner_subject) for e in _listed(ctx, user, **kw)]

    ctx.expect_equal(ids(user_a), [(user_a, owner_a)], "tenant a's events, unscoped")
    for user, kwargs, expected, label in (
            (user_a, {"owner_subject": owner_a}, [(user_a, owner_a)],
             "tenant a's events filtered by tenant a"),
            (user_a, {"owner_subject": owner_b}, [], "tenant a's events filtered by tenant b"),
            (user_a, {"owner_subject": None}, [], "tenant a's events filtered to unowned ones"),
            (user_anon, {"owner_subject": None}, [(user_anon, "")],
             "an unowned event filtered to unowned ones"),
            (user_anon, {"owner_subject": owner_a}, [],
             "an unowned event filtered by tenant a")):
        with ctx.subcheck(label):
            ctx.expect_equal(ids(user, **kwargs), expected, label)
    ctx.expect_equal(ids(user_anon), [(user_anon, "")],
                     "an unowned event, unscoped (owner '' = none)")
    ctx.expect_equal(ids(user_b), [(user_b, owner_b)], "tenant b's events, unscoped")
    listed_a, listed_b = _listed(ctx, user_a), _listed(ctx, user_b)
    if ctx.sequenced(listed_a + listed_b):  # each tenant's user has its own sequence
        ctx.expect_equal(listed_a[0].sequence, 1, "tenant a's own sequence")
        ctx.expect_equal(listed_b[0].sequence, 1, "tenant b's own sequence")
    ctx.call("delete a", lambda: events.delete_older_than(
        stamp + timedelta(seconds=1), user_id=user_a))
    ctx.expect_equal(ids(user_a), [], "tenant a's events after deleting them")
    ctx.expect_equal(ids(user_b), [(user_b, owner_b)],
                     "tenant b's events after tenant a's identical events were deleted")
    got = ctx.call("get_event", lambda: events.get_event(anon_event.event_id))
    ctx.expect(got is not None and got.user_id == user_anon, "get_event of the unowned event",
               user_anon, None if got is None else got.user_id)
    with ctx.subcheck("get_event of tenant b's event filtered by tenant a"):
        event_b = _listed(ctx, user_b)[0]
        ctx.expect_equal(ctx.call("get_event", lambda: events.get_event(
            event_b.event_id, owner_subject=owner_a)), None,
            "get_event of tenant b's event filtered by tenant a")


@case("events")
def record_fidelity(ctx: CaseContext) -> None:
    """Every field of an event round-trips through list_events and get_event."""
    events = ctx.require_events()
    sid, user = ctx.session(), ctx.user()
    owner = ctx.owner("tenant-a/agent-1")
    stamp = datetime(2024, 2, 29, 23, 59, 58, tzinfo=timezone.utc)
    original = ctx.event(
        user, "ünïcode ✓ \"quoted\" \n newline", session_id=sid, owner_subject=owner,
        created_at=stamp, embedding=(0.5, -0.25, 1.0, 0.0, 2.0),
        meta={"nested": {"list": [1, 2.5, "x", None, True]}, "empty": {}},
        source_event_id=uuid.uuid4())
    ctx.call("commit_turn", lambda: ctx.commit_turn(
        sid, b"t", expected_version=None, owner_subject=owner, events=[original]))
    listed = _listed(ctx, user)
    sequenced = ctx.sequenced(listed)
    if not sequenced:
        ctx.notes.append("sequence: not compared (the store assigns none: it reads back 0)")
    expected = replace(original, sequence=1 if sequenced else 0)
    ctx.expect_equal(len(listed), 1, "number of events listed")
    for label, got in (("list_events", listed[0]),
                       ("get_event", ctx.call("get_event",
                                              lambda: events.get_event(original.event_id)))):
        ctx.expect(got is not None, label, "the event", "None")
        for field in ("event_id", "source_event_id"):
            value = getattr(got, field)
            ctx.expect_equal(None if value is None else str(value),
                             None if getattr(expected, field) is None
                             else str(getattr(expected, field)), f"{label} {field}")
        for field in ("user_id", "content", "sequence", "owner_subject", "session_id"):
            ctx.expect_equal(getattr(got, field), getattr(expected, field), f"{label} {field}")
        # a naive timestamp is UTC wall time (the engine's SQL layout reads them back so):
        # astimezone() would read it in the machine's local zone
        ctx.expect_equal(as_utc(got.created_at), stamp, f"{label} created_at")
        ctx.expect_equal(tuple(float(x) for x in (got.embedding or ())),
                         tuple(expected.embedding), f"{label} embedding")
        ctx.expect_equal(dict(got.meta), dict(expected.meta), f"{label} meta")
    ctx.expect_equal(ctx.call("get_event", lambda: events.get_event(str(uuid.uuid4()))),
                     None, "get_event of an unknown id")


@case("events")
def limit_after_owner_filter(ctx: CaseContext) -> None:
    """list_events applies the owner filter before the limit (never a filtered top-n)."""
    events = ctx.require_events()
    user = ctx.user()
    owner_a, owner_b = ctx.owner("tenant-a"), ctx.owner("tenant-b")
    pattern = [owner_b, owner_b, owner_a, None, owner_b, owner_a, owner_a]
    for n, owner in enumerate(pattern):
        ctx.call("append", lambda: events.append(ctx.event(user, f"e{n}", owner_subject=owner)))
    expected_a = [f"e{n}" for n, o in enumerate(pattern) if o == owner_a]
    # "the first n" is the first n in sequence order, asked only of a store seen to
    # assign sequences; of any other, any n of the owner's events
    in_order = ctx.sequenced(_listed(ctx, user))
    for kwargs, expected, label in (
            ({"owner_subject": owner_a, "limit": 2}, expected_a[:2],
             "tenant a's first two events among tenant b's"),
            ({"owner_subject": owner_a, "limit": 5}, expected_a,
             "a limit above tenant a's count"),
            ({"owner_subject": None, "limit": 1}, ["e3"], "the first unowned event"),
            ({"owner_subject": owner_b, "limit": 0}, [], "limit 0")):
        got = [e.content for e in _listed(ctx, user, **kwargs)]
        if in_order:
            ctx.expect_equal(got, expected, f"list_events: {label}")
            continue
        # no sequence, so no "first": any of the owner's events, as many as the limit allows
        wanted = {f"e{n}" for n, o in enumerate(pattern) if o == kwargs["owner_subject"]}
        ctx.expect(len(got) == len(expected) and set(got) <= wanted,
                   f"list_events: {label} (the store keeps no sequence: any of them)",
                   f"{len(expected)} of {sorted(wanted)}", got)


@case("events")
def engine_surface(ctx: CaseContext) -> None:
    """The engine's event calls: get, list_by_user, count_for_user, query_by_user, delete,
    delete_older_than(user_id, cutoff), delete_by_user (which resets the sequence)."""
    raw = ctx.require_events().raw
    missing = [m for m in ENGINE_EVENT_CALLS if not callable(getattr(raw, m, None))]
    if missing:
        raise NotApplicable("the event store does not offer the engine's surface (no "
                            + ", ".join(missing) + ")")
    user, bystander = ctx.user("a"), ctx.user("b")
    base = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=3)
    vectors = [(1.0, 0.0), (0.0, 1.0), (0.7, 0.7)]
    made = []
    for n, vector in enumerate(vectors):
        event = ctx.event(user, f"e{n}", created_at=base + timedelta(hours=n),
                          embedding=vector)
        made.append(ctx.call("append", lambda: raw.append(event)))
    ctx.call("append", lambda: raw.append(ctx.event(bystander, "other", created_at=base)))
    ids = [str(e.event_id) for e in made]
    got = ctx.call("get(UUID)", lambda: raw.get(uuid.UUID(ids[1])))
    ctx.expect(got is not None and str(got.event_id) == ids[1], "get(event_id) as a UUID",
               ids[1], None if got is None else str(got.event_id))
    ctx.expect_equal(ctx.call("get(unknown)", lambda: raw.get(uuid.uuid4())), None,
                     "get of an unknown UUID")
    by_user = ctx.call("list_by_user", lambda: raw.list_by_user(user))
    sequenced = ctx.sequenced(list(made) + list(by_user))
    ctx.expect_log([str(e.event_id) for e in by_user], ids,
                   "list_by_user in sequence order" if sequenced
                   else "list_by_user (the store assigns no sequence)", in_order=sequenced)
    ctx.expect_equal(ctx.call("count_for_user", lambda: raw.count_for_user(user)), 3,
                     "count_for_user")
    newest = ctx.call("query_by_user without a query", lambda: raw.query_by_user(
        user, query_embedding=None, limit=2))
    ctx.expect_equal([e.content for e in newest], ["e2", "e1"],
                     "query_by_user without a query: newest first, limited")
    nearest = ctx.call("query_by_user with a query", lambda: raw.query_by_user(
        user, query_embedding=[1.0, 0.1], limit=3))
    ctx.expect_equal([e.content for e in nearest], ["e0", "e2", "e1"],
                     "query_by_user with a query: cosine descending")
    ctx.expect_equal(ctx.call("delete", lambda: raw.delete(uuid.UUID(ids[1]))), True,
                     "delete(event_id) of an existing event")
    ctx.expect_equal(ctx.call("delete again", lambda: raw.delete(uuid.UUID(ids[1]))), False,
                     "delete(event_id) of a deleted event")
    deleted = ctx.call("delete_older_than(user_id, cutoff)",
                       lambda: raw.delete_older_than(user, base + timedelta(hours=2)))
    ctx.expect_equal(deleted, 1, "delete_older_than(user_id, cutoff equal to the last "
                                 "event's time): strictly older only")
    ctx.expect_equal(ctx.call("delete_by_user", lambda: raw.delete_by_user(user)), 1,
                     "delete_by_user count")
    ctx.expect_equal(ctx.call("count_for_user", lambda: raw.count_for_user(user)), 0,
                     "count_for_user after delete_by_user")
    ctx.expect_equal(ctx.call("count_for_user", lambda: raw.count_for_user(bystander)), 1,
                     "another user's events after delete_by_user")
    if sequenced:
        again = ctx.call("append after delete_by_user",
                         lambda: raw.append(ctx.event(user, "fresh start")))
        ctx.expect_equal(again.sequence, 1, "sequence after delete_by_user (counter reset)")
