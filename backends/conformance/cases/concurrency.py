"""Racing writers: compare-and-set must give every version exactly one winner.

Writers are threads released together by a barrier; each reads the current version and
tries to move it on. A store whose check and write are not one atomic step lets two
writers both be told they won the same version, which is a lost update.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Callable

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
