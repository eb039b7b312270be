"""What a replica promotion costs a deployment, measured the way Jepsen measures it: run
writers, fail the primary, promote, and count what was acknowledged and is gone.

Given a :class:`~backends.conformance.failover.FailoverTopology`
(``ConformanceOptions.failover``; not applicable without one, since the group breaks the
primary), ``failover.acknowledged_turns``:

1. starts ``failover_writers`` child processes (the zygote's ``writer`` job), each
   committing turns with events on a session of its own and keeping a history of what it
   was told (``try N``, then ``ack N`` or ``err N``);
2. once every writer has had a few turns acknowledged, waits a random moment (the seed is
   reported), stalls replication for ``failover_stall`` seconds where the topology can
   (longer, up to 3 s, until a turn begun inside the stall has been acknowledged),
   fails the primary, stops the writers and promotes the replica;
3. reads every session and its events back from the promoted server and sorts each turn
   a writer tried: acknowledged and present, acknowledged and lost, refused but landed,
   torn (a state without its events, events without their state, a blob of another turn);
4. commits one more turn on every session there: the deployment goes on.

Two more cases run the same writers (which here retry a failed turn unchanged, as a
client would) through the two ways operators actually lose turns:

* ``failover.switchover``: a planned promotion (``SENTINEL FAILOVER``; PostgreSQL: the old
  primary stopped, then ``pg_promote()``) with the writers on the deployment's URI;
* ``failover.isolated_primary``: the primary cut off from its replicas and watchers while
  the writers still reach it, then the replica promoted.

Each measures, from the writers' timestamped histories, the window in which acknowledged
turns were lost (from the switch or the cut to the last of them), and where the topology
can tell, the time from the promotion until the old primary refused writes.

Verdict: a torn turn always fails. A lost acknowledged turn fails where the deployment
promises synchronous replication (the topology says so, or health's ``replicated``
verdict does) or the adapter waits for replicas (health's ``wait_replicas``); elsewhere
it is the measured cost of asynchronous replication, an advisory finding with the count
and the window. The figures travel with the result (``CaseResult.figures``).
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from backends.conformance.catalogue import case
from backends.conformance.context import CaseContext
from backends.conformance.model import AdvisoryFinding, NotApplicable
from backends.contract import Capability, offers

#: Events each writer commits with a turn (a turn whose events are partly there is torn).
EVENTS_PER_TURN = 2
#: Turns every writer must have acknowledged before the failure is set off.
_WARM_ACKS = 5
#: Seconds the writers may take to warm up, and to stop once the primary is gone (one
#: still inside a call then, e.g. waiting for its pool to reconnect, is SIGKILLed and its
#: last turn counted as unanswered).
_WARM_S = 30.0
_STOP_S = 5.0
#: The longest random wait before the failure starts.
_JITTER_S = 0.25
#: How much longer than asked a stall may be held while no turn begun inside it has been
#: acknowledged (a loaded machine): a window with no acknowledged write measures nothing.
_STALL_EXTRA_S = 3.0
#: Seconds the writers go on after a promotion (turns the new primary must take), and
#: at most how long the case waits for the old primary to refuse writes.
_AFTER_S = 1.0
_DEMOTION_S = 30.0
#: Seconds a writer of the switchover cases sends a failed turn again before it stops.
_RETRY_S = 20.0


@dataclass
class History:
    """What one writer was told, read from its history file."""

    tried: list[int] = field(default_factory=list)
    acked: set[int] = field(default_factory=set)
    refused: dict[int, str] = field(default_factory=dict)
    #: when each turn was acknowledged (the monotonic clock; absent in older histories)
    acked_at: dict[int, float] = field(default_factory=dict)

    @classmethod
    def read(cls, path: str) -> "History":
        found = cls()
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                lines = handle.read().split("\n")[:-1]  # a torn last line was never written
        except OSError:
            return found
        for line in lines:
            word, _, rest = line.partition(" ")
            number, _, reason = rest.partition(" ")
            if not number.isdigit():
                continue
            if word == "try":
                found.tried.append(int(number))
            elif word == "ack":
                found.acked.add(int(number))
                try:
                    found.acked_at[int(number)] = float(reason)
                except ValueError:
                    pass
            elif word == "err":
                found.refused[int(number)] = reason
        return found


@dataclass
class Tally:
    """Every tried turn sorted by what the writer was told and what the store holds."""

    acknowledged: int = 0
    present: int = 0
    lost: int = 0
    refused: int = 0
    refused_landed: int = 0
    unanswered: int = 0
    torn: list[str] = field(default_factory=list)
    #: when each lost turn was acknowledged
    lost_at: list[float] = field(default_factory=list)

    def add(self, other: "Tally") -> None:
        self.lost_at += other.lost_at
        self.acknowledged += other.acknowledged
        self.present += other.present
        self.lost += other.lost
        self.refused += other.refused
        self.refused_landed += other.refused_landed
        self.unanswered += other.unanswered
        self.torn += other.torn

    def figures(self) -> dict[str, Any]:
        return {"acknowledged": self.acknowledged, "acknowledged_present": self.present,
                "acknowledged_lost": self.lost, "refused": self.refused,
                "refused_but_landed": self.refused_landed, "unanswered": self.unanswered,
                "torn": len(self.torn)}


@dataclass
class Writer:
    session: str
    user: str
    owner: str
    history_path: str
    #: the version the promoted server holds (set by the audit)
    stored: int = 0

    def history(self) -> History:
        return History.read(self.history_path)


def _turn_of(label: str) -> int | None:
    parts = label.split()  # "turn N event I" (children.turn_labels)
    return int(parts[1]) if len(parts) == 4 and parts[1].isdigit() else None


def sort_turns(history: History, stored: int, blob_ok: bool, labels: list[str],
               per_turn: int, where: str) -> Tally:
    """One writer's turns against its session at version ``stored`` (0: absent) whose
    blob is the one written with it (``blob_ok``) and its user's event ``labels``."""
    from backends.conformance.children import turn_labels

    tally = Tally(acknowledged=len(history.acked), refused=len(history.refused))
    tally.present = sum(1 for v in history.acked if v <= stored)
    tally.lost = tally.acknowledged - tally.present
    tally.lost_at = [history.acked_at[v] for v in history.acked
                     if v > stored and v in history.acked_at]
    tally.refused_landed = sum(1 for v in history.refused if v <= stored)
    told = history.acked | set(history.refused)
    tally.unanswered = sum(1 for v in set(history.tried) if v not in told)
    if stored and not blob_ok:
        tally.torn.append(f"{where}: the state at version {stored} holds another turn's blob")
    if stored > max(history.tried, default=0):
        tally.torn.append(f"{where}: version {stored} stored, no writer tried it")
    have = set(labels)
    for v in range(1, stored + 1):
        if per_turn and not set(turn_labels(v, per_turn)) <= have:
            tally.torn.append(f"{where}: turn {v}'s state without all its events")
    orphans = sorted({t for t in map(_turn_of, labels) if t is not None and t > stored})
    tally.torn += [f"{where}: events of turn {v} without its state" for v in orphans]
    return tally


