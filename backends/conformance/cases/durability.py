"""Nothing is lost silently: the server itself keeps what it acknowledged (where the
backend can tell: a Redis needs AOF on and no evicting maxmemory-policy, as the engine
requires, ENGINE-WIRE §3), what a persistent adapter acknowledged survives reopening, and
a turn that fails part-way (a planted fault, a cut connection) leaves the whole turn or
nothing.

``server_is_durable`` reads the verdict of ``backends.redis.health.durability_verdict``
(the one source ``health`` and ``doctor`` use) from the adapter's ``health_details``
seam, or, for an adapter without it (the engine's own), from the run's Redis once a
session the adapter saved is seen there; elsewhere it is not applicable.

These cases need something only some adapters have, and are otherwise not applicable
(never passed): a factory and ``is_persistent = True`` to reopen; the optional fault
seam (``backends.contract.FaultSeam``) to fail a turn mid-write.

The fault seam, for plugin authors: an adapter MAY declare ``fault_points`` (a frozenset
of names from ``backends.contract.FAULT_POINTS``) and ``inject_fault(point)``, a context
manager that arms the point for the next ``commit_turn`` started inside it:

* ``turn.after_state`` -- raise ``backends.errors.InjectedFault`` after the turn's state
  write and before its events (inside the transaction or script, where a real failure
  would strike);
* ``turn.cut_connection`` -- drop the connection at that same point, so the driver
  sees a connection error (the adapter must be usable again afterwards: reconnect).

Declare only points you honour: an armed point that does not fire fails the case. The
seam is for conformance runs only; production code never arms it.
"""

from __future__ import annotations

from typing import Any

from backends.conformance.catalogue import case
from backends.conformance.context import CaseContext, describe_exception
from backends.conformance.model import NotApplicable
from backends.contract import Capability, fault_points_of, offers
from backends.errors import UnsupportedOperation


def _row(ctx: CaseContext, store, sid: str):
    row = ctx.call(f"load_full({sid!r})", lambda: store.load_full(sid))
    if row is None:
        return None
    return (bytes(row.blob), row.version, row.owner_subject, row.pending_message)


def _event_view(ctx: CaseContext, events, user: str) -> list[tuple]:
    """The user's events as (id, sequence, content), sorted: the listing order is not what
    these cases check (a store without sequences lists in its own order)."""
    listed = ctx.call(f"events of {user!r}", lambda: events.list_events(user))
    return sorted((str(e.event_id), e.sequence, e.content) for e in listed)


def _close(adapter) -> None:
    if offers(adapter, Capability.CLOSE):
        adapter.close()


@case("durability")
def survives_reopen(ctx: CaseContext) -> None:
    """A persistent adapter's state and events are all there after close and reopen."""
    if ctx.adapter.is_persistent is not True:
        raise NotApplicable("is_persistent is False: nothing is promised across a reopen")
    if ctx.factory is None:
        raise NotApplicable("no adapter factory: cannot open a second adapter")
    from backends.conformance.drive import EventsDriver, StoreDriver

    writer = ctx.call("opening a second adapter from the factory", ctx.factory)
    try:
        store = StoreDriver(writer.state_store())
        raw_events = writer.event_store()
        sid, other = ctx.session("turn"), ctx.session("saved")
        owner = ctx.owner("tenant-a/agent-1")
        user = ctx.user()
        turn = ([ctx.event(user, f"kept {n}", session_id=sid, owner_subject=owner)
                 for n in range(2)] if raw_events is not None else None)
        try:
            ctx.commit_turn(sid, b"\x00turn state\xff", expected_version=None,
                            owner_subject=owner, pending_message="pending", events=turn,
                            adapter=writer)
        except UnsupportedOperation as refusal:  # e.g. no transactions: state only
            ctx.notes.append(f"events across a reopen: not applicable (the deployment "
                             f"refuses turns with events: {refusal})")
            raw_events = turn = None
            ctx.call("commit_turn without events", lambda: ctx.commit_turn(
                sid, b"\x00turn state\xff", expected_version=None, owner_subject=owner,
                pending_message="pending", adapter=writer))
        except Exception as exc:  # noqa: BLE001
            ctx.fail("commit_turn", "success", f"raised {describe_exception(exc)}")
        ctx.call("save", lambda: store.save(other, b"saved", expected_version=None))
        ctx.call("update", lambda: store.save(other, b"saved-2", expected_version=1))
        before = {s: _row(ctx, store, s) for s in (sid, other)}
        events_before = (_event_view(ctx, EventsDriver(raw_events), user)
                         if raw_events is not None else None)
    finally:
        try:
            _close(writer)
        except Exception as exc:  # noqa: BLE001
            ctx.fail("close() of the writing adapter", "no exception",
                     f"raised {describe_exception(exc)}")
    reader = ctx.call("reopening: a third adapter from the factory", ctx.factory)
    try:
        store = StoreDriver(reader.state_store())
        for s, row in before.items():
            ctx.expect_equal(_row(ctx, store, s), row, f"session {s} after close and reopen")
        if events_before is not None:
            reopened = reader.event_store()
            ctx.expect(reopened is not None, "event_store() after reopen", "an event store",
                       "None")
            ctx.expect_equal(_event_view(ctx, EventsDriver(reopened), user), events_before,
                             "events after close and reopen")
    finally:
        _close(reader)


