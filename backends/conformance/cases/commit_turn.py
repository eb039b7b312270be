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
    """The user's event ids, sorted: no commit_turn case checks the listing order."""
    listed = ctx.call(f"list_events({user_id!r})", lambda: events.list_events(user_id))
    return sorted(str(e.event_id) for e in listed)


@case("commit_turn")
def insert_and_update(ctx: CaseContext) -> None:
    """commit_turn follows save's compare-and-set: insert never overwrites, +1 per turn."""
    sid = ctx.session()
    version = ctx.call("commit_turn insert", lambda: ctx.commit_turn(
        sid, b"t1", expected_version=None, pending_message="pending"))
    ctx.expect_int_version(version, 1, "commit_turn insert")
    ctx.expect_conflict("commit_turn insert over an existing session",
                        lambda: ctx.commit_turn(sid, b"again", expected_version=None))
    version = ctx.call("commit_turn update", lambda: ctx.commit_turn(
        sid, b"t2", expected_version=1))
    ctx.expect_int_version(version, 2, "commit_turn update")
    ctx.expect_conflict("commit_turn on a stale version",
                        lambda: ctx.commit_turn(sid, b"stale", expected_version=1))
    ctx.expect_conflict("commit_turn on a missing session",
                        lambda: ctx.commit_turn(ctx.session("missing"), b"x",
                                                        expected_version=3))
    ctx.expect_equal(_state(ctx, sid), (b"t2", 2, None, None),
                     "state after the turns (pending cleared by the second turn)")