def _promised(ctx: CaseContext, topology: Any) -> tuple[bool, str]:
    """Whether the deployment promises that an acknowledged turn is on a second server,
    and who says so."""
    if topology.synchronous is not None:
        return bool(topology.synchronous), "the topology"
    if offers(ctx.adapter, Capability.HEALTH_DETAILS):
        details = ctx.call("health_details()", lambda: ctx.adapter.health_details(
            ctx.options.health_timeout))
        if isinstance(details, dict) and details.get("wait_replicas"):
            return True, f"the adapter (wait_replicas {details['wait_replicas']})"
        if isinstance(details, dict) and "replicated" in details:
            return details.get("replicated") is True, "health (replicated)"
    return False, "nobody (taken as asynchronous)"


def _writers(ctx: CaseContext, where: str) -> list[Writer]:
    owner = ctx.owner("tenant-failover")
    sessions = [ctx.session(f"failover-{i}") for i in range(max(1, ctx.options.failover_writers))]
    # a history is named after its session (ids under the run prefix are file-name safe)
    return [Writer(sid, ctx.user(f"failover-{i}"), owner, os.path.join(where, f"{sid}.history"))
            for i, sid in enumerate(sessions)]


def _warm_up(ctx: CaseContext, writers: list[Writer], error_paths: list[str]) -> None:
    from backends.conformance.children import read_json

    deadline = time.monotonic() + _WARM_S
    while time.monotonic() < deadline:
        histories = [w.history() for w in writers]
        refused = next((h.refused for h in histories if h.refused), None)
        crashed = next((read_json(p) for p in error_paths if os.path.exists(p)), None)
        if refused or crashed:
            ctx.fail("the writers before the failure", "turns acknowledged",
                     f"refused: {refused or (crashed or {}).get('error')}")
        if all(len(h.acked) >= _WARM_ACKS for h in histories):
            return
        time.sleep(0.01)
    ctx.fail("the writers before the failure", f"{_WARM_ACKS} turns each within "
             f"{_WARM_S:g}s", "fewer (the writers hang?)")