def _fault_point(ctx: CaseContext, point: str) -> None:
    points = fault_points_of(ctx.adapter)
    if not points:
        raise NotApplicable("the adapter offers no fault seam (fault_points, inject_fault)")
    if point not in points:
        raise NotApplicable(f"the adapter's fault seam does not offer {point!r}")


def _seed_turn(ctx: CaseContext):
    """A session at version 1 with one event, for a faulted second turn."""
    events = ctx.require_events()
    sid, user = ctx.session(), ctx.user()
    owner = ctx.owner("tenant-a")
    first = ctx.event(user, "first turn", session_id=sid, owner_subject=owner)
    ctx.call("first turn", lambda: ctx.commit_turn(sid, b"t1", expected_version=None,
                                                   owner_subject=owner, pending_message="p",
                                                   events=[first]))
    return events, sid, user, owner


@case("durability", needs_event_turns=True)
def fault_after_state(ctx: CaseContext) -> None:
    """A turn failed after its state write (fault seam) leaves nothing of itself behind."""
    _fault_point(ctx, "turn.after_state")
    events, sid, user, owner = _seed_turn(ctx)
    before, events_before = _row(ctx, ctx.store, sid), _event_view(ctx, events, user)
    turn = [ctx.event(user, f"faulted {n}", session_id=sid, owner_subject=owner)
            for n in range(2)]
    try:
        with ctx.adapter.inject_fault("turn.after_state"):
            result = ctx.commit_turn(sid, b"t2", expected_version=1, owner_subject=owner,
                                     events=turn)
    except Exception:  # noqa: BLE001 - the planted fault (or the adapter's wrapping of it)
        pass
    else:
        ctx.fail("commit_turn with turn.after_state armed", "the planted fault raised",
                 f"returned {result!r} (a declared fault point that does not fire)")
    ctx.expect_equal(_row(ctx, ctx.store, sid), before, "state after the faulted turn")
    ctx.expect_equal(_event_view(ctx, events, user), events_before,
                     "events after the faulted turn")
    for event in turn:
        ctx.expect_equal(ctx.call("get_event", lambda: events.get_event(event.event_id)), None,
                         "a faulted turn's event looked up by id")
    retry = [ctx.event(user, "retried", session_id=sid, owner_subject=owner)]
    version = ctx.call("the turn retried without a fault", lambda: ctx.commit_turn(
        sid, b"t2", expected_version=1, owner_subject=owner, events=retry))
    ctx.expect_int_version(version, 2, "the retried turn")
    listed = ctx.call(f"events of {user!r}", lambda: events.list_events(user))
    if ctx.sequenced(listed):  # a rolled-back turn leaves no gap
        ctx.expect_equal(sorted(e.sequence for e in listed), [1, 2],
                         "sequences after the faulted and the retried turn (no gap)")


@case("durability", needs_event_turns=True)
def connection_cut_mid_turn(ctx: CaseContext) -> None:
    """A connection cut inside a turn leaves either the whole turn or nothing of it."""
    _fault_point(ctx, "turn.cut_connection")
    events, sid, user, owner = _seed_turn(ctx)
    before, events_before = _row(ctx, ctx.store, sid), _event_view(ctx, events, user)
    turn = [ctx.event(user, f"cut {n}", session_id=sid, owner_subject=owner) for n in range(2)]
    raised: BaseException | None = None
    try:
        with ctx.adapter.inject_fault("turn.cut_connection"):
            ctx.commit_turn(sid, b"t2", expected_version=1, owner_subject=owner, events=turn)
    except Exception as exc:  # noqa: BLE001 - the cut, as the driver reports it
        raised = exc
    # the adapter must be usable again (reconnect); read through it
    after = _row(ctx, ctx.store, sid)
    listed = _event_view(ctx, events, user)
    whole = (after is not None and after[:2] == (b"t2", 2)
             and sorted(c for _i, _s, c in listed)
             == sorted([c for _i, _s, c in events_before] + [e.content for e in turn]))
    nothing = after == before and listed == events_before
    if raised is None:
        ctx.expect(whole, "a cut turn that returned success", "the whole turn stored",
                   f"state {after!r}, events {[c for _i, _s, c in listed]}")
    else:
        ctx.expect(whole or nothing, "a cut turn that raised "
                   f"{type(raised).__name__}", "the whole turn or nothing of it",
                   f"state {after!r}, events {[c for _i, _s, c in listed]}")


