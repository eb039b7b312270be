"""The child side of the cross-process cases: ``python -m backends.conformance.zygote``.

Reads the recipe (one JSON line on stdin), builds and closes one adapter (so the drivers
are imported before any fork), checks that it then holds no connection (a pool opened at
import or by the factory would be shared by every fork: refused with that cause), answers
``{"ready": true}``,
then serves one JSON request per line: ``fork`` (a worker running a job; answers its pid)
and ``wait`` (a worker's exit status). Between requests it holds no connection and runs
no thread of its own, so a fork is a clean copy; each worker builds its own adapter from the recipe. On EOF it kills
the workers still alive. Workers report through files the parent names (acks, results),
never through the zygote's stdout, which is the protocol.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from typing import Any

from backends.conformance.children import (
    AdapterRecipe,
    turn_blob,
    turn_event,
    turn_event_id,
    turn_labels,
)

#: A worker never outlives this, whatever happens to its parents.
_WORKER_DEADLINE = 120.0


def _describe(exc: BaseException) -> str:
    from backends.conformance.context import describe_exception

    return describe_exception(exc)


def _write_json(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.partial"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(tmp, path)


def _turns(recipe: AdapterRecipe, job: dict[str, Any]) -> None:
    """Commit turns with events in a loop until killed; append each acknowledged version
    to the ack file (one write per line, after commit_turn returned)."""
    from backends.conformance.drive import commit_turn

    adapter = recipe.build()
    sid, user, owner = job["session"], job["user"], job.get("owner")
    version, per_turn = int(job["version"]), int(job["events_per_turn"])
    ack = os.open(job["ack_path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    started, parent = time.monotonic(), os.getppid()
    while time.monotonic() - started < _WORKER_DEADLINE and os.getppid() == parent:
        nxt = version + 1
        events = [turn_event(user, sid, owner, label) for label in turn_labels(nxt, per_turn)]
        got = commit_turn(adapter, sid, turn_blob(sid, nxt), expected_version=version,
                          owner_subject=owner, events=events)
        if got != nxt:
            raise RuntimeError(f"commit_turn returned {got!r}, expected {nxt}")
        os.write(ack, f"{nxt}\n".encode())
        version = nxt


def _race(recipe: AdapterRecipe, job: dict[str, Any]) -> None:
    """Build an adapter, say ready, wait for the start file, then race compare-and-set
    (``save`` or ``turn``) on one session; the outcome of every attempt goes to the
    result file."""
    from backends.conformance.drive import StoreDriver, commit_turn
    from backends.errors import is_state_version_conflict

    adapter = recipe.build()
    store = StoreDriver(adapter.state_store())
    sid, user, owner = job["session"], job["user"], job.get("owner")
    index, mode = int(job["index"]), job["mode"]
    open(job["ready_path"], "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(job["go_path"]):
        if time.monotonic() > deadline:
            raise RuntimeError("never told to start")
        time.sleep(0.001)
    wins, conflicts, errors = [], [], []
    for attempt in range(int(job["attempts"])):
        label = f"p{index} a{attempt}"
        blob = f"{sid} {label}".encode()
        try:
            current = store.current_version(sid)
            if mode == "save":
                version = store.save(sid, blob, expected_version=current, owner_subject=owner)
            else:
                version = commit_turn(adapter, sid, blob, expected_version=current,
                                      owner_subject=owner,
                                      events=[turn_event(user, sid, owner, label)])
        except Exception as exc:  # noqa: BLE001 - the outcome is what the parent judges
            if is_state_version_conflict(exc):
                conflicts.append(label)
            else:
                errors.append(_describe(exc))
            continue
        wins.append([version, label])
    _write_json(job["result_path"], {"wins": wins, "conflicts": conflicts, "errors": errors})
    try:
        adapter.close()
    except Exception:  # noqa: BLE001
        pass


def _writer(recipe: AdapterRecipe, job: dict[str, Any]) -> None:
    """The failover group's writer: commit turns on one session from version 1 until the
    stop file appears or a turn fails, and keep the history the audit reads: ``try N``
    before each call, ``ack N T`` once it returned N (T: the monotonic clock, which every
    process on the machine shares), ``err N REASON`` when it raised (then stop), one
    O_APPEND write per line. With ``retry_s``, a failed turn is sent again unchanged (an
    identical retry is idempotent) until it is answered or ``retry_s`` passed, each
    failure a ``fail N REASON`` line; a conflict ends the writer at once."""
    from backends.conformance.drive import commit_turn
    from backends.errors import is_state_version_conflict

    adapter = recipe.build()
    sid, user, owner = job["session"], job["user"], job.get("owner")
    per_turn, retry_s = int(job["events_per_turn"]), float(job.get("retry_s") or 0)
    log = os.open(job["history_path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    started, parent, version = time.monotonic(), os.getppid(), 0

    def going() -> bool:
        return (not os.path.exists(job["stop_path"]) and os.getppid() == parent
                and time.monotonic() - started < _WORKER_DEADLINE)

    while going():
        nxt = version + 1
        os.write(log, f"try {nxt}\n".encode())
        events = [turn_event(user, sid, owner, label) for label in turn_labels(nxt, per_turn)]
        giving_up = time.monotonic() + retry_s
        while True:
            try:
                got = commit_turn(adapter, sid, turn_blob(sid, nxt),
                                  expected_version=version or None, owner_subject=owner,
                                  events=events)
            except Exception as exc:  # noqa: BLE001 - the outcome is what the audit judges
                reason = _describe(exc).replace("\n", " ")
                if (time.monotonic() < giving_up and going()
                        and not is_state_version_conflict(exc)):
                    os.write(log, f"fail {nxt} {reason}".encode() + b"\n")
                    time.sleep(0.02)
                    continue
                os.write(log, f"err {nxt} {reason}".encode() + b"\n")
                return
            break
        if got != nxt:
            os.write(log, f"err {nxt} commit_turn returned {got!r}\n".encode())
            return
        os.write(log, f"ack {nxt} {time.monotonic():.6f}\n".encode())
        version = nxt


JOBS = {"turns": _turns, "race": _race, "writer": _writer}


def _worker(recipe: AdapterRecipe, job: dict[str, Any]) -> None:
    """In the forked child: never return into the zygote's loop."""
    code = 0
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1):
            os.dup2(devnull, fd)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        JOBS[job["kind"]](recipe, job)
    except BaseException as exc:  # noqa: BLE001
        code = 1
        try:
            _write_json(job["error_path"], {"error": _describe(exc),
                                            "trace": traceback.format_exc()[-2000:]})
        except Exception:  # noqa: BLE001
            pass
    finally:
        os._exit(code)