def _hold_stall(writers: list[Writer], seconds: float) -> float:
    """Keep replication stalled ``seconds``, then until a turn begun inside the stall was
    acknowledged (at most ``_STALL_EXTRA_S`` more); how long. Each writer has one turn in
    flight when the stall begins, so more acknowledgements than writers since then mean
    one turn was written entirely inside the window."""
    def acked() -> int:
        return sum(len(w.history().acked) for w in writers)

    before, started = acked(), time.monotonic()
    time.sleep(seconds)
    deadline = started + seconds + _STALL_EXTRA_S
    while acked() <= before + len(writers) and time.monotonic() < deadline:
        time.sleep(0.01)
    return time.monotonic() - started


def _stop(zygote: Any, pids: list[int], stop_path: str) -> int:
    """Tell the writers to stop, wait for them, SIGKILL the ones still in a call; how
    many had to be killed."""
    open(stop_path, "w").close()
    deadline, killed = time.monotonic() + _STOP_S, 0
    for pid in pids:
        if zygote.wait(pid, max(0.0, deadline - time.monotonic())) is None:
            zygote.kill(pid)
            killed += 1
    return killed


def _with_writers(ctx: CaseContext, recipe: Any, writers: list[Writer], rng: random.Random,
                  tmp: str, scenario: Callable[[Callable[[], int]], dict[str, Any]],
                  retry_s: float = 0.0) -> dict[str, Any]:
    """Writers running and warmed up, then ``scenario`` (given the function that stops
    them and returns how many had to be killed); its timings."""
    from backends.conformance.children import Zygote

    errors = [os.path.join(tmp, f"writer-{i}.error") for i in range(len(writers))]
    stop_path = os.path.join(tmp, "stop")
    with Zygote(recipe) as zygote:
        pids = [zygote.fork({"kind": "writer", "session": w.session, "user": w.user,
                             "owner": w.owner, "events_per_turn": EVENTS_PER_TURN,
                             "history_path": w.history_path, "stop_path": stop_path,
                             "error_path": error, "retry_s": retry_s})
                for w, error in zip(writers, errors)]
        try:
            _warm_up(ctx, writers, errors)
            time.sleep(rng.uniform(0.0, _JITTER_S))
            return scenario(lambda: _stop(zygote, pids, stop_path))
        finally:
            open(stop_path, "w").close()


def _fail_over(ctx: CaseContext, topology: Any, writers: list[Writer],
               stop: Callable[[], int]) -> dict[str, Any]:
    """acknowledged_turns: the stall, the failure, the writers stopped, the promotion."""
    stall, held = topology.stall_replication is not None, 0.0
    if stall:
        ctx.call("stalling replication", topology.stall_replication)
        held = _hold_stall(writers, ctx.options.failover_stall)
    ctx.call("failing the primary", topology.fail_primary)
    killed = stop()
    promoting = time.monotonic()
    ctx.call("promoting the replica", topology.promote)
    return {"stall_s": ctx.options.failover_stall if stall else None,
            "stall_held_s": round(held, 3) if stall else None,
            "promotion_s": round(time.monotonic() - promoting, 3), "writers_killed": killed}


def _after_promotion(ctx: CaseContext, topology: Any, promoted: float) -> float | None:
    """Writers go on for a while on the new primary; the cut healed (where it can be);
    seconds from the promotion until the old primary refused writes (None: not told)."""
    time.sleep(_AFTER_S)
    if topology.heal is not None:
        ctx.call("healing the cut", topology.heal)
    if topology.demoted is None:
        return None
    deadline = promoted + _DEMOTION_S
    while time.monotonic() < deadline:
        if ctx.call("is the old primary demoted?", topology.demoted):
            return round(time.monotonic() - promoted, 3)
        time.sleep(0.05)
    return None