#: What the engine requires of its Redis (ENGINE-WIRE §3), as the failure's "expected".
_DURABLE_REDIS = ("a durable server: appendonly yes (its last write ok) and a maxmemory-policy "
                  "that evicts no session or event key (noeviction)")


def _reported_verdict(details: Any) -> tuple[bool, str] | None:
    """The Redis durability verdict in the adapter's health details (one source:
    ``backends.redis.health.durability_verdict``), or None when the details carry none.
    Other backends' ``durable`` flags answer other questions (replication, crash-safety
    settings of a test server) and are not judged here."""
    if not isinstance(details, dict):
        return None
    if "aof_enabled" not in details and details.get("backend") != "redis":
        return None
    durable = details.get("durable")
    reason = str(details.get("reason") or "no reason given")
    if details.get("reachable") is False:
        return False, f"could not be verified ({reason})"
    return durable is True, reason


def _observed_verdict(ctx: CaseContext) -> tuple[bool, str]:
    """The same verdict read from the run's Redis (INFO) for an adapter without the
    health-details seam (the engine's own adapter), once a session the adapter saved is
    seen there in the engine's layout; not applicable otherwise."""
    from backends.redis.health import durability_verdict

    raw = ctx.raw_redis("cannot read the server's durability")
    try:
        sid = ctx.session("probe")
        ctx.call("save", lambda: ctx.store.save(sid, b"durability probe", expected_version=None))
        key = f"semvec:state:{sid}"
        try:
            on_it = raw.exists(key) == 1
            ttl = int(raw.ttl(key)) if on_it else 0
            info = raw.info() if on_it else {}
        except Exception as exc:  # noqa: BLE001
            raise NotApplicable(f"the run's Redis URI cannot be read: "
                                f"{type(exc).__name__}") from None
        if not on_it:
            raise NotApplicable("the adapter's rows are not on the run's Redis URI in the "
                                "engine's layout (semvec:state:...): no server to judge")
        verdict = durability_verdict(info, max(ttl, 0))
        return verdict["durable"], verdict["reason"]
    finally:
        raw.close()


@case("durability")
def server_is_durable(ctx: CaseContext) -> None:
    """The server keeps what it acknowledged, where the backend can tell: Redis with AOF on
    and no maxmemory-policy that can evict session or event keys, as the engine requires."""
    if offers(ctx.adapter, Capability.HEALTH_DETAILS):
        details = ctx.call("health_details()", lambda: ctx.adapter.health_details(
            ctx.options.health_timeout))
        verdict = _reported_verdict(details)
        if verdict is None:
            raise NotApplicable("the backend's health details give no verdict on the "
                                "server's own durability (the suite judges Redis's: AOF "
                                "and eviction policy)")
        source = "as health_details() reports it"
    else:
        verdict = _observed_verdict(ctx)
        source = "as the run's Redis reports it (INFO)"
    durable, reason = verdict
    ctx.expect(durable, f"the server's own durability, {source}", _DURABLE_REDIS,
               f"not durable: {reason}; set appendonly yes and maxmemory-policy noeviction "
               "(CONFIG SET or redis.conf)")


# -- SIGKILL mid-turn ----------------------------------------------------------------------

#: Events each killed child writes per turn (a turn whose events are partly there is torn).
_EVENTS_PER_TURN = 2


def _after_kill(ctx: CaseContext, fresh, sid: str, user: str, owner: str, acked: int,
                kill: int, since: int) -> int:
    """What a fresh adapter finds after a kill: the stored version's own blob, every
    acknowledged turn, and the events of exactly the turns stored (the child's turns
    after version ``since``, written for ``user``, this round's user id); its version."""
    from backends.conformance.children import turn_blob, turn_labels
    from backends.conformance.drive import EventsDriver, StoreDriver

    where = f"after SIGKILL {kill}"
    row = ctx.call(f"load_full {where}", lambda: StoreDriver(fresh.state_store()).load_full(sid))
    ctx.expect(row is not None, f"session {where}", "the session", "None")
    version = row.version
    ctx.expect(version >= acked, f"version {where}",
               f"at least {acked} (the last turn the child was told was committed)",
               f"{version} (an acknowledged turn was lost)")
    ctx.expect_equal(bytes(row.blob), turn_blob(sid, version),
                     f"blob stored with version {version} {where} (the one written with it)")
    ctx.expect_equal(row.owner_subject, owner, f"owner {where}")
    raw = fresh.event_store()
    if raw is None:
        return version
    listed = ctx.call(f"events {where}", lambda: EventsDriver(raw).list_events(user))
    found = sorted(e.content for e in listed)
    wanted = sorted(label for v in range(since + 1, version + 1)
                    for label in turn_labels(v, _EVENTS_PER_TURN))
    if found != wanted:
        missing = sorted(set(wanted) - set(found))
        extra = sorted(set(found) - set(wanted))
        ctx.fail(f"events {where} (state at version {version})",
                 f"every event of the child's turns {since + 1}..{version}, once, and none "
                 "of a later turn",
                 f"missing {missing[:4]}, extra {extra[:4]}, {len(found)} listed")
    return version


