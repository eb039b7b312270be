"""commit_turn: the state and its events land together or not at all."""

from __future__ import annotations

from dataclasses import replace

from backends.conformance.catalogue import case
from backends.conformance.context import CaseContext
from backends.conformance.model import NotApplicable
from backends.errors import UnsupportedOperation


def _state(ctx: CaseContext, sid: str):
    row = ctx.call(f"load_full({sid!r})", lambda: ctx.store.load_full(sid))
    if row is None:
        return None
    return (bytes(row.blob), row.version, row.owner_subject, row.pending_message)


def _event_ids(ctx: CaseContext, events, user_id: str) -> list[str]:
    listed = ctx.call(f"list_events({user_id!r})", lambda: events.list_events(user_id))
    return [e.event_id for e in listed]


@case("commit_turn")
def insert_and_update(ctx: CaseContext) -> None:
    """commit_turn follows save's compare-and-set: insert never overwrites, +1 per turn."""
    sid = ctx.session()
    version = ctx.call("commit_turn insert", lambda: ctx.adapter.commit_turn(
        sid, b"t1", expected_version=None, pending_message="pending"))
    ctx.expect_int_version(version, 1, "commit_turn insert")
    ctx.expect_conflict("commit_turn insert over an existing session",
                        lambda: ctx.adapter.commit_turn(sid, b"again", expected_version=None))
    version = ctx.call("commit_turn update", lambda: ctx.adapter.commit_turn(
        sid, b"t2", expected_version=1))
    ctx.expect_int_version(version, 2, "commit_turn update")
    ctx.expect_conflict("commit_turn on a stale version",
                        lambda: ctx.adapter.commit_turn(sid, b"stale", expected_version=1))
    ctx.expect_conflict("commit_turn on a missing session",
                        lambda: ctx.adapter.commit_turn(ctx.session("missing"), b"x",
                                                        expected_version=3))
    ctx.expect_equal(_state(ctx, sid), (b"t2", 2, None, None),
                     "state after the turns (pending cleared by the second turn)")


@case("commit_turn", needs_event_turns=True)
def state_and_events_land_together(ctx: CaseContext) -> None:
    """A turn with events writes the new state and every event."""
    events = ctx.require_events()
    sid, user = ctx.session(), ctx.user()
    owner = ctx.owner("tenant-a")
    ctx.call("insert", lambda: ctx.adapter.commit_turn(sid, b"t1", expected_version=None,
                                                       owner_subject=owner))
    turn = [ctx.event(user, f"turn event {n}", session_id=sid, owner_subject=owner)
            for n in range(3)]
    try:
        version = ctx.adapter.commit_turn(sid, b"t2", expected_version=1, owner_subject=owner,
                                          events=turn)
    except UnsupportedOperation as refusal:
        # A deployment may refuse turns with events (no transactions): then it must have
        # written nothing of the turn.
        ctx.expect_equal(_state(ctx, sid), (b"t1", 1, owner, None),
                         "state after the deployment refused the turn")
        ctx.expect_equal(_event_ids(ctx, events, user), [],
                         "events after the deployment refused the turn")
        raise NotApplicable(f"the deployment refuses turns with events: {refusal}") from None
    except Exception as exc:  # noqa: BLE001
        ctx.fail("commit_turn with three events", "success", f"raised {type(exc).__name__}: {exc}")
    ctx.expect_int_version(version, 2, "commit_turn with events")
    ctx.expect_equal(_state(ctx, sid), (b"t2", 2, owner, None), "state after the turn")
    ctx.expect_equal(_event_ids(ctx, events, user), [e.event_id for e in turn],
                     "events listed after the turn")


@case("commit_turn", needs_event_turns=True)
def conflicting_turn_writes_no_event(ctx: CaseContext) -> None:
    """A turn that loses compare-and-set (stale, insert-over, missing) writes no event."""
    events = ctx.require_events()
    sid, user = ctx.session(), ctx.user()
    ctx.call("insert", lambda: ctx.adapter.commit_turn(sid, b"t1", expected_version=None))
    ctx.call("update", lambda: ctx.adapter.commit_turn(sid, b"t2", expected_version=1))
    attempts = [
        ("a stale version", sid, 1),
        ("an insert over an existing session", sid, None),
        ("a missing session", ctx.session("missing"), 4),
    ]
    for label, target, expected in attempts:
        ctx.expect_conflict(f"commit_turn with events on {label}",
                            lambda: ctx.adapter.commit_turn(
                                target, b"lost", expected_version=expected,
                                events=[ctx.event(user, "must not land", session_id=target)]))
        ctx.expect_equal(_event_ids(ctx, events, user), [],
                         f"events of the user after a turn on {label} was refused")
    ctx.expect_equal(_state(ctx, sid), (b"t2", 2, None, None), "state after the refused turns")