def _warm(recipe: AdapterRecipe) -> None:
    """Build one adapter and close it before any fork: the drivers it imports lazily are
    then imported once here (a worker starts in milliseconds, not after a second of
    imports), and a recipe that cannot build in a child is known before any worker."""
    from backends.contract import close_quietly

    adapter = recipe.build()
    close_quietly(adapter)


def held_connections() -> list[str]:
    """The connected sockets this process holds (``host:port`` or a socket path, never
    more): after the warm-up build and close there must be none, else every forked worker
    would share them (a module-level pool, e.g. a SQLAlchemy engine, opened at import or
    by the factory and not released by ``close()``). Listening and unnamed sockets are
    left out: they are nobody's connection to a store."""
    import socket
    import stat

    try:
        fds = sorted(int(name) for name in os.listdir("/proc/self/fd"))
    except OSError:
        fds = list(range(3, 1024))
    found: list[str] = []
    for fd in fds:
        if fd < 3:
            continue
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            dup = os.dup(fd)
        except OSError:
            continue
        try:
            sock = socket.socket(fileno=dup)
        except OSError:
            os.close(dup)
            continue
        try:
            peer = sock.getpeername()
        except OSError:
            peer = None
        finally:
            sock.close()
        if not peer:
            continue
        found.append(f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else
                     (peer.decode("utf-8", "replace") if isinstance(peer, bytes) else str(peer)))
    return found


def shared_connection_reason(held: list[str]) -> str:
    """The cross-process cases' reason for not running when the zygote holds ``held``."""
    shown = ", ".join(held[:3]) + (" …" if len(held) > 3 else "")
    return (f"the adapter holds {len(held)} open connection(s) before the suite forks (to "
            f"{shown}): opened at import or by the factory and not released by close(), e.g. "
            "a module-level connection pool such as a SQLAlchemy engine; forked workers would "
            "share them (and hang on each other's replies). Open connections lazily, or "
            "dispose the pool in a forked child (SQLAlchemy: engine.dispose(close=False))")


def _wait(pid: int, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return -1
        if done:
            if os.WIFSIGNALED(status):
                return -os.WTERMSIG(status)
            return os.WEXITSTATUS(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.002)


def main() -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints of an imported module never corrupt the protocol
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we end

    def reply(data: dict[str, Any]) -> None:
        proto.write(json.dumps(data) + "\n")
        proto.flush()

    first = sys.stdin.readline()
    try:
        recipe = AdapterRecipe.from_dict(json.loads(first)["recipe"])
        _warm(recipe)
    except Exception as exc:  # noqa: BLE001
        reply({"error": _describe(exc)})
        return
    held = held_connections()
    if held:  # found now, before any fork: not after the workers hang on a shared socket
        reply({"error": shared_connection_reason(held), "cause": "shared-connection"})
        return
    reply({"ready": True})
    live: set[int] = set()
    try:
        for line in sys.stdin:
            request = json.loads(line)
            op = request.get("op")
            if op == "fork":
                pid = os.fork()
                if pid == 0:
                    proto.close()
                    _worker(recipe, request["job"])
                live.add(pid)
                reply({"pid": pid})
            elif op == "wait":
                status = _wait(int(request["pid"]), float(request.get("timeout", 0)))
                if status is not None:
                    live.discard(int(request["pid"]))
                reply({"status": status})
            else:
                reply({"error": f"unknown op {op!r}"})
    finally:
        for pid in live:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass


__all__ = ["main", "turn_event_id"]

if __name__ == "__main__":
    main()