@case("durability", needs_event_turns=True)
def sigkill(ctx: CaseContext) -> None:
    """A child committing turns is SIGKILLed at random moments (20+ times): a fresh adapter
    finds every turn whole or absent, acknowledged turns kept, and the session goes on."""
    import os
    import random
    import tempfile
    import time

    from backends.conformance.children import (
        Zygote,
        require_children,
        turn_blob,
        turn_event,
        turn_event_id,
        turn_labels,
        wait_for,
        read_json,
    )

    recipe = require_children(ctx)
    options = ctx.options
    seed = options.kill_seed if options.kill_seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    sid, owner = ctx.session("killed"), ctx.owner("tenant-kill")
    user = ctx.user("killed")  # each round's turns get a user id of their own (a short log)
    has_events = ctx.events is not None
    per_turn = _EVENTS_PER_TURN if has_events else 0
    version = 0
    fresh_adapter = ctx.factory or recipe.build

    def commit(adapter, v: int, user: str) -> int:
        events = ([turn_event(user, sid, owner, label) for label in turn_labels(v, per_turn)]
                  if has_events else None)
        return ctx.commit_turn(sid, turn_blob(sid, v), expected_version=v - 1 or None,
                               owner_subject=owner, events=events, adapter=adapter)

    kills, started = 0, time.monotonic()
    try:
        # the zygote first: a child that cannot run (e.g. the adapter holds a connection
        # every fork would share) is known before this case writes anything
        with tempfile.TemporaryDirectory(prefix="semvec-conf-kill-") as tmp, \
                Zygote(recipe) as zygote:
            ctx.expect_int_version(ctx.call("first turn", lambda: commit(ctx.adapter, 1, user)),
                                   1, "first turn")
            version = 1
            while kills < options.kills and time.monotonic() - started < options.kill_budget:
                user, since = ctx.user(f"k{kills}"), version
                ack_path = os.path.join(tmp, f"acks-{kills}")
                error_path = os.path.join(tmp, f"error-{kills}.json")
                pid = zygote.fork({"kind": "turns", "session": sid, "user": user,
                                   "owner": owner, "version": version,
                                   "events_per_turn": per_turn, "ack_path": ack_path,
                                   "error_path": error_path})

                def acked() -> int:
                    try:
                        with open(ack_path, "rb") as handle:
                            lines = handle.read().split(b"\n")[:-1]
                    except OSError:
                        return version
                    return int(lines[-1]) if lines else version

                if not wait_for(lambda: acked() > version or os.path.exists(error_path), 30,
                                interval=0.001):
                    ctx.fail("a child committing turns", "a first turn within 30s",
                             "none (the child hung)")
                time.sleep(rng.uniform(0.0, 0.03))
                status = zygote.kill(pid)
                failure = read_json(error_path)
                ctx.expect(failure is None, "the child committing turns",
                           "turns until it is killed",
                           f"it stopped: {(failure or {}).get('error')}")
                ctx.expect(status is not None, "the killed child", "reaped", "still running")
                kills += 1
                last_ack = acked()
                fresh = ctx.call("a fresh adapter after the kill", fresh_adapter)
                try:
                    version = _after_kill(ctx, fresh, sid, user, owner, last_ack, kills,
                                          since)
                    got = ctx.call(f"the next turn after SIGKILL {kills}",
                                   lambda: commit(fresh, version + 1, user))
                    ctx.expect_int_version(got, version + 1,
                                           f"the next turn after SIGKILL {kills}")
                    version += 1
                finally:
                    _close(fresh)
    finally:
        for v in range(1, version + 3):  # every id a child may have written, for cleanup
            for label in turn_labels(v, per_turn):
                ctx.event_ids.append(str(turn_event_id(sid, label)))
    ctx.expect(kills >= options.kills, f"SIGKILLs within {options.kill_budget:g}s",
               f"{options.kills}", f"{kills}")
    ctx.notes.append(f"{kills} kills, {version} turns, seed {seed}")