def _switched(ctx: CaseContext, topology: Any, stop: Callable[[], int], switch: Any,
              what: str) -> dict[str, Any]:
    """switchover / isolated_primary: ``switch`` (then, for a cut, the promotion), the
    writers on, then stopped; when each thing happened."""
    started = time.monotonic()
    ctx.call(what, switch)
    if switch is topology.isolate_primary:
        ctx.call("promoting the replica", topology.promote)
    promoted = time.monotonic()
    demoted = _after_promotion(ctx, topology, promoted)
    killed = stop()
    return {"started_at": started, "promoted_at": promoted,
            "promotion_s": round(promoted - started, 3),
            "promotion_to_demotion_s": demoted, "writers_killed": killed}


def _audit(ctx: CaseContext, writers: list[Writer]) -> Tally:
    """Every writer's turns as the promoted server holds them."""
    from backends.conformance.children import turn_blob

    store, events, total = ctx.store, ctx.events, Tally()
    for w in writers:
        row = ctx.call(f"load_full({w.session!r}) on the promoted server",
                       lambda: store.load_full(w.session))
        stored = row.version if row is not None else 0
        blob_ok = row is not None and bytes(row.blob) == turn_blob(w.session, stored)
        labels = ([] if events is None else [e.content for e in ctx.call(
            f"events of {w.user!r} on the promoted server", lambda: events.list_events(w.user))])
        total.add(sort_turns(w.history(), stored, blob_ok, labels,
                             EVENTS_PER_TURN if events is not None else 0, w.session))
        w.stored = stored
    return total


def _patiently(fn: Callable[[], Any], patience: float) -> Callable[[], Any]:
    """``fn`` sent again unchanged while it is refused as not replicated, for at most
    ``patience`` seconds: a promoted server has no replica until the old primary rejoins
    it, and a client that waits for replicas waits that long (the retry is idempotent)."""
    from backends.errors import Category, category_of

    def call() -> Any:
        deadline = time.monotonic() + patience
        while True:
            try:
                return fn()
            except Exception as exc:  # noqa: BLE001 - re-raised unless not replicated
                if category_of(exc) is not Category.UNREPLICATED or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    return call


def _go_on(ctx: CaseContext, writers: list[Writer], patience: float = 0.0) -> None:
    """One more turn on every session, on the promoted server."""
    from backends.conformance.children import turn_blob, turn_event, turn_event_id, turn_labels

    for w in writers:
        stored = w.stored
        tried = max(w.history().tried, default=0)
        for v in range(1, max(stored, tried) + 2):
            ctx.event_ids += [str(turn_event_id(w.session, label))
                              for label in turn_labels(v, EVENTS_PER_TURN)]
        nxt = stored + 1
        events = ([turn_event(w.user, w.session, w.owner, label)
                   for label in turn_labels(nxt, EVENTS_PER_TURN)]
                  if ctx.events is not None else None)
        got = ctx.call(f"the next turn of {w.session} on the promoted server", _patiently(
            lambda: ctx.commit_turn(w.session, turn_blob(w.session, nxt),
                                    expected_version=stored or None,
                                    owner_subject=w.owner, events=events), patience))
        ctx.expect_int_version(got, nxt, f"the next turn of {w.session} after the failover")


def _topology(ctx: CaseContext, scenario: str) -> tuple[Any, Any]:
    from backends.conformance.children import require_children

    topology = ctx.options.failover
    if topology is None:
        raise NotApplicable("no failover topology was given (conformance run --failover "
                            "FILE, or ConformanceOptions(failover=...)): this group fails "
                            "the primary, so it never runs unasked")
    if getattr(topology, scenario) is None:
        raise NotApplicable(f"the failover topology gives no {scenario} (one scenario per "
                            "topology: each breaks the deployment)")
    recipe = require_children(ctx)
    if recipe.uri_key is None:
        raise NotApplicable("the adapter is not configured by a URI, so the suite cannot "
                            "point it at the promoted server")
    return topology, recipe


def _verdict(ctx: CaseContext, tally: Tally, synchronous: bool, window: str = "") -> None:
    if tally.torn:
        ctx.fail("the writers' turns on the promoted server", "every turn whole or absent",
                 f"{len(tally.torn)} torn: {'; '.join(tally.torn[:3])}")
    if tally.lost and synchronous:
        ctx.fail("acknowledged turns on the promoted server (the deployment promises "
                 "synchronous replication)", "every acknowledged turn kept",
                 f"{tally.lost} of {tally.acknowledged} lost")
    if tally.lost:
        raise AdvisoryFinding(
            "acknowledged turns on the promoted server", "every acknowledged turn kept "
            "(only synchronous replication promises it)",
            f"{tally.lost} of {tally.acknowledged} lost{window}: the measured cost of "
            "asynchronous replication (the engine does not wait for replicas)")


