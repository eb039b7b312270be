"""Racing writers: compare-and-set must give every version exactly one winner.

Writers are threads released together by a barrier; each reads the current version and
tries to move it on. A store whose check and write are not one atomic step lets two
writers both be told they won the same version, which is a lost update.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any, Callable

from backends.conformance.catalogue import case
from backends.conformance.context import CaseContext, describe_exception
from backends.errors import is_state_version_conflict

_JOIN_TIMEOUT = 60.0


def _race(ctx: CaseContext, writers: int, body: Callable[[int], None]) -> list[str]:
    """Run ``body(writer_index)`` in threads released together; return unexpected errors."""
    barrier = threading.Barrier(writers)
    errors: list[str] = []
    lock = threading.Lock()

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=_JOIN_TIMEOUT)
            body(index)
        except Exception as exc:  # noqa: BLE001
            with lock:
                errors.append(describe_exception(exc))

    threads = [threading.Thread(target=run, args=(i,), daemon=True,
                                name=f"semvec-conformance-writer-{i}") for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(_JOIN_TIMEOUT)
    if any(t.is_alive() for t in threads):
        ctx.fail("racing writers", f"all {writers} writers finish within {_JOIN_TIMEOUT:.0f}s",
                 "some were still running (a hung call)")
    return errors


def _check_winners(ctx: CaseContext, sid: str, wins: list[tuple[int, bytes]],
                   what: str) -> None:
    counts = Counter(version for version, _ in wins)
    doubles = sorted(v for v, n in counts.items() if n > 1)
    ctx.expect(not doubles, f"versions acknowledged by {what}", "each version to one writer",
               f"version(s) {doubles} acknowledged to several writers")
    final = ctx.call("load_full after the race", lambda: ctx.store.load_full(sid))
    ctx.expect(final is not None, "session after the race", "a row", "None")
    ctx.expect_equal(final.version, 1 + len(wins), f"final version after {len(wins)} "
                     f"successful {what} (1 + successes)")
    ctx.expect_equal(sorted(counts), list(range(2, 2 + len(wins))),
                     f"versions acknowledged by {what}")
    winner_blob = dict(wins).get(final.version)
    ctx.expect_equal(bytes(final.blob), winner_blob,
                     "stored blob against the blob of the writer told it won the last version")


def _race_compare_and_set(ctx: CaseContext, write: Callable[..., int], what: str,
                          success: str) -> None:
    """Insert a session with ``write``, let ``ctx.options.writers`` threads race to move it
    on with ``write`` (retrying lost races), then check every version had one winner."""
    sid = ctx.session()
    ctx.call("insert", lambda: write(sid, b"start", expected_version=None))
    wins: list[tuple[int, bytes]] = []
    lock = threading.Lock()

    def body(index: int) -> None:
        for attempt in range(ctx.options.attempts):
            current = ctx.store.current_version(sid)
            blob = f"writer-{index}-attempt-{attempt}".encode()
            try:
                version = write(sid, blob, expected_version=current)
            except Exception as exc:  # noqa: BLE001
                if is_state_version_conflict(exc):
                    continue
                raise
            with lock:
                wins.append((version, blob))

    errors = _race(ctx, ctx.options.writers, body)
    ctx.expect(not errors, what, "only successes and StateVersionConflict",
               "; ".join(sorted(set(errors))[:3]))
    ctx.expect(bool(wins), what, f"at least one successful {success}", "none")
    _check_winners(ctx, sid, wins, what)


@case("concurrency")
def racing_saves(ctx: CaseContext) -> None:
    """N threads race save() on one session; no version is acknowledged twice."""
    _race_compare_and_set(ctx, ctx.store.save, "racing saves", "save")


@case("concurrency")
def racing_commit_turns(ctx: CaseContext) -> None:
    """N threads race commit_turn on one session; no version is acknowledged twice."""
    _race_compare_and_set(ctx, ctx.commit_turn, "racing commit_turns", "turn")


@case("concurrency")
def racing_inserts(ctx: CaseContext) -> None:
    """N threads insert the same new session at once; exactly one wins."""
    sid = ctx.session()
    wins: list[tuple[int, bytes]] = []
    lock = threading.Lock()

    def body(index: int) -> None:
        blob = f"inserter-{index}".encode()
        try:
            version = ctx.store.save(sid, blob, expected_version=None)
        except Exception as exc:  # noqa: BLE001
            if is_state_version_conflict(exc):
                return
            raise
        with lock:
            wins.append((version, blob))

    errors = _race(ctx, ctx.options.writers, body)
    ctx.expect(not errors, "racing inserts", "only successes and StateVersionConflict",
               "; ".join(sorted(set(errors))[:3]))
    ctx.expect_equal(len(wins), 1, "number of inserts told they created the session")
    final = ctx.call("load_full", lambda: ctx.store.load_full(sid))
    ctx.expect_equal((final.version, bytes(final.blob)) if final else None,
                     (1, wins[0][1]), "row against the one winning insert")


# -- processes, not threads ----------------------------------------------------------------


def _process_race(ctx: CaseContext, zygote, mode: str) -> None:
    """``ctx.options.processes`` workers, each with its own adapter, race ``mode``
    (``save`` or ``turn``) on one session; check one winner per version, visible
    refusals, the last winner's blob stored, and only winning turns' events."""
    import os
    import tempfile

    from backends.conformance.children import read_json, turn_event_id, wait_for

    sid, user = ctx.session(f"proc-{mode}"), ctx.user(f"proc-{mode}")
    owner = ctx.owner("tenant-proc")
    processes, attempts = ctx.options.processes, ctx.options.process_attempts
    for index in range(processes):  # every id a worker may write, for cleanup
        for attempt in range(attempts):
            ctx.event_ids.append(str(turn_event_id(sid, f"p{index} a{attempt}")))
    ctx.call("insert", lambda: ctx.store.save(sid, b"start", expected_version=None,
                                              owner_subject=owner))
    with tempfile.TemporaryDirectory(prefix="semvec-conf-race-") as tmp:
        go = os.path.join(tmp, "go")
        jobs: list[dict[str, Any]] = [{"kind": "race", "mode": mode, "session": sid, "user": user, "owner": owner,
                 "index": i, "attempts": attempts,
                 "ready_path": os.path.join(tmp, f"ready-{i}"), "go_path": go,
                 "result_path": os.path.join(tmp, f"result-{i}.json"),
                 "error_path": os.path.join(tmp, f"error-{i}.json")} for i in range(processes)]
        pids = [zygote.fork(job) for job in jobs]
        ready = wait_for(lambda: all(os.path.exists(j["ready_path"]) for j in jobs), 60,
                         interval=0.005)
        open(go, "w").close()
        statuses = [zygote.wait(pid, _JOIN_TIMEOUT) for pid in pids]
        failures = [read_json(j["error_path"]) for j in jobs]
        broken = [f["error"] for f in failures if f]
        ctx.expect(not broken, f"{processes} child processes racing {mode}s",
                   "each child builds its adapter and races", "; ".join(broken[:3]))
        ctx.expect(ready and all(s == 0 for s in statuses), f"child processes racing {mode}s",
                   f"all {processes} finish within {_JOIN_TIMEOUT:.0f}s", f"exit statuses {statuses}")
        results = [read_json(j["result_path"]) or {} for j in jobs]
    errors = [e for r in results for e in r.get("errors", [])]
    ctx.expect(not errors, f"racing {mode}s across processes",
               "only successes and StateVersionConflict", "; ".join(sorted(set(errors))[:3]))
    wins = [(int(v), label) for r in results for v, label in r.get("wins", [])]
    lost = [label for r in results for label in r.get("conflicts", [])]
    what = f"{mode}s racing in {processes} processes"
    ctx.expect(len(wins) + len(lost) == processes * attempts, what,
               f"{processes * attempts} attempts answered", f"{len(wins) + len(lost)}")
    ctx.expect(bool(wins), what, "at least one winner", "none")
    _check_winners(ctx, sid, [(v, f"{sid} {label}".encode()) for v, label in wins], what)
    if mode != "turn":
        return
    events = ctx.require_events()
    listed = ctx.call(f"events of {user!r}", lambda: events.list_events(user))
    landed = sorted(e.content for e in listed)
    ctx.expect_equal(landed, sorted(label for _v, label in wins),
                     "events after the race (exactly those of the winning turns, once each)")


@case("concurrency", needs_event_turns=True)
def processes(ctx: CaseContext) -> None:
    """Child processes, each with its own adapter, race saves and turns: one winner per
    version, the losers refused, losing turns' events never land."""
    from backends.conformance.children import Zygote, require_children

    recipe = require_children(ctx)
    with Zygote(recipe) as zygote:
        _process_race(ctx, zygote, "save")
        if ctx.events is None:
            ctx.notes.append("turns with events: not applicable (event_store() is None)")
            return
        _process_race(ctx, zygote, "turn")