@case("commit_turn", needs_event_turns=True)
def state_and_events_land_together(ctx: CaseContext) -> None:
    """A turn with events writes the new state and every event."""
    events = ctx.require_events()
    sid, user = ctx.session(), ctx.user()
    owner = ctx.owner("tenant-a")
    ctx.call("insert", lambda: ctx.commit_turn(sid, b"t1", expected_version=None,
                                                       owner_subject=owner))
    turn = [ctx.event(user, f"turn event {n}", session_id=sid, owner_subject=owner)
            for n in range(3)]
    try:
        version = ctx.commit_turn(sid, b"t2", expected_version=1, owner_subject=owner,
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
    ctx.expect_log(_event_ids(ctx, events, user), [str(e.event_id) for e in turn],
                   "events listed after the turn")


@case("commit_turn", needs_event_turns=True)
def conflicting_turn_writes_no_event(ctx: CaseContext) -> None:
    """A turn that loses compare-and-set (stale, insert-over, missing) writes no event."""
    events = ctx.require_events()
    sid, user = ctx.session(), ctx.user()
    ctx.call("insert", lambda: ctx.commit_turn(sid, b"t1", expected_version=None))
    ctx.call("update", lambda: ctx.commit_turn(sid, b"t2", expected_version=1))
    attempts = [
        ("a stale version", sid, 1),
        ("an insert over an existing session", sid, None),
        ("a missing session", ctx.session("missing"), 4),
    ]
    for label, target, expected in attempts:
        ctx.expect_conflict(f"commit_turn with events on {label}",
                            lambda: ctx.commit_turn(
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
    """A turn whose second event has a NaN embedding writes nothing if refused (refusing
    it is advised: NaN breaks strict JSON readers; the published contract is silent)."""
    events = ctx.events
    sid, user = ctx.session(), ctx.user()
    ctx.call("insert", lambda: ctx.commit_turn(sid, b"t1", expected_version=None,
                                               pending_message="p1"))
    before = _state(ctx, sid)
    accepted: list[str] = []
    outcome = _attempt(lambda: ctx.commit_turn(sid, b"half-written", expected_version=1,
                                               events=_malformed_events(ctx, user, sid)))
    if outcome is None:
        accepted.append("an updating turn")
    else:
        ctx.expect_equal(_state(ctx, sid), before, "state after the refused turn")
    fresh = ctx.session("fresh")
    outcome = _attempt(lambda: ctx.commit_turn(fresh, b"half-written", expected_version=None,
                                               events=_malformed_events(ctx, user, fresh)))
    if outcome is None:
        accepted.append("an inserting turn")
    else:
        ctx.expect_equal(_state(ctx, fresh), None, "session of the refused inserting turn")
    if events is not None and not accepted:
        ctx.expect_equal(_event_ids(ctx, events, user), [],
                         "events of the user after the refused turns")
    if accepted:
        ctx.advise("a turn carrying an event with a NaN embedding",
                   "a refusal (NaN cannot be stored as strict JSON)",
                   f"accepted ({', '.join(accepted)})")


def _attempt(fn) -> BaseException | None:
    """The exception a step raised, or None when it returned."""
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - any refusal will do here
        return exc
    return None


@case("commit_turn")
def refuses_events_without_event_store(ctx: CaseContext) -> None:
    """A backend with no event store raises on a turn with events instead of dropping them."""
    if ctx.adapter.event_store() is not None:
        raise NotApplicable("the adapter has an event store")
    sid, user = ctx.session(), ctx.user()
    ctx.call("insert", lambda: ctx.commit_turn(sid, b"t1", expected_version=None))
    ctx.expect_refusal("commit_turn with an event on a backend with no event store",
                       lambda: ctx.commit_turn(
                           sid, b"t2", expected_version=1,
                           events=[ctx.event(user, "audit row", session_id=sid)]),
                       conflict_ok=True)
    ctx.expect_equal(_state(ctx, sid), (b"t1", 1, None, None), "state after the refused turn")


@case("commit_turn")
def owner_check(ctx: CaseContext) -> None:
    """commit_turn naming an owner cannot take over another owner's session."""
    events = ctx.events
    sid, user = ctx.session(), ctx.user()
    owner, intruder = ctx.owner("tenant-a"), ctx.owner("tenant-b")
    ctx.call("insert", lambda: ctx.commit_turn(sid, b"mine", expected_version=None,
                                                       owner_subject=owner))
    ctx.expect_conflict("commit_turn naming another owner on the right version",
                        lambda: ctx.commit_turn(sid, b"taken", expected_version=1,
                                                        owner_subject=intruder))
    ctx.expect_equal(_state(ctx, sid), (b"mine", 1, owner, None),
                     "state after the refused takeover")
    if events is not None:
        turn = [ctx.event(user, "intruder's turn", session_id=sid, owner_subject=intruder)]
        try:
            ctx.commit_turn(sid, b"taken", expected_version=1, owner_subject=intruder,
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
    ctx.call("insert unowned", lambda: ctx.commit_turn(free, b"free",
                                                              expected_version=None))
    version = ctx.call("commit_turn adopting an unowned session", lambda: ctx.commit_turn(
        free, b"adopted", expected_version=1, owner_subject=owner))
    ctx.expect_int_version(version, 2, "commit_turn adopting an unowned session")
    ctx.expect_equal(_state(ctx, free), (b"adopted", 2, owner, None), "state after adoption")


#: The engine's Redis layout (ENGINE-WIRE §3).
_STATE_KEY = "semvec:state:{}"
_EVENT_KEY = "semvec:events:e:{}"
_SEQ_INDEX = "semvec:events:u:{}"
_TIME_INDEX = "semvec:events:t:{}"
_COUNTER = "semvec:events:seq:{}"


def _raw_redis(ctx: CaseContext):
    return ctx.raw_redis("cannot plant a key")


def _snapshot(raw, sid: str, users: list[str], event_ids: list[str]) -> dict:
    """Everything a turn could touch, for the run's own session and users only."""
    view: dict = {"state": raw.hgetall(_STATE_KEY.format(sid))}
    view["state"].pop(b"blob", None)  # compared through load_full below
    for user in users:
        for key in (_SEQ_INDEX, _TIME_INDEX):
            name = key.format(user)
            view[name] = (raw.zrange(name, 0, -1, withscores=True)
                          if raw.type(name) == b"zset" else raw.type(name))
        view[_COUNTER.format(user)] = raw.get(_COUNTER.format(user))
    for event_id in event_ids:
        view[_EVENT_KEY.format(event_id)] = raw.exists(_EVENT_KEY.format(event_id))
    return view


def _describe_change(key: str, before, after) -> str:
    if key == "state":
        return (f"state version {before.get(b'version')!r} -> {after.get(b'version')!r}"
                if isinstance(after, dict) else "state changed")
    if isinstance(before, int) and isinstance(after, int):
        return f"{key} {'created' if after else 'removed'}"
    if isinstance(before, list) and isinstance(after, list):
        return f"{key} {len(before)} -> {len(after)} entries"
    return f"{key} {before!r} -> {after!r}"


@case("commit_turn", needs_event_turns=True)
def atomic_on_server_error(ctx: CaseContext) -> None:
    """Engine's Redis layout: a turn the server fails mid-way (a wrong-typed index key of
    the run's own user) lands nothing: no state advance, no event, no counter."""
    events = ctx.require_events()
    if not ctx.options.resolved_redis_url():
        _raw_redis(ctx)  # raises NotApplicable before anything is written
    sid, user, victim = ctx.session(), ctx.user("a"), ctx.user("b")
    first = ctx.event(user, "first turn", session_id=sid)
    ctx.call("first turn", lambda: ctx.commit_turn(sid, b"t1", expected_version=None,
                                                   events=[first]))
    raw = _raw_redis(ctx)
    try:
        try:
            laid_out = (raw.hget(_STATE_KEY.format(sid), "version") == b"1"
                        and raw.exists(_EVENT_KEY.format(first.event_id)) == 1)
        except Exception as exc:  # noqa: BLE001
            raise NotApplicable(f"the run's Redis URI cannot be read: "
                                f"{type(exc).__name__}") from None
        if not laid_out:
            raise NotApplicable("the adapter's rows are not in the engine's Redis layout on "
                                "the run's Redis URI (semvec:state:..., semvec:events:e:...)")
        planted = _SEQ_INDEX.format(victim)
        marker = f"planted by conformance {ctx.prefix}".encode()
        if not raw.set(planted, marker, nx=True):
            ctx.fail("planting a wrong-typed key", f"{planted} free", "it exists")
        try:
            turn = [ctx.event(user, "lands first in the script", session_id=sid),
                    ctx.event(victim, "hits the wrong-typed key", session_id=sid)]
            ids = [str(first.event_id)] + [str(e.event_id) for e in turn]
            before = _snapshot(raw, sid, [user, victim], ids)
            listed_before = _event_ids(ctx, events, user)
            outcome = None
            try:
                outcome = ctx.commit_turn(sid, b"t2", expected_version=1, events=turn)
            except Exception:  # noqa: BLE001 - the server's error, however it is wrapped
                pass
            else:
                ctx.fail("commit_turn whose second event's index key has the wrong type",
                         "a refusal (the server cannot write that key)",
                         f"returned {outcome!r}")
            after = _snapshot(raw, sid, [user, victim], ids)
            changed = [_describe_change(key, before[key], after[key]) for key in before
                       if before[key] != after[key]]
            ctx.expect(not changed, "the turn's keys after the server failed it",
                       "nothing of the turn stored (no state advance, event, index entry "
                       "or counter)", "; ".join(changed))
            ctx.expect_equal(_state(ctx, sid), (b"t1", 1, None, None),
                             "state after the failed turn")
            ctx.expect_equal(_event_ids(ctx, events, user), listed_before,
                             "the first user's events after the failed turn")
        finally:
            if raw.type(planted) == b"string" and raw.get(planted) == marker:
                raw.delete(planted)
    finally:
        raw.close()