def _run_case(ctx: CaseContext, scenario_name: str,
              scenario: Callable[[Any, list[Writer], Callable[[], int]], dict[str, Any]],
              retry_s: float) -> tuple[Tally, dict[str, Any], bool]:
    """Writers through ``scenario``, then the audit on the promoted server and one more
    turn there; the tally, the figures and whether loss was promised away."""
    topology, recipe = _topology(ctx, scenario_name)
    synchronous, promiser = _promised(ctx, topology)
    options = ctx.options
    seed = options.failover_seed if options.failover_seed is not None \
        else random.randrange(1 << 30)
    with tempfile.TemporaryDirectory(prefix="semvec-conf-failover-") as tmp:
        writers = _writers(ctx, options.failover_history or tmp)
        timings = _with_writers(ctx, recipe, writers, random.Random(seed), tmp,
                                lambda stop: scenario(topology, writers, stop), retry_s)
        ctx.move_to(recipe.with_uri(topology.after_uri))
        tally = _audit(ctx, writers)
        _go_on(ctx, writers, _DEMOTION_S if retry_s else 0.0)
    ctx.figures.update({**tally.figures(), **timings, "writers": len(writers), "seed": seed,
                        "synchronous": synchronous, "synchronous_per": promiser})
    return tally, timings, synchronous


@case("failover", needs_event_turns=True)
def acknowledged_turns(ctx: CaseContext) -> None:
    """Writers in child processes while the primary fails and a replica is promoted: no
    turn torn, and no acknowledged turn lost where replication is synchronous."""
    tally, timings, synchronous = _run_case(
        ctx, "fail_primary",
        lambda topology, writers, stop: _fail_over(ctx, topology, writers, stop), 0.0)
    stall = f"replication stalled {timings['stall_held_s']:g}s" if timings["stall_s"] else \
        "replication not stalled"
    ctx.notes.append(f"{tally.acknowledged} acknowledged, {tally.lost} lost, "
                     f"{tally.refused_landed} refused but landed, {len(tally.torn)} torn; "
                     f"{stall}; promotion took {timings['promotion_s']:g}s; "
                     f"seed {ctx.figures['seed']}")
    _verdict(ctx, tally, synchronous)


def _windowed(ctx: CaseContext, tally: Tally, timings: dict[str, Any], synchronous: bool,
              what: str) -> None:
    """The loss window measured from the histories, the notes and the verdict."""
    started, promoted = timings.pop("started_at"), timings.pop("promoted_at")
    last = max(tally.lost_at, default=None)
    window = None if last is None else round(max(0.0, last - started), 3)
    after = None if last is None else round(last - promoted, 3)
    demoted = timings["promotion_to_demotion_s"]
    ctx.figures.update({"loss_window_s": window, "last_lost_after_promotion_s": after})
    ctx.notes.append(
        f"{tally.acknowledged} acknowledged, {tally.lost} lost, {len(tally.torn)} torn; "
        f"{what} to promotion {timings['promotion_s']:g}s; old primary refusing writes "
        + (f"{demoted:g}s after the promotion" if demoted is not None else "not measured")
        + f"; seed {ctx.figures['seed']}")
    text = "" if window is None else \
        f" (acknowledged up to {window:g}s after the {what} began)"
    _verdict(ctx, tally, synchronous, text)


@case("failover", needs_event_turns=True)
def switchover(ctx: CaseContext) -> None:
    """A planned promotion with the writers connected (they retry a failed turn as it
    was): no turn torn, and none acknowledged lost where replicas are waited for."""
    tally, timings, synchronous = _run_case(
        ctx, "switchover",
        lambda topology, _writers, stop: _switched(ctx, topology, stop, topology.switchover,
                                                   "switching over"), _RETRY_S)
    _windowed(ctx, tally, timings, synchronous, "switchover")


@case("failover", needs_event_turns=True)
def isolated_primary(ctx: CaseContext) -> None:
    """The primary cut off from its replicas and watchers while the writers still reach
    it, then the replica promoted: what the old primary acknowledged meanwhile is lost,
    unless replicas are waited for."""
    tally, timings, synchronous = _run_case(
        ctx, "isolate_primary",
        lambda topology, _writers, stop: _switched(ctx, topology, stop,
                                                   topology.isolate_primary,
                                                   "isolating the primary"), _RETRY_S)
    _windowed(ctx, tally, timings, synchronous, "isolation")