def _malformed_events(ctx: CaseContext, user: str, sid: str) -> list:
    good = ctx.event(user, "well-formed, first in the turn", session_id=sid)
    bad = replace(ctx.event(user, "malformed", session_id=sid), embedding=(1.0, float("nan")))
    return [good, bad]


@case("commit_turn")
def malformed_event_changes_nothing(ctx: CaseContext) -> None:
    """A turn whose second event is malformed is refused and writes neither state nor events."""
    events = ctx.adapter.event_store()
    sid, user = ctx.session(), ctx.user()
    ctx.call("insert", lambda: ctx.adapter.commit_turn(sid, b"t1", expected_version=None,
                                                       pending_message="p1"))
    before = _state(ctx, sid)
    ctx.expect_refusal("commit_turn whose second event has a NaN embedding",
                       lambda: ctx.adapter.commit_turn(sid, b"half-written", expected_version=1,
                                                       events=_malformed_events(ctx, user, sid)))
    ctx.expect_equal(_state(ctx, sid), before, "state after the refused turn")
    fresh = ctx.session("fresh")
    ctx.expect_refusal("inserting commit_turn with a malformed event",
                       lambda: ctx.adapter.commit_turn(fresh, b"half-written",
                                                       expected_version=None,
                                                       events=_malformed_events(ctx, user, fresh)))
    ctx.expect_equal(_state(ctx, fresh), None, "session of the refused inserting turn")
    if events is not None:
        ctx.expect_equal(_event_ids(ctx, events, user), [],
                         "events of the user after the refused turns")


@case("commit_turn")
def refuses_events_without_event_store(ctx: CaseContext) -> None:
    """A backend with no event store raises on a turn with events instead of dropping them."""
    if ctx.adapter.event_store() is not None:
        raise NotApplicable("the adapter has an event store")
    sid, user = ctx.session(), ctx.user()
    ctx.call("insert", lambda: ctx.adapter.commit_turn(sid, b"t1", expected_version=None))
    ctx.expect_refusal("commit_turn with an event on a backend with no event store",
                       lambda: ctx.adapter.commit_turn(
                           sid, b"t2", expected_version=1,
                           events=[ctx.event(user, "audit row", session_id=sid)]),
                       conflict_ok=True)
    ctx.expect_equal(_state(ctx, sid), (b"t1", 1, None, None), "state after the refused turn")


@case("commit_turn")
def owner_check(ctx: CaseContext) -> None:
    """commit_turn naming an owner cannot take over another owner's session."""
    events = ctx.adapter.event_store()
    sid, user = ctx.session(), ctx.user()
    owner, intruder = ctx.owner("tenant-a"), ctx.owner("tenant-b")
    ctx.call("insert", lambda: ctx.adapter.commit_turn(sid, b"mine", expected_version=None,
                                                       owner_subject=owner))
    ctx.expect_conflict("commit_turn naming another owner on the right version",
                        lambda: ctx.adapter.commit_turn(sid, b"taken", expected_version=1,
                                                        owner_subject=intruder))
    ctx.expect_equal(_state(ctx, sid), (b"mine", 1, owner, None),
                     "state after the refused takeover")
    if events is not None:
        turn = [ctx.event(user, "intruder's turn", session_id=sid, owner_subject=intruder)]
        try:
            ctx.adapter.commit_turn(sid, b"taken", expected_version=1, owner_subject=intruder,
                                    events=turn)
        except Exception as exc:  # noqa: BLE001
            from backends.errors import UnsupportedOperation, is_state_version_conflict

            if not (is_state_version_conflict(exc) or isinstance(exc, UnsupportedOperation)):
                ctx.fail("commit_turn with events naming another owner", "StateVersionConflict",
                         f"raised {type(exc).__name__}: {exc}")
        else:
            ctx.fail("commit_turn with events naming another owner", "StateVersionConflict",
                     "it returned")
        ctx.expect_equal(_state(ctx, sid), (b"mine", 1, owner, None),
                         "state after the refused takeover with events")
        ctx.expect_equal(_event_ids(ctx, events, user), [],
                         "events after the refused takeover")
    free = ctx.session("free")
    ctx.call("insert unowned", lambda: ctx.adapter.commit_turn(free, b"free",
                                                              expected_version=None))
    version = ctx.call("commit_turn adopting an unowned session", lambda: ctx.adapter.commit_turn(
        free, b"adopted", expected_version=1, owner_subject=owner))
    ctx.expect_int_version(version, 2, "commit_turn adopting an unowned session")
    ctx.expect_equal(_state(ctx, free), (b"adopted", 2, owner, None), "state after adoption")
