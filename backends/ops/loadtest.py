"""Bounded concurrent load against ONE adapter, then an audit that nothing was lost.

Operators who point many engine workers at one store need evidence, not assurances:
N writer threads commit turns (state + events) to a few shared sessions for a fixed
time and at most a fixed number of commits, retrying lost races and riding out
outages; afterwards a verification pass reads everything back and proves that

- every ACKNOWLEDGED commit is present (its version reached, its events stored once),
- versions are contiguous (each of 1..V was won by exactly one turn),
- every event of a landed turn exists exactly once and per-user sequences have no gaps
  (on a store that assigns sequences),
- no half turn exists (a state without its events, or events without their state).

A write whose reply was lost (the connection broke mid-call) is UNKNOWN, not
acknowledged: the audit resolves it from the store (all of its events present = it
landed, none = it did not, some = a half turn, which fails the run).

Everything is written under a unique prefix (``semvec-load-<hex>-``) and removed
afterwards: the sessions, the events and the per-user counters of the run, nothing else.
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from backends.contract import MemoryEvent, event_defaults
from backends.errors import (
    BackendAuthError,
    BackendConfigError,
    InvalidEvent,
    UnsupportedOperation,
    load_category,
)

#: Outcomes of one commit attempt.
ACKED, CONFLICT, UNKNOWN, REFUSED = "acked", "conflict", "unknown", "refused"

#: Far enough ahead that every event of the run is strictly older (cleanup).


def new_load_prefix() -> str:
    return f"semvec-load-{uuid.uuid4().hex[:10]}-"


def error_category(exc: BaseException) -> str:
    """A short, stable name for what kind of failure ``exc`` is (backends.errors' table)."""
    return load_category(exc)


#: Categories after which no further attempt can succeed: the run stops early.
FATAL_CATEGORIES = frozenset({"auth", "config", "unsupported", "invalid_event"})
#: Categories raised before anything is sent (the turn certainly did not land).
_REFUSED_BEFORE_WRITE = (InvalidEvent, UnsupportedOperation, BackendConfigError,
                         BackendAuthError, ValueError, TypeError)


@dataclass(frozen=True)
class LoadPlan:
    """What to run. ``max_commits`` bounds acknowledged commits exactly; ``duration_s``
    bounds the time; whichever comes first ends the run."""

    writers: int = 4
    duration_s: float = 3.0
    max_commits: int = 100_000
    sessions: int = 2
    events_per_turn: int = 1
    prefix: str | None = None
    owner_subject: str | None = None
    payload_bytes: int = 64
    #: pause after an unreachable store, so writers do not spin during an outage
    backoff_s: float = 0.02
    #: how long the audit waits for the store to come back before giving up
    verify_timeout_s: float = 30.0
    seed: int | None = None

    def __post_init__(self) -> None:
        checks = [
            (isinstance(self.writers, int) and self.writers >= 1, "writers must be >= 1"),
            (self.duration_s > 0, "duration_s must be > 0"),
            (isinstance(self.max_commits, int) and self.max_commits >= 1, "max_commits must be >= 1"),
            (isinstance(self.sessions, int) and self.sessions >= 1, "sessions must be >= 1"),
            (isinstance(self.events_per_turn, int) and self.events_per_turn >= 0,
             "events_per_turn must be >= 0"),
            (isinstance(self.payload_bytes, int) and self.payload_bytes >= 0,
             "payload_bytes must be >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)


@dataclass
class Attempt:
    """One commit attempt as the writer saw it."""

    turn: str
    session: int
    version: int
    outcome: str
    event_ids: tuple[str, ...] = ()
    #: time.monotonic() when the outcome was known (fault tests: did writes resume?)
    settled_at: float = 0.0


@dataclass
class Verification:
    """What the audit found. ``ok`` means no acknowledged write was lost and no half turn
    exists; ``problems`` says what was wrong, one line each."""

    sessions: int = 0
    final_versions: dict[str, int] = field(default_factory=dict)
    acknowledged_verified: int = 0
    unknown_landed: int = 0
    unknown_not_landed: int = 0
    events_checked: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class LoadReport:
    backend: str
    prefix: str
    writers: int
    sessions: int
    events_per_turn: int
    elapsed_s: float
    attempts: int
    commits: int
    conflicts: int
    unknown: int
    errors: dict[str, int]
    verification: Verification
    fatal: str | None = None
    cleanup_problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def commits_per_s(self) -> float:
        return self.commits / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def conflicts_per_s(self) -> float:
        return self.conflicts / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def ok(self) -> bool:
        return self.verification.ok and self.fatal is None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["verification"]["ok"] = self.verification.ok
        data["commits_per_s"] = round(self.commits_per_s, 2)
        data["conflicts_per_s"] = round(self.conflicts_per_s, 2)
        data["ok"] = self.ok
        return data


class _Run:
    """Shared state of the writer threads."""

    def __init__(self, plan: LoadPlan, prefix: str, events_per_turn: int) -> None:
        self.plan = plan
        self.prefix = prefix
        self.events_per_turn = events_per_turn
        self.session_ids = [f"{prefix}s{j}" for j in range(plan.sessions)]
        self.user_ids = [f"{prefix}u{j}" for j in range(plan.sessions)]
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.reserved = 0  # acknowledged + in flight: never above max_commits
        self.acked = 0
        self.attempts: list[Attempt] = []
        self.errors: Counter[str] = Counter()
        self.fatal: str | None = None

    def reserve(self) -> bool:
        with self.lock:
            if self.reserved >= self.plan.max_commits:
                return False
            self.reserved += 1
            return True

    def settle(self, attempt: Attempt) -> None:
        attempt.settled_at = time.monotonic()
        with self.lock:
            self.attempts.append(attempt)
            if attempt.outcome == ACKED:
                self.acked += 1
            else:
                self.reserved -= 1
            if self.acked >= self.plan.max_commits:
                self.stop.set()

    def count_error(self, category: str, exc: BaseException | None = None) -> None:
        with self.lock:
            self.errors[category] += 1
            if category in FATAL_CATEGORIES and self.fatal is None:
                self.fatal = f"{category}: {exc}" if exc is not None else category
                self.stop.set()


def _blob(run: _Run, turn: str, version: int, rng: random.Random) -> bytes:
    pad = "".join(rng.choice("abcdefghij") for _ in range(run.plan.payload_bytes))
    return json.dumps({"load": run.prefix, "turn": turn, "version": version, "pad": pad},
                      separators=(",", ":")).encode("utf-8")


def _writer(adapter: Any, run: _Run, index: int, deadline: float) -> None:
    plan = run.plan
    rng = random.Random(None if plan.seed is None else plan.seed * 1000 + index)
    store = adapter.state_store()
    n = 0
    while not run.stop.is_set() and time.monotonic() < deadline:
        j = rng.randrange(plan.sessions)
        sid = run.session_ids[j]
        try:
            current = store.current_version(sid)
        except Exception as exc:  # noqa: BLE001 - counted, the writer carries on
            category = error_category(exc)
            run.count_error(category, exc)
            time.sleep(plan.backoff_s)
            continue
        if not run.reserve():
            break
        n += 1
        turn = f"w{index}-{n}"
        version = (current or 0) + 1
        event_ids = tuple(str(uuid.uuid4()) for _k in range(run.events_per_turn))
        events = [
            MemoryEvent(event_id=eid, user_id=run.user_ids[j], content=f"load turn {turn} #{k}",
                        meta={"turn": turn, "version": version, "k": k},
                        owner_subject=plan.owner_subject or "", session_id=sid)
            for k, eid in enumerate(event_ids)
        ]
        attempt = Attempt(turn, j, version, UNKNOWN, event_ids)
        try:
            adapter.commit_turn(sid, _blob(run, turn, version, rng), expected_version=current,
                                owner_subject=plan.owner_subject, events=events or None)
        except Exception as exc:  # noqa: BLE001 - every outcome is recorded
            category = error_category(exc)
            if category == "conflict":
                attempt.outcome = CONFLICT
            elif isinstance(exc, _REFUSED_BEFORE_WRITE):
                attempt.outcome = REFUSED
            # anything else may have landed: the reply was lost, so it stays UNKNOWN
            run.settle(attempt)
            run.count_error(category, exc)
            if category != "conflict":
                time.sleep(plan.backoff_s)
            continue
        attempt.outcome = ACKED
        run.settle(attempt)


def _with_retry(fn: Callable[[], Any], timeout_s: float) -> Any:
    """Call ``fn``, retrying while the store is unreachable (the audit outlives outages)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001
            if error_category(exc) != "unreachable" or time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def _turn_of_blob(blob: bytes | None) -> tuple[str | None, int | None]:
    try:
        data = json.loads(blob or b"")
        return str(data["turn"]), int(data["version"])
    except (ValueError, KeyError, TypeError):
        return None, None


def verify(adapter: Any, run: _Run, timeout_s: float) -> Verification:
    """Read everything back and check the run's promises (see the module docstring)."""
    result = Verification(sessions=len(run.session_ids))
    store = adapter.state_store()
    events_store = adapter.event_store() if run.events_per_turn else None
    problems = result.problems
    by_session: dict[int, list[Attempt]] = {}
    for attempt in run.attempts:
        by_session.setdefault(attempt.session, []).append(attempt)
    for j, sid in enumerate(run.session_ids):
        attempts = by_session.get(j, [])
        state = _with_retry(lambda: store.load_full(sid), timeout_s)
        final = state.version if state is not None else 0
        result.final_versions[sid] = final
        state_turn, state_version = _turn_of_blob(state.blob if state else None)
        if state is not None and (state_turn is None or state_version != final):
            problems.append(f"{sid}: stored blob does not belong to version {final} of this run")
        acked = [a for a in attempts if a.outcome == ACKED]
        seen_versions: dict[int, str] = {}
        for a in acked:
            if a.version > final:
                problems.append(f"{sid}: acknowledged version {a.version} (turn {a.turn}) is "
                                f"missing; the store is at version {final}")
            if a.version in seen_versions:
                problems.append(f"{sid}: version {a.version} acknowledged twice (turns "
                                f"{seen_versions[a.version]} and {a.turn}): a lost update")
            seen_versions[a.version] = a.turn
        if events_store is None:
            _verify_without_events(sid, attempts, final, state_turn, result)
        else:
            _verify_with_events(events_store, run, j, sid, attempts, final, state_turn,
                                result, timeout_s)
    return result


def _verify_without_events(sid: str, attempts: list[Attempt], final: int,
                           state_turn: str | None, result: Verification) -> None:
    acked = {a.version for a in attempts if a.outcome == ACKED}
    possible = acked | {a.version for a in attempts if a.outcome == UNKNOWN}
    gaps = sorted(set(range(1, final + 1)) - possible)
    if gaps:
        result.problems.append(f"{sid}: versions {gaps[:5]} were reached by no attempt of "
                               "this run (versions not contiguous)")
    if final:
        winners = [a for a in attempts if a.turn == state_turn]
        if not winners or winners[0].outcome not in (ACKED, UNKNOWN):
            result.problems.append(f"{sid}: the stored state was written by turn {state_turn}, "
                                   "which this run never saw land")
        elif winners[0].outcome == UNKNOWN:
            result.unknown_landed += 1
    result.acknowledged_verified += sum(1 for a in attempts
                                        if a.outcome == ACKED and a.version <= final)


def _verify_with_events(events_store: Any, run: _Run, j: int, sid: str,
                        attempts: list[Attempt], final: int, state_turn: str | None,
                        result: Verification, timeout_s: float) -> None:
    problems = result.problems
    user = run.user_ids[j]
    events = _with_retry(lambda: events_store.list_events(user), timeout_s)
    result.events_checked += len(events)
    counts = Counter(e.event_id for e in events)
    for event_id, count in counts.items():
        if count > 1:
            problems.append(f"{sid}: event {event_id} is stored {count} times")
    sequences = [e.sequence for e in events]
    # a store whose layout keeps no sequence (the engine's SQL tables) declares it;
    # its events are then audited by id alone
    sequenced = event_defaults(events_store).assigns_sequences
    if sequenced and sequences != list(range(1, len(events) + 1)):
        problems.append(f"{sid}: sequences of {user} are not 1..{len(events)} in order "
                        f"(first values {sequences[:5]})")
    known = {a.turn for a in attempts}
    for event in events:
        turn = str(event.meta.get("turn"))
        if turn not in known:
            problems.append(f"{sid}: event {event.event_id} belongs to no attempt of this run")
    landed: dict[int, list[str]] = {}
    for a in attempts:
        present = sum(1 for eid in a.event_ids if counts.get(eid))
        complete = present == len(a.event_ids)
        if 0 < present < len(a.event_ids):
            problems.append(f"{sid}: half turn {a.turn} ({a.outcome}): {present} of "
                            f"{len(a.event_ids)} events stored")
            continue
        if a.outcome == ACKED:
            if not complete:
                problems.append(f"{sid}: acknowledged turn {a.turn} (version {a.version}) "
                                "lost its events")
                continue
            result.acknowledged_verified += 1
        elif a.outcome == UNKNOWN:
            if complete:
                result.unknown_landed += 1
            else:
                result.unknown_not_landed += 1
                continue
        elif present:
            problems.append(f"{sid}: turn {a.turn} was refused ({a.outcome}) but its events "
                            "were stored")
            continue
        else:
            continue
        landed.setdefault(a.version, []).append(a.turn)
    for version, turns in sorted(landed.items()):
        if len(turns) > 1:
            problems.append(f"{sid}: turns {turns} all landed at version {version}")
        if version > final:
            problems.append(f"{sid}: events of turn {turns[0]} (version {version}) exist but "
                            f"the state is at version {final}: events without their state")
    missing = sorted(set(range(1, final + 1)) - set(landed))
    if missing:
        problems.append(f"{sid}: versions {missing[:5]} have no stored turn: state without "
                        "its events (or versions not contiguous)")
    if final and state_turn not in landed.get(final, []):
        problems.append(f"{sid}: the state at version {final} was written by turn "
                        f"{state_turn}, whose events are not stored: state without its events")


def cleanup(adapter: Any, run: _Run, timeout_s: float = 30.0) -> list[str]:
    """Remove the run's sessions, events and per-user counters; nothing else."""
    from backends.conformance.cleanup import remove_run

    return remove_run(adapter, run.prefix, sessions=run.session_ids,
                      users=run.user_ids if run.events_per_turn else (),
                      attempt=lambda step: _with_retry(step, timeout_s),
                      describe=lambda exc: f"{error_category(exc)}: {exc}")


class LoadInterrupted(BaseException):
    """The run was interrupted (``cause``, e.g. a signal); the writers were stopped and the
    cleanup ran, leaving ``problems`` (empty = everything under ``prefix`` removed)."""

    def __init__(self, prefix: str, sessions: int, problems: list[str],
                 cause: BaseException) -> None:
        super().__init__(f"load run {prefix} interrupted")
        self.prefix = prefix
        self.sessions = sessions
        self.problems = problems
        self.cause = cause


#: users probed past the highest index a run is known to have used before concluding
#: there are no more (a load run numbers its sessions and users 0..n-1 without gaps)
PROBE_GAP = 64


@dataclass
class RunLeftovers:
    """What a load run left under its prefix: sessions (found by a scan) and users that
    still hold events (found by probing the run's user names)."""

    sessions: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.sessions or self.users)


@dataclass
class CleanupOutcome:
    """What :func:`cleanup_prefix` removed, what is still there after it (read again, not
    assumed), and the steps that failed."""

    prefix: str
    removed: RunLeftovers
    left: RunLeftovers
    problems: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.left and not self.problems


def _index(name: str, prefix: str, kind: str) -> int | None:
    rest = name[len(prefix):]
    return int(rest[1:]) if rest[:1] == kind and rest[1:].isdigit() else None


def find_leftovers(adapter: Any, prefix: str, sessions_hint: int = 0) -> RunLeftovers:
    """Everything a run under ``prefix`` left, never trusting a count: sessions by a scan
    of the prefix (by name probing when the backend cannot enumerate), users by probing
    ``<prefix>u<j>`` up to past the highest index seen, the hint, and :data:`PROBE_GAP`
    consecutive users without events."""
    from backends.conformance.drive import EventsDriver
    from backends.contract import Capability, offers

    _check_prefix(prefix)
    found = RunLeftovers()
    if offers(adapter, Capability.SESSIONS):
        found.sessions = sorted(
            (s.session_id for s in adapter.iter_sessions(match=_glob_escape(prefix) + "*")
             if s.session_id.startswith(prefix)),
            key=lambda sid: (_index(sid, prefix, "s") is None, _index(sid, prefix, "s") or 0, sid))
    else:
        store = adapter.state_store()
        found.sessions = _probe(lambda j: store.current_version(f"{prefix}s{j}") is not None,
                                sessions_hint, prefix, "s")
    events = adapter.event_store()
    if events is None:
        return found
    driver = EventsDriver(events)
    known = [i for i in (_index(s, prefix, "s") for s in found.sessions) if i is not None]
    floor = max([sessions_hint, *(i + 1 for i in known)])
    found.users = _probe(lambda j: bool(driver.list_events(f"{prefix}u{j}", limit=1)
                                        if not driver.engine else
                                        driver.list_events(f"{prefix}u{j}")),
                         floor, prefix, "u")
    return found


def _probe(exists: Callable[[int], bool], floor: int, prefix: str, kind: str) -> list[str]:
    names, j, misses = [], 0, 0
    while j < floor or misses < PROBE_GAP:
        if exists(j):
            names.append(f"{prefix}{kind}{j}")
            misses = 0
        elif j >= floor:
            misses += 1
        j += 1
    return names


def _glob_escape(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[]" else c for c in text)


def _check_prefix(prefix: str) -> None:
    if not prefix.startswith("semvec-load-") or len(prefix) <= len("semvec-load-"):
        raise ValueError(f"{prefix!r} is not a load-run prefix (semvec-load-<hex>-)")


def cleanup_prefix(adapter: Any, prefix: str, sessions: int = 0, *,
                   timeout_s: float = 30.0) -> CleanupOutcome:
    """Remove what a run under ``prefix`` left (an interrupted run whose own cleanup could
    not finish): what :func:`find_leftovers` finds, ``sessions`` being only a lower bound
    of the names to probe; then look again and report what is still there. Only names
    under the prefix are touched."""
    _check_prefix(prefix)
    before = find_leftovers(adapter, prefix, sessions)
    from backends.conformance.cleanup import remove_run

    problems = remove_run(adapter, prefix, sessions=before.sessions, users=before.users,
                          attempt=lambda step: _with_retry(step, timeout_s),
                          describe=lambda exc: f"{error_category(exc)}: {exc}")
    after = find_leftovers(adapter, prefix, sessions)
    removed = RunLeftovers([s for s in before.sessions if s not in set(after.sessions)],
                           [u for u in before.users if u not in set(after.users)])
    return CleanupOutcome(prefix, removed, after, problems)


def run_load(adapter: Any, plan: LoadPlan | None = None, *, keep: bool = False,
             attempts_out: list[Attempt] | None = None,
             on_tick: Callable[[int, float], None] | None = None) -> LoadReport:
    """Run ``plan`` against ``adapter``, verify, clean up (unless ``keep``), report.

    Never raises for what the store does during the run: failures are counted by
    category, and a category no retry can fix (credentials, configuration, an
    unsupported operation) ends the run early with ``fatal`` set. ``attempts_out``
    receives every attempt (turn, version, outcome, when it settled); ``on_tick(acked,
    elapsed_s)`` is called a few times a second while the writers run (progress).

    Interrupted (a signal raised in the calling thread), it stops the writers, removes
    what the run wrote and raises :class:`LoadInterrupted`.
    """
    plan = plan or LoadPlan()
    prefix = plan.prefix or new_load_prefix()
    notes: list[str] = []
    events_per_turn = plan.events_per_turn
    if events_per_turn and adapter.event_store() is None:
        notes.append(f"backend {getattr(adapter, 'name', '?')!r} has no event store: turns "
                     "carry no events")
        events_per_turn = 0
    run = _Run(plan, prefix, events_per_turn)
    started = time.monotonic()
    deadline = started + plan.duration_s
    threads = [threading.Thread(target=_writer, args=(adapter, run, i, deadline),
                                name=f"semvec-load-{i}", daemon=True)
               for i in range(plan.writers)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.25 if on_tick is not None else None)
                if on_tick is not None:
                    on_tick(run.acked, time.monotonic() - started)
        elapsed = time.monotonic() - started
        try:
            verification = verify(adapter, run, plan.verify_timeout_s)
        except Exception as exc:  # noqa: BLE001 - an audit that cannot read proves nothing
            verification = Verification(sessions=len(run.session_ids),
                                        problems=[f"verification could not read the store: "
                                                  f"{error_category(exc)}: {exc}"])
    except BaseException as exc:  # a signal (Ctrl-C, SIGTERM) mid-run: stop, then clean up
        run.stop.set()
        for thread in threads:
            if thread.is_alive():
                thread.join(plan.verify_timeout_s)
        if keep:
            raise
        # a second signal here escapes as itself: the caller then knows cleanup did not finish
        problems = cleanup(adapter, run, plan.verify_timeout_s)
        raise LoadInterrupted(prefix, plan.sessions, problems, exc) from exc
    cleanup_problems = [] if keep else cleanup(adapter, run, plan.verify_timeout_s)
    if attempts_out is not None:
        attempts_out.extend(run.attempts)
    outcomes = Counter(a.outcome for a in run.attempts)
    errors = {k: v for k, v in sorted(run.errors.items()) if k != "conflict"}
    return LoadReport(
        backend=str(getattr(adapter, "name", "?")),
        prefix=prefix,
        writers=plan.writers,
        sessions=plan.sessions,
        events_per_turn=events_per_turn,
        elapsed_s=round(elapsed, 3),
        attempts=len(run.attempts),
        commits=outcomes[ACKED],
        conflicts=outcomes[CONFLICT],
        unknown=outcomes[UNKNOWN],
        errors=errors,
        verification=verification,
        fatal=run.fatal,
        cleanup_problems=cleanup_problems,
        notes=notes,
    )
